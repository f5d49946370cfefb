"""The real Slurm of the integration tier, described by an env file (``SLURM_TEST_ENV``).

Default: the 24.11 of ``scripts/services/slurm-modern.sh``. The same tier runs unchanged on any
Slurm such a file describes (``make test`` also runs it on the machine's 22.05 of
``scripts/services/slurm.sh``); the keys, all read by
:func:`scheduler_adapters.registry.slurm_settings_from_env` or here:

- ``SLURMRESTD_URL``: slurmrestd's base URL; ``SLURM_API_VERSION``: empty to discover, or pin one;
- ``SLURM_JWT_KEY``: the HS256 key file (tokens are minted from it) or ``SLURM_JWT``: a token;
- ``SLURM_CLUSTER``, ``SLURM_PARTITION`` (a partition with ``gpu:a100`` cards, default ``gpu``),
  ``SLURM_ADMIN_USER`` (AdminLevel=Administrator), ``SLURM_TEST_USERS`` (users who may run jobs);
- ``SLURM_COMMAND_PREFIX`` (shell words: how to run ``sacctmgr``/``scontrol`` on the cluster,
  e.g. ``ssh slurm-head``) or ``SLURM_MODERN_ROOT`` (run them through ``chroot`` into that root);
- ``SLURM_RELEASE`` (informational; the version test checks 22.05 -> v0.0.38, 24.11 -> v0.0.42).

Tests fail, never skip, when it is not there: a green run must mean Slurm was exercised. The
cluster's nodes, partitions and GPU GRES are read from it (:func:`cluster_shape`, through
``scontrol`` rather than the adapter under test); a test that needs a shape the cluster does not
offer (8 cards of one type on one node, two GPU types, a node a recorded history names) skips,
saying which.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from scheduler_adapters.errors import SchedulerError
from scheduler_adapters.registry import (
    build_scheduler_adapter,
    read_env_file,
    slurm_command_prefix,
    slurm_settings_from_env,
)
from scheduler_adapters.slurm.client import SlurmRestAdapter

ENV_FILE = Path(
    os.environ.get("SLURM_TEST_ENV", "/opt/portal-slurm-modern/var/lib/slurm-test/slurm-test.env")
)
SETUP_HINT = (
    "start it with `sudo bash scripts/services/slurm-modern.sh` (or `make services`), "
    "or point SLURM_TEST_ENV at another cluster's env file"
)
T = TypeVar("T")


def slurm_env() -> dict[str, str]:
    """The env file the setup script writes; fails the test when it is missing."""
    if not ENV_FILE.is_file():
        pytest.fail(
            f"Slurm test cluster not set up: {ENV_FILE} is missing; {SETUP_HINT}", pytrace=False
        )
    return read_env_file(ENV_FILE)


def build_adapter(env: dict[str, str], **overrides: Any) -> SlurmRestAdapter:
    settings = slurm_settings_from_env(env)
    for command in ("SACCTMGR", "SCONTROL"):  # keep the env file's command prefix (chroot, ssh)
        if command in overrides:
            overrides = overrides | {command: settings[command] | overrides[command]}
    settings |= overrides
    adapter = build_scheduler_adapter(settings)
    assert isinstance(adapter, SlurmRestAdapter)
    return adapter


def require_reachable(adapter: SlurmRestAdapter) -> None:
    try:
        adapter.list_nodes()
    except SchedulerError as exc:
        pytest.fail(f"Slurm test cluster not reachable ({exc}); {SETUP_HINT}", pytrace=False)


def unique_account(prefix: str = "ct") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def eventually(read: Callable[[], T], accept: Callable[[T], bool], *, timeout_s: float = 30) -> T:
    """Call ``read`` until ``accept`` holds for its result; fail showing the last one."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = read()
        if accept(value):
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"still not there after {timeout_s}s: {value!r}")
        time.sleep(0.25)


@dataclass(frozen=True)
class NodeShape:
    """One node as ``scontrol show nodes`` prints it: its partitions and its ``gpu`` GRES
    cards by type (``None``: untyped ``gpu:N``)."""

    hostname: str
    partitions: frozenset[str]
    gpus: Counter


@dataclass(frozen=True)
class ClusterShape:
    """Every node of the cluster under test, by host name."""

    nodes: tuple[NodeShape, ...]

    @property
    def hostnames(self) -> set[str]:
        return {node.hostname for node in self.nodes}

    def cards(self) -> Counter:
        """GPU cards per ``(partition, type)``, every partition a node is in counted."""
        return Counter(
            {
                (partition, gres_type): count
                for node in self.nodes
                for partition in node.partitions
                for gres_type, count in node.gpus.items()
            }
        )

    def in_partition(self, partition: str) -> list[NodeShape]:
        return sorted(
            (n for n in self.nodes if partition in n.partitions), key=lambda n: n.hostname
        )

    def most_on_one_node(self, partition: str, gres_type: str) -> int:
        """The most cards of ``gres_type`` one node of ``partition`` has (0: none)."""
        return max((n.gpus[gres_type] for n in self.in_partition(partition)), default=0)

    def require(self, partition: str, gres_type: str, cards: int) -> None:
        """Skip the test, saying why, unless one node of ``partition`` has ``cards`` cards of
        ``gres_type``."""
        if self.most_on_one_node(partition, gres_type) < cards:
            pytest.skip(
                f"needs {cards} gpu:{gres_type} card(s) on one node of partition {partition!r}; "
                f"the cluster has {self.describe(partition)}"
            )

    def require_node(self, partition: str, *, cards: int) -> tuple[str, str]:
        """``(host name, GRES type)`` of the first node of ``partition`` with ``cards`` cards
        of one type; skips without one."""
        for node in self.in_partition(partition):
            for gres_type, count in sorted(node.gpus.items(), key=lambda i: str(i[0])):
                if gres_type and count >= cards:
                    return node.hostname, gres_type
        pytest.skip(
            f"needs a node of partition {partition!r} with {cards} cards of one GPU type; the "
            f"cluster has {self.describe(partition)}"
        )

    def describe(self, partition: str) -> str:
        nodes = self.in_partition(partition)
        if not nodes:
            return f"no node in {partition!r}"
        return "; ".join(
            f"{n.hostname} "
            + (", ".join(f"{c} {t or 'untyped'}" for t, c in sorted(n.gpus.items(), key=str))
               or "no GPUs")
            for n in nodes
        )  # fmt: skip


# ``Gres=gpu:a100:4``, ``gpu:h100:8(S:0-1)``, ``gpu:2``, several comma-separated
_GRES = re.compile(r"(?:^|,)gpu(?::(?P<type>[^:(),]+))?:(?P<count>\d+)")


def cluster_shape() -> ClusterShape:
    """The cluster ``SLURM_TEST_ENV`` describes, from ``scontrol show nodes --oneliner`` run
    next to it (not from the adapter, which the contract tests check against it)."""
    done = subprocess.run(
        slurm_command("scontrol", "show", "nodes", "--oneliner"),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return parse_scontrol_nodes(done.stdout)


def parse_scontrol_nodes(text: str) -> ClusterShape:
    """``scontrol show nodes --oneliner``: one node a line, ``Key=value`` words (a value with
    spaces, such as ``OS=``, leaves words without ``=``, which are dropped)."""
    nodes = []
    for line in text.splitlines():
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        if "NodeName" not in fields:
            continue
        gpus: Counter = Counter()
        for found in _GRES.finditer(fields.get("Gres", "")):
            gpus[found["type"]] += int(found["count"])
        partitions = frozenset(p for p in fields.get("Partitions", "").split(",") if p)
        nodes.append(NodeShape(fields["NodeName"], partitions, gpus))
    return ClusterShape(tuple(nodes))


def slurm_command(*argv: str) -> list[str]:
    """``argv`` as run on the test cluster: through the env file's command prefix (a chroot
    for slurm-modern.sh's 24.11, nothing for the machine's own 22.05)."""
    env = read_env_file(ENV_FILE) if ENV_FILE.is_file() else {}
    return [*slurm_command_prefix(env), *argv]


def sacctmgr(*arguments: str) -> str:
    """Run the test cluster's own sacctmgr, return its output."""
    done = subprocess.run(
        slurm_command("sacctmgr", "--noheader", "--parsable2", *arguments),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return done.stdout.strip()


def enforced_grp_tres(account: str) -> str:
    """The GrpTRES slurmctld enforces for the account's association (its cached copy, which
    22.05 can let drift from slurmdbd's)."""
    done = subprocess.run(
        slurm_command("scontrol", "show", "assoc_mgr", f"accounts={account}", "flags=assoc"),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    lines = done.stdout.splitlines()
    for index, line in enumerate(lines):
        if f"Account={account} UserName= " in line:
            for detail in lines[index + 1 :]:
                if "GrpTRES=" in detail:
                    return detail.strip().removeprefix("GrpTRES=")
    raise AssertionError(f"slurmctld has no association for {account}: {done.stdout}")


def enforced_cards(account: str, gres_type: str) -> float:
    """Cards of ``gres_type`` slurmctld lets the account use: N (no limit) is infinity."""
    match = re.search(rf"gres/gpu:{gres_type}=(\w+)\(", enforced_grp_tres(account))
    assert match, enforced_grp_tres(account)
    return math.inf if match[1] == "N" or int(match[1]) >= 2**62 else int(match[1])


class Cleanup:
    """Cancels the jobs and deletes the accounts a test made, so reruns start clean."""

    def __init__(self, adapter: SlurmRestAdapter) -> None:
        self.adapter = adapter
        self.jobs: list[int] = []
        self.accounts: list[str] = []

    def run(self) -> None:
        for job_id in self.jobs:
            try:
                self.adapter.cancel_job(job_id)
            except SchedulerError:
                pass
        if self.accounts:
            names = ",".join(self.accounts)
            for _ in range(20):  # slurmdbd refuses while a cancelled job is still completing
                if "Job(s) active" not in sacctmgr("-i", "delete", "account", f"name={names}"):
                    break
                time.sleep(0.5)
