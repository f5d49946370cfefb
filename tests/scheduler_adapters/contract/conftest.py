"""One harness, two schedulers: every contract test runs against FakeScheduler (unit tier) and
against SlurmRestAdapter on the real test cluster (integration tier)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import pytest
from integration.slurm.slurm_cluster import (
    Cleanup,
    ClusterShape,
    NodeShape,
    build_adapter,
    cluster_shape,
    eventually,
    require_reachable,
    slurm_env,
    unique_account,
)

from scheduler_adapters.base import SchedulerAdapter
from scheduler_adapters.fake import FakeScheduler
from scheduler_adapters.records import JobSpec

T = TypeVar("T")

# The test clusters of scripts/services/slurm-modern.sh and slurm.sh: partition gpu with nodes
# gpu-a100-01 (4 a100), gpu-4090-01 (2 rtx4090) and gpu-h100-01 (8 h100).
TEST_CLUSTER = {"gpu": {"a100": 4, "rtx4090": 2, "h100": 8}}
# The fake's nodes: one per partition and type, fake-<partition>-<type> (scheduler_adapters.fake).
FAKE_SHAPE = ClusterShape(
    tuple(
        NodeShape(f"fake-{partition}-{gres_type}", frozenset({partition}), Counter({gres_type: n}))
        for partition, types in TEST_CLUSTER.items()
        for gres_type, n in types.items()
    )
)


@dataclass
class Scheduler:
    """What a contract test gets: the adapter, and helpers that hide fake-versus-real."""

    adapter: SchedulerAdapter
    real: bool
    shape: ClusterShape  # what the cluster offers, read apart from the adapter
    cleanup: Cleanup | None = None
    partition: str = "gpu"
    made: list[str] = field(default_factory=list)

    def needs(self, gres_type: str, cards: int) -> None:
        """Skip, saying why, unless one node of the partition has ``cards`` ``gres_type``."""
        self.shape.require(self.partition, gres_type, cards)

    def account_name(self) -> str:
        name = unique_account()
        self.made.append(name)
        if self.cleanup is not None:
            self.cleanup.accounts.append(name)
        return name

    def account(self, *, user: str | None = None) -> str:
        """A new account, with ``user`` associated on the partition when given."""
        name = self.account_name()
        self.adapter.ensure_account(name, description="contract test", organization="portal")
        if user is not None:
            self.adapter.ensure_user_association(name, user, self.partition)
        return name

    def job(self, account: str, **fields) -> JobSpec:
        values = {
            "account": account,
            "user": "alice",
            "partition": self.partition,
            "script": "#!/bin/bash\nsleep 300\n",
            "gpus": 1,
            "gres_type": "a100",
            "name": "contract",
        }
        return JobSpec(**(values | fields))

    def submit(self, spec: JobSpec) -> int:
        job_id = self.adapter.submit_job(spec)
        if self.cleanup is not None:
            self.cleanup.jobs.append(job_id)
        return job_id

    def eventually(self, read: Callable[[], T], accept: Callable[[T], bool]) -> T:
        return eventually(read, accept, timeout_s=30)


@pytest.fixture(scope="session")
def real_slurm() -> Iterator[SchedulerAdapter]:
    adapter = build_adapter(slurm_env())
    require_reachable(adapter)
    yield adapter
    adapter.close()


@pytest.fixture(scope="session")
def real_shape(real_slurm) -> ClusterShape:
    return cluster_shape()


@pytest.fixture(params=["fake", pytest.param("slurm", marks=pytest.mark.integration)])
def scheduler(request) -> Iterator[Scheduler]:
    if request.param == "fake":
        yield Scheduler(FakeScheduler(TEST_CLUSTER), real=False, shape=FAKE_SHAPE)
        return
    adapter = request.getfixturevalue("real_slurm")
    tidy = Cleanup(adapter)
    yield Scheduler(adapter, real=True, shape=request.getfixturevalue("real_shape"), cleanup=tidy)
    tidy.run()
