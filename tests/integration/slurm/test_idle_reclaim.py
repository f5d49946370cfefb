"""Idle reclamation end to end (issue #7's "Done when"): real jobs in the real Slurm, the cards
they hold read from slurmrestd, their dcgm-exporter series from the real Prometheus, and the
reclamation applied to the team accounts' ``GrpTRES`` in the real Slurm.

The Prometheus history (tests/integration/prometheus/dcgm_history.py) has the four A100 of
``gpu-a100-01``: card 0 at 90 %, card 1 at 0 % with no process memory, card 2 at 70 %, card 3
at 0 %, up to an hour past the fixture's start. Jobs start now; the scan looks at the window
that ends ``WINDOW + 1`` minutes later, which the jobs have filled (the unit tests do the same
with the fake Slurm's clock). Three teams share the partition:

- ``busy``: holds 1 card, its job runs on card 0 -> busy, never flagged, GrpTRES stays 1;
- ``idle``: holds 2 cards, its job sits on card 1, the other card runs nothing -> reclaimed
  (ended): GrpTRES 2 -> 0, the idle job left running;
- ``part``: holds 3 cards, its job uses card 2 -> shrunk to 1 card: GrpTRES 3 -> 1.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings
from factories import AllocationFactory, GpuFactory, NodeFactory, PoolFactory, TeamFactory
from integration.prometheus.dcgm_history import SLURM_AHEAD_S, SLURM_NODE
from integration.slurm.slurm_cluster import enforced_cards, eventually, sacctmgr

from pools.audit.models import AuditEvent
from pools.capacity.services import scheduler_binding
from pools.clusters import adapters
from pools.common.choices import AliasKind, AllocationStatus, IdleFindingState, Scheduler, TeamRole
from pools.inventory.models import GpuModel, GpuModelAlias
from pools.reclamation.models import IdleFinding, ReclamationPolicy
from pools.reclamation.services.scan import idle_scan
from pools.tenancy.models import Membership
from scheduler_adapters.records import JobSpec, JobState
from scheduler_adapters.registry import slurm_settings_from_env

pytestmark = [pytest.mark.integration, pytest.mark.django_db]
WINDOW = 5  # minutes: the policy minimum


def grp_tres(account: str) -> str:
    return sacctmgr("show", "assoc", f"account={account}", "user=", "format=grptres")


@pytest.fixture
def history_node(cluster, a100_partition) -> str:
    """The recorded dcgm history names its host ``SLURM_NODE`` (the test clusters' a100 node):
    a cluster whose a100 cards sit on another node cannot run this test, and says so."""
    node = next((n for n in cluster.in_partition(a100_partition) if n.hostname == SLURM_NODE), None)
    if node is None or node.gpus["a100"] < 4:
        pytest.skip(
            f"the recorded dcgm history is for {SLURM_NODE} with 4 gpu:a100 cards; the cluster "
            f"has {cluster.describe(a100_partition)}"
        )
    return SLURM_NODE


@pytest.fixture
def portal(slurm, slurm_settings, history_node, cleanup, prometheus, django_user_model):
    url, end = prometheus
    adapters.reset()
    with override_settings(
        SCHEDULERS={"slurm": slurm_settings_from_env(slurm_settings)}, PROMETHEUS_URL=url
    ):
        yield slurm, end
    adapters.reset()


def test_idle_cards_in_the_real_slurm_are_reclaimed_busy_ones_are_not(
    portal, cleanup, django_user_model, django_capture_on_commit_callbacks
):
    slurm, history_end = portal
    capture = django_capture_on_commit_callbacks
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    GpuModelAlias.objects.create(gpu_model=a100, value="a100", kind=AliasKind.ADMIN, key="a100")
    pool = PoolFactory(slug="gpu", scheduler=Scheduler.SLURM, slurm_partition="gpu")
    node = NodeFactory(hostname=SLURM_NODE, pool=pool)
    for index in range(4):
        GpuFactory(node=node, index=index, gpu_model=a100)
    ReclamationPolicy.objects.create(
        pool=pool, dry_run=False, window_minutes=WINDOW, grace_hours=0, cooldown_minutes=0
    )
    alice = django_user_model.objects.create_user("alice", email="alice@example.com")
    suffix = uuid.uuid4().hex[:6]
    started = datetime.now(UTC)
    allocations, accounts, jobs = {}, {}, {}
    for role, cards in (("busy", 1), ("idle", 2), ("part", 3)):
        account = f"ir-{role}-{suffix}"
        cleanup.accounts.append(account)
        team = TeamFactory(slug=account)
        Membership.objects.create(team=team, user=alice, role=TeamRole.MANAGER)
        allocation = AllocationFactory(
            team=team,
            pool=pool,
            gpu_model=a100,
            card_count=cards,
            status=AllocationStatus.ACTIVE,
            starts_at=started - timedelta(days=1),
            ends_at=started + timedelta(days=7),
        )
        with capture(execute=True):
            scheduler_binding.binding_apply(allocation)
        assert f"gres/gpu:a100={cards}" in grp_tres(account)
        allocations[role], accounts[role] = allocation, account

    # one one-card job per team, in order, so that they take cards 0, 1 and 2
    for role in ("busy", "idle", "part"):
        spec = JobSpec(
            account=accounts[role],
            user="alice",
            partition="gpu",
            gres_type="a100",
            gpus=1,
            time_limit_min=10,
            script="#!/bin/sh\nsleep 600\n",
        )
        jobs[role] = slurm.submit_job(spec)
        cleanup.jobs.append(jobs[role])
        eventually(lambda j=jobs[role]: slurm.get_job(j), lambda j: j.state is JobState.RUNNING)
    placed = {p.job_id: [(s.node, s.index) for s in p.slots] for p in slurm.running_gpu_jobs()}
    assert [placed[jobs[r]] for r in ("busy", "idle", "part")] == [
        [(SLURM_NODE, 0)],
        [(SLURM_NODE, 1)],
        [(SLURM_NODE, 2)],
    ], "another job holds cards on the node: the test needs it to itself"

    now = started + timedelta(minutes=WINDOW + 1)
    assert now.timestamp() < history_end + SLURM_AHEAD_S, "the Prometheus history ran out"
    with capture(execute=True):
        report = idle_scan(now=now)

    assert report.error is None, report.as_dict()
    assert (report.busy, report.idle, report.unknown) == (1, 2, 0), report.as_dict()
    assert report.reclaimed == 2, report.as_dict()
    for allocation in allocations.values():
        allocation.refresh_from_db()

    busy = allocations["busy"]
    assert (busy.status, busy.card_count) == (AllocationStatus.ACTIVE, 1)
    assert not IdleFinding.objects.filter(allocation=busy).exists()
    assert "gres/gpu:a100=1" in grp_tres(accounts["busy"])

    idle = allocations["idle"]
    assert idle.status == AllocationStatus.RECLAIMED
    finding = IdleFinding.objects.get(allocation=idle)
    assert (finding.state, finding.cards_reclaimed, finding.cards_in_use) == (
        IdleFindingState.RECLAIMED,
        2,
        0,
    )
    assert str(finding.mean_util_pct) == "0.00"  # card 1 at 0 %, the jobless card 0 %
    assert "gres/gpu:a100=0" in grp_tres(accounts["idle"])
    eventually(lambda: enforced_cards(accounts["idle"], "a100"), lambda cards: cards == 0)

    part = allocations["part"]
    assert (part.status, part.card_count) == (AllocationStatus.ACTIVE, 1)
    finding = IdleFinding.objects.get(allocation=part)
    assert (finding.cards_reclaimed, finding.cards_in_use) == (2, 1)
    # card 2 at 70 %, two jobless cards at 0 %: 70 / 3
    assert str(finding.mean_util_pct) == "23.33"
    assert "gres/gpu:a100=1" in grp_tres(accounts["part"])
    eventually(lambda: enforced_cards(accounts["part"], "a100"), lambda cards: cards == 1)

    # lowering GrpTRES never kills a running job
    for role in ("busy", "idle", "part"):
        assert slurm.get_job(jobs[role]).state is JobState.RUNNING
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"idle_finding.opened", "allocation.reclaimed", "allocation.shrunk"} <= actions
