"""Fixtures of the Slurm integration tier (needs ``scripts/services/slurm.sh`` to have run)."""

import uuid
from collections.abc import Iterator

import pytest
from integration.slurm.slurm_cluster import (
    Cleanup,
    ClusterShape,
    build_adapter,
    cluster_shape,
    require_reachable,
    slurm_env,
)

from scheduler_adapters.slurm.client import SlurmRestAdapter


@pytest.fixture(scope="session")
def slurm_settings() -> dict[str, str]:
    return slurm_env()


@pytest.fixture(scope="session")
def slurm(slurm_settings) -> Iterator[SlurmRestAdapter]:
    adapter = build_adapter(slurm_settings)  # the env file's version; empty: discovered
    require_reachable(adapter)
    yield adapter
    adapter.close()


@pytest.fixture(scope="session")
def cluster(slurm) -> ClusterShape:
    """The nodes, partitions and GPU GRES of the cluster under test, read from it."""
    return cluster_shape()


@pytest.fixture
def a100_partition(cluster, slurm_settings) -> str:
    """``SLURM_PARTITION``, when one of its nodes has 4 ``gpu:a100`` cards (what the portal's
    tests of this tier bind, as the test clusters have them); else the test skips, saying why."""
    partition = slurm_settings.get("SLURM_PARTITION", "gpu")
    cluster.require(partition, "a100", 4)
    return partition


@pytest.fixture
def cleanup(slurm) -> Iterator[Cleanup]:
    tidy = Cleanup(slurm)
    yield tidy
    tidy.run()


@pytest.fixture
def portal_slurm_team(a100_partition, cleanup, django_user_model):
    """A Slurm pool of 4 A100 on the test cluster's partition (GRES type ``a100`` mapped by an
    admin), a team with a fresh account name and manager alice, and a pool admin. Returns
    ``(pool, a100, team, alice, admin, submit)``; ``submit(cards)`` files a submitted request."""
    from datetime import timedelta

    from django.utils import timezone
    from factories import GpuFactory, NodeFactory, PoolFactory, TeamFactory

    from pools.capacity.models import CapacityRequest
    from pools.common.choices import AliasKind, RequestStatus, Scheduler, TeamRole
    from pools.inventory.models import GpuModel, GpuModelAlias
    from pools.tenancy.models import Membership

    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    GpuModelAlias.objects.create(gpu_model=a100, value="a100", kind=AliasKind.ADMIN, key="a100")
    pool = PoolFactory(
        slug="gpu",
        scheduler=Scheduler.SLURM,
        slurm_partition=a100_partition,
    )
    node = NodeFactory(pool=pool)
    for index in range(4):
        GpuFactory(node=node, index=index, gpu_model=a100)
    account = f"pt-{uuid.uuid4().hex[:8]}"
    cleanup.accounts.append(account)
    team = TeamFactory(slug=account)
    alice = django_user_model.objects.create_user("alice", password="x")
    Membership.objects.create(team=team, user=alice, role=TeamRole.MANAGER)
    admin = django_user_model.objects.create_user("admin", password="x", is_staff=True)

    def submit(cards: int) -> CapacityRequest:
        now = timezone.now()
        return CapacityRequest.objects.create(
            team=team,
            requested_by=alice,
            workload_kind="training",
            pool=pool,
            gpu_model=a100,
            card_count=cards,
            starts_at=now,
            ends_at=now + timedelta(days=7),
            justification="integration",
            status=RequestStatus.SUBMITTED,
        )

    return pool, a100, team, alice, admin, submit
