"""idle_scan / reclamation_undo against an in-memory Prometheus and Kubernetes (the fakes).

Each scenario: a Kubernetes pool with 4 L40S on one node, team ``nlp`` holding an active
allocation of 2 cards in namespace ``team-nlp`` since two days ago; the policy is live
(dry_run False) unless the test says otherwise: idle < 30 % over 30 min, grace 24 h.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from datetime import timedelta

import httpx
import pytest
from django.core import mail
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from factories import AllocationFactory, GpuFactory, NodeFactory, PoolFactory, TeamFactory
from reclamation_support import fake_k8s  # noqa: F401  (fixture)

from pools.audit.models import AuditEvent
from pools.capacity.models import Allocation
from pools.capacity.services import scheduler_binding
from pools.common.choices import AllocationStatus, GpuHealth, IdleFindingState, Scheduler, TeamRole
from pools.common.errors import InsufficientCapacity, InvalidTransition, PermissionDenied
from pools.inventory.models import GpuModel
from pools.reclamation.models import (
    Exemption,
    IdleFinding,
    IdleGroupEvaluation,
    ReclamationPolicy,
)
from pools.reclamation.services.scan import idle_finding_dismiss, idle_scan, reclamation_undo
from pools.tenancy.models import Membership, Team
from scheduler_adapters.prometheus import (
    DeviceUsage,
    PrometheusAdapter,
    Sample,
    summary_queries,
)
from scheduler_adapters.prometheus_fake import FakePrometheus

pytestmark = pytest.mark.django_db

T0 = timezone.now().replace(microsecond=0)
LATER = T0 + timedelta(hours=25)  # past the 24 h grace


def usage(uuid, util, *, namespace="team-nlp", host="k8s-n1", gap=None, fb=0.0):
    """Samples every 60 s from T0 - 1 h to LATER + 1 h at ``util`` % (``gap``: (from, to) with
    no samples)."""
    start, end = (T0 - timedelta(hours=1)).timestamp(), (LATER + timedelta(hours=1)).timestamp()
    stamps = [start + 60 * i for i in range(int((end - start) // 60) + 1)]
    if gap:
        stamps = [t for t in stamps if not gap[0].timestamp() <= t <= gap[1].timestamp()]
    return DeviceUsage(
        hostname=host,
        uuid=uuid,
        gpu="0",
        model_name="NVIDIA L40S",
        gpu_instance_id=None,
        mig_profile=None,
        namespace=namespace,
        pods=("p",),
        hpc_jobs=(),
        util_source="prof",
        util_pct=tuple(Sample(t, util) for t in stamps),
        fb_used_mib=tuple(Sample(t, fb) for t in stamps),
    )


@pytest.fixture
def world(fake_k8s, django_user_model, django_capture_on_commit_callbacks):  # noqa: F811
    l40s = GpuModel.objects.get(slug="l40s")
    pool = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    node = NodeFactory(hostname="k8s-n1", pool=pool, scheduler=Scheduler.KUBERNETES)
    for index in range(4):
        GpuFactory(
            node=node,
            index=index,
            gpu_model=l40s,
            raw_model_name="NVIDIA L40S",
            health=GpuHealth.OK,
        )
    team = TeamFactory(slug="nlp")
    alice = django_user_model.objects.create_user("alice", email="alice@example.com")
    Membership.objects.create(team=team, user=alice, role=TeamRole.MANAGER)
    allocation = AllocationFactory(
        team=team,
        pool=pool,
        gpu_model=l40s,
        card_count=2,
        status=AllocationStatus.ACTIVE,
        starts_at=T0 - timedelta(days=2),
        ends_at=T0 + timedelta(days=5),
    )
    with django_capture_on_commit_callbacks(execute=True):
        scheduler_binding.binding_apply(allocation)
    assert fake_k8s.get_gpu_quota("nlp").cards == 2
    policy = ReclamationPolicy.objects.create(pool=pool, dry_run=False)
    admin = django_user_model.objects.create_user("admin", is_staff=True)
    return {
        "pool": pool,
        "team": team,
        "allocation": allocation,
        "policy": policy,
        "k8s": fake_k8s,
        "admin": admin,
        "l40s": l40s,
    }


def scan(now, devices, capture, **kwargs):
    with capture(execute=True):
        return idle_scan(now=now, metrics=FakePrometheus(devices, **kwargs))


def test_busy_allocation_is_never_flagged(world, django_capture_on_commit_callbacks):
    devices = [usage("GPU-1", 85.0), usage("GPU-2", 40.0)]
    for now in (T0, LATER):
        report = scan(now, devices, django_capture_on_commit_callbacks)
        assert (report.busy, report.idle, report.unknown) == (1, 0, 0)
    assert not IdleFinding.objects.exists()
    assert mail.outbox == []


def test_idle_warned_once_then_reclaimed_after_grace(world, django_capture_on_commit_callbacks):
    devices = [usage("GPU-1", 1.0), usage("GPU-2", 2.0)]
    first = scan(T0, devices, django_capture_on_commit_callbacks)
    assert (first.idle, first.warned, first.reclaimed) == (1, 1, 0)
    finding = IdleFinding.objects.get()
    assert (finding.state, finding.card_count, finding.cards_in_use) == ("open", 2, 0)
    assert str(finding.mean_util_pct) == "1.50"
    assert len(mail.outbox) == 1 and "looks idle" in mail.outbox[0].subject

    again = scan(T0 + timedelta(hours=1), devices, django_capture_on_commit_callbacks)
    assert (again.warned, again.reclaimed) == (0, 0)
    assert len(mail.outbox) == 1  # warned once

    done = scan(LATER, devices, django_capture_on_commit_callbacks)
    assert done.reclaimed == 1
    finding.refresh_from_db()
    allocation = world["allocation"]
    allocation.refresh_from_db()
    assert allocation.status == AllocationStatus.RECLAIMED
    assert allocation.ends_at == LATER
    assert (finding.state, finding.cards_reclaimed) == ("reclaimed", 2)
    assert world["k8s"].get_gpu_quota("nlp").cards == 0  # quota lowered through the adapter
    assert len(mail.outbox) == 2 and "2 card(s)" in mail.outbox[1].subject
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {
        "idle_finding.opened",
        "idle_finding.warned",
        "allocation.reclaimed",
        "idle_finding.reclaimed",
    } <= actions


def test_the_finding_stores_the_groups_utilisation_sparkline(
    world, django_capture_on_commit_callbacks
):
    devices = [usage("GPU-1", 1.0), usage("GPU-2", 2.0)]
    scan(T0, devices, django_capture_on_commit_callbacks)
    sparkline = IdleFinding.objects.get().detail["sparkline"]
    # 30-min window every 60 s: 31 points, each the mean of 1 % and 2 %
    start = (T0 - timedelta(minutes=30)).timestamp()
    assert sparkline == [[start + 60 * i, 1.5] for i in range(31)]


def test_the_namespace_lines_are_asked_for_the_idle_groups_namespaces_only(
    world, django_capture_on_commit_callbacks
):
    """Team cv is busy on cards 3 and 4 of the same pool: its namespace's line is not read
    (at 100,800 GPUs the fleet-wide lines cost the scan seconds); nlp's idle line is."""
    AllocationFactory(
        team=TeamFactory(slug="cv"),
        pool=world["pool"],
        gpu_model=world["l40s"],
        card_count=2,
        status=AllocationStatus.ACTIVE,
        starts_at=T0 - timedelta(days=2),
        ends_at=T0 + timedelta(days=5),
    )
    asked = []

    class Recording(FakePrometheus):
        def utilisation_by_namespace(self, **kwargs):
            asked.append(kwargs.get("namespaces"))
            return super().utilisation_by_namespace(**kwargs)

    devices = [usage("GPU-1", 1.0), usage("GPU-2", 2.0)]
    devices += [usage(f"GPU-{n}", 90.0, namespace="team-cv") for n in (3, 4)]
    with django_capture_on_commit_callbacks(execute=True):
        report = idle_scan(now=T0, metrics=Recording(devices))
    assert (report.busy, report.idle) == (1, 1)
    assert asked == [{"team-nlp"}]
    start = (T0 - timedelta(minutes=30)).timestamp()
    sparkline = IdleFinding.objects.get().detail["sparkline"]
    assert sparkline == [[start + 60 * i, 1.5] for i in range(31)]


def test_a_groups_findings_share_one_evaluation_written_in_one_statement_each(
    world, django_capture_on_commit_callbacks
):
    """A second allocation of nlp's (cards 3 and 4) makes a group of two idle allocations:
    one evaluation row holds the four cards' numbers for both findings; their two findings,
    and their four audit events (opened and warned, each), are one INSERT each; the next scan
    points both at a new evaluation and deletes the one nothing points to."""
    AllocationFactory(
        team=world["team"],
        pool=world["pool"],
        gpu_model=world["l40s"],
        card_count=2,
        status=AllocationStatus.ACTIVE,
        starts_at=T0 - timedelta(days=2),
        ends_at=T0 + timedelta(days=5),
    )
    devices = [usage(f"GPU-{n}", 0.0) for n in (1, 2, 3, 4)]
    with CaptureQueriesContext(connection) as queries:
        first = scan(T0, devices, django_capture_on_commit_callbacks)
    assert (first.idle, first.warned) == (2, 2)
    inserts = Counter(
        re.match(r'INSERT INTO "?(\w+)', q["sql"]).group(1)
        for q in queries.captured_queries
        if q["sql"].startswith("INSERT")
    )
    assert inserts == {
        IdleGroupEvaluation._meta.db_table: 1,
        IdleFinding._meta.db_table: 1,
        AuditEvent._meta.db_table: 1,
    }
    assert AuditEvent.objects.filter(action__startswith="idle_finding.").count() == 4
    evaluation = IdleGroupEvaluation.objects.get()
    assert {f.evaluation_id for f in IdleFinding.objects.all()} == {evaluation.pk}
    cards = IdleFinding.objects.first().detail["cards"]
    assert sorted(c["uuid"] for c in cards) == ["GPU-1", "GPU-2", "GPU-3", "GPU-4"]

    scan(T0 + timedelta(minutes=10), devices, django_capture_on_commit_callbacks)
    again = IdleGroupEvaluation.objects.get()
    assert again.pk != evaluation.pk and again.evaluated_at == T0 + timedelta(minutes=10)
    assert set(IdleFinding.objects.values_list("evaluation_id", "last_seen_at")) == {
        (again.pk, T0 + timedelta(minutes=10))
    }


def test_the_allocations_are_read_once_without_the_columns_the_scan_does_not_use(
    world, django_capture_on_commit_callbacks
):
    """Two idle allocations of nlp's, warned by e-mail: the allocations are one SELECT of
    their own table (no join: pool, team and GPU model are not read per row, and no JSON
    column such as ``placement``), none re-read column by column afterwards, the team and
    the GPU model one SELECT each; the warning still names the team, model and pool."""
    AllocationFactory(
        team=world["team"],
        pool=world["pool"],
        gpu_model=world["l40s"],
        card_count=2,
        status=AllocationStatus.ACTIVE,
        starts_at=T0 - timedelta(days=2),
        ends_at=T0 + timedelta(days=5),
    )
    devices = [usage(f"GPU-{n}", 0.0) for n in (1, 2, 3, 4)]
    with CaptureQueriesContext(connection) as queries:
        report = scan(T0, devices, django_capture_on_commit_callbacks)
    assert (report.idle, report.warned) == (2, 2)
    table = connection.ops.quote_name(Allocation._meta.db_table)
    reads = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith("SELECT") and f"FROM {table}" in q["sql"]
    ]
    assert len(reads) == 1, reads
    assert " JOIN " not in reads[0]
    assert '"placement"' not in reads[0] and '"scheduler_binding"' not in reads[0]
    for model in (Team, GpuModel):
        model_table = connection.ops.quote_name(model._meta.db_table)
        assert (
            sum(
                q["sql"].startswith("SELECT") and f"FROM {model_table}" in q["sql"]
                for q in queries.captured_queries
            )
            == 1
        ), model
    assert len(mail.outbox) == 2
    body = mail.outbox[0].body
    expected = f"of team {world['team'].name} (2x {world['l40s'].name} in {world['pool'].name})"
    assert expected in body, body


def test_the_findings_are_looked_up_by_pool_not_by_a_list_of_allocation_ids(
    world, django_capture_on_commit_callbacks
):
    """Three idle allocations of nlp's (2 + 1 + 1 cards, its 4 idle cards): the open and the
    recently dismissed findings are two SELECTs that list no allocation ids (12,600 of them
    twice a scan at 100,800 GPUs), and the second scan still finds the three the first
    opened."""
    for _ in range(2):
        AllocationFactory(
            team=world["team"],
            pool=world["pool"],
            gpu_model=world["l40s"],
            card_count=1,
            status=AllocationStatus.ACTIVE,
            starts_at=T0 - timedelta(days=2),
            ends_at=T0 + timedelta(days=5),
        )
    devices = [usage(f"GPU-{n}", 0.0) for n in (1, 2, 3, 4)]
    scan(T0, devices, django_capture_on_commit_callbacks)
    opened = IdleFinding.objects.count()
    assert opened == 3
    with CaptureQueriesContext(connection) as queries:
        report = scan(T0 + timedelta(minutes=10), devices, django_capture_on_commit_callbacks)
    assert report.allocations == 3 and report.idle == opened
    table = connection.ops.quote_name(IdleFinding._meta.db_table)
    reads = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith("SELECT") and f"FROM {table}" in q["sql"]
    ]
    assert len(reads) == 2, reads
    assert not any(re.search(r'"allocation_id" IN \(', sql) for sql in reads), reads
    assert IdleFinding.objects.count() == opened  # seen again, none opened twice


def test_an_idle_allocation_busy_again_resolves_its_finding(
    world, django_capture_on_commit_callbacks
):
    scan(T0, [usage("GPU-1", 1.0), usage("GPU-2", 2.0)], django_capture_on_commit_callbacks)
    later = T0 + timedelta(hours=1)
    report = scan(
        later, [usage("GPU-1", 80.0), usage("GPU-2", 60.0)], django_capture_on_commit_callbacks
    )
    assert (report.busy, report.resolved) == (1, 1)
    finding = IdleFinding.objects.get()
    assert (finding.state, finding.closed_at) == (IdleFindingState.RESOLVED, later)
    assert finding.note.startswith("busy again: ")
    resolved = AuditEvent.objects.get(action="idle_finding.resolved")
    assert (resolved.object_id, resolved.reason) == (str(finding.pk), finding.note)


def test_partly_used_allocation_shrinks_to_the_cards_in_use(
    world, django_capture_on_commit_callbacks
):
    devices = [usage("GPU-1", 90.0), usage("GPU-2", 0.0)]
    scan(T0, devices, django_capture_on_commit_callbacks)
    report = scan(LATER, devices, django_capture_on_commit_callbacks)
    assert report.reclaimed == 1
    allocation = world["allocation"]
    allocation.refresh_from_db()
    assert (allocation.status, allocation.card_count) == (AllocationStatus.ACTIVE, 1)
    assert world["k8s"].get_gpu_quota("nlp").cards == 1
    assert AuditEvent.objects.filter(action="allocation.shrunk").count() == 1


def test_metrics_gap_is_unknown_and_nothing_reclaimed(world, django_capture_on_commit_callbacks):
    """C23: an exporter restart leaves 20 of the last 30 minutes empty."""
    devices = [
        usage("GPU-1", 0.0, gap=(LATER - timedelta(minutes=20), LATER)),
        usage("GPU-2", 0.0),
    ]
    scan(T0, devices, django_capture_on_commit_callbacks)  # idle at T0: warned
    report = scan(LATER, devices, django_capture_on_commit_callbacks)
    assert (report.unknown, report.reclaimed) == (1, 0)
    world["allocation"].refresh_from_db()
    assert world["allocation"].status == AllocationStatus.ACTIVE
    assert world["k8s"].get_gpu_quota("nlp").cards == 2


def test_no_series_for_the_namespace_is_unknown(world, django_capture_on_commit_callbacks):
    report = scan(
        T0, [usage("GPU-1", 0.0, namespace="team-other")], django_capture_on_commit_callbacks
    )
    assert (report.unknown, report.idle) == (1, 0)
    assert not IdleFinding.objects.exists()


def test_exemption_is_honoured(world, django_capture_on_commit_callbacks):
    Exemption.objects.create(
        team=world["team"], reason="paper deadline", expires_at=LATER + timedelta(days=3)
    )
    devices = [usage("GPU-1", 0.0), usage("GPU-2", 0.0)]
    scan(T0, devices, django_capture_on_commit_callbacks)
    report = scan(LATER, devices, django_capture_on_commit_callbacks)
    assert (report.exempt, report.reclaimed) == (1, 0)
    assert "paper deadline" in IdleFinding.objects.get().note
    world["allocation"].refresh_from_db()
    assert world["allocation"].card_count == 2


def test_prometheus_down_reports_and_changes_nothing(world, django_capture_on_commit_callbacks):
    report = scan(T0, [], django_capture_on_commit_callbacks, down=True)
    assert "Prometheus unavailable" in report.error
    assert not IdleFinding.objects.exists()
    assert mail.outbox == []


def test_dry_run_records_what_it_would_do_and_changes_nothing(
    world, django_capture_on_commit_callbacks
):
    ReclamationPolicy.objects.filter(pk=world["policy"].pk).update(dry_run=True)
    devices = [usage("GPU-1", 0.0), usage("GPU-2", 0.0)]
    scan(T0, devices, django_capture_on_commit_callbacks)
    report = scan(LATER, devices, django_capture_on_commit_callbacks)
    assert (report.would_reclaim, report.reclaimed) == (1, 0)
    finding = IdleFinding.objects.get()
    assert finding.would_reclaim_at == LATER and finding.note == "dry run: would end it"
    assert finding.warned_at is None and mail.outbox == []
    world["allocation"].refresh_from_db()
    assert world["allocation"].status == AllocationStatus.ACTIVE
    assert world["k8s"].get_gpu_quota("nlp").cards == 2


def test_undo_within_a_day_restores_cards_and_quota(world, django_capture_on_commit_callbacks):
    devices = [usage("GPU-1", 0.0), usage("GPU-2", 0.0)]
    scan(T0, devices, django_capture_on_commit_callbacks)
    scan(LATER, devices, django_capture_on_commit_callbacks)
    finding = IdleFinding.objects.get()
    alice = Membership.objects.get().user
    with pytest.raises(PermissionDenied):
        reclamation_undo(finding=finding, actor=alice, now=LATER)
    with pytest.raises(InvalidTransition):
        reclamation_undo(finding=finding, actor=world["admin"], now=LATER + timedelta(days=2))
    with django_capture_on_commit_callbacks(execute=True):
        reclamation_undo(finding=finding, actor=world["admin"], now=LATER + timedelta(hours=1))
    allocation = world["allocation"]
    allocation.refresh_from_db()
    assert (allocation.status, allocation.card_count) == (AllocationStatus.ACTIVE, 2)
    assert allocation.ends_at == T0 + timedelta(days=5)
    assert world["k8s"].get_gpu_quota("nlp").cards == 2
    finding.refresh_from_db()
    assert finding.state == IdleFindingState.UNDONE


def test_undo_refused_when_the_cards_went_to_someone_else(
    world, django_capture_on_commit_callbacks
):
    devices = [usage("GPU-1", 0.0), usage("GPU-2", 0.0)]
    scan(T0, devices, django_capture_on_commit_callbacks)
    scan(LATER, devices, django_capture_on_commit_callbacks)
    AllocationFactory(
        team=TeamFactory(slug="vision"),
        pool=world["pool"],
        gpu_model=world["l40s"],
        card_count=3,
        status=AllocationStatus.ACTIVE,
        starts_at=LATER,
        ends_at=LATER + timedelta(days=1),
    )
    finding = IdleFinding.objects.get()
    with pytest.raises(InsufficientCapacity) as refused:
        reclamation_undo(finding=finding, actor=world["admin"], now=LATER + timedelta(hours=1))
    assert refused.value.data == {"free": 1, "requested": 2}
    world["allocation"].refresh_from_db()
    assert world["allocation"].status == AllocationStatus.RECLAIMED


def test_a_dismissed_allocation_is_not_flagged_again_for_a_week(
    world, django_capture_on_commit_callbacks
):
    devices = [usage("GPU-1", 1.0), usage("GPU-2", 2.0)]
    scan(T0, devices, django_capture_on_commit_callbacks)
    idle_finding_dismiss(finding=IdleFinding.objects.get(), actor=world["admin"], reason="demo")
    mail.outbox.clear()

    again = scan(T0 + timedelta(hours=2), devices, django_capture_on_commit_callbacks)
    assert (again.idle, again.dismissed, again.warned) == (0, 1, 0)
    assert not IdleFinding.objects.filter(state=IdleFindingState.OPEN).exists()
    assert mail.outbox == []

    # the usage helper's samples end at LATER + 1 h: move them a week on
    later = T0 + timedelta(days=7, hours=1)
    shifted = [
        dataclasses.replace(
            d,
            util_pct=tuple(Sample(s.timestamp + 7 * 86400, s.value) for s in d.util_pct),
            fb_used_mib=tuple(Sample(s.timestamp + 7 * 86400, s.value) for s in d.fb_used_mib),
        )
        for d in devices
    ]
    week_on = scan(later, shifted, django_capture_on_commit_callbacks)
    assert (week_on.idle, week_on.dismissed) == (1, 0)
    assert IdleFinding.objects.filter(state=IdleFindingState.OPEN).count() == 1


# --- issue 18 kind 4: series identity across an exporter rollout --------------------------------
# dcgm-exporter PR #129 (NVIDIA/dcgm-exporter): without NODE_NAME, Hostname is the exporter pod's
# name (`Hostname="nvidia-dcgm-exporter-cwbcm"` for node ip-172-31-54-152); a DaemonSet rollout
# gives the pod, and so every series, a new name. dcgm-exporter#85 / #27: `pod_name`,
# `pod_namespace` with --use-old-namespace, `exported_*` with honorLabels false.


def rollout_series(uuid, util, *, before, after, cut, lower=False, old_labels=False):
    """Raw series of one GPU from T0 - 1 h to LATER + 1 h at ``util`` %, exported by pod
    ``before`` until ``cut`` and by pod ``after`` from then on."""
    from scheduler_adapters.prometheus import GR_ENGINE_ACTIVE, Series

    start, end = (T0 - timedelta(hours=1)).timestamp(), (LATER + timedelta(hours=1)).timestamp()
    stamps = [start + 60 * i for i in range(int((end - start) // 60) + 1)]
    name = GR_ENGINE_ACTIVE.lower() if lower else GR_ENGINE_ACTIVE
    workload = (
        {"pod_namespace": "team-nlp", "pod_name": "p", "container_name": "c"}
        if old_labels
        else {"namespace": "team-nlp", "pod": "p", "container": "c"}
    )
    out = []
    for host, part in (
        (before, [t for t in stamps if t < cut]),
        (after, [t for t in stamps if t >= cut]),
    ):
        labels = {
            ("uuid" if old_labels else "UUID"): uuid,
            ("hostname" if old_labels else "Hostname"): host,
            "gpu": "0",
            **workload,
        }
        out.append(
            Series(name, tuple(sorted(labels.items())), tuple(Sample(t, util / 100) for t in part))
        )
    return out


@pytest.mark.parametrize("variant", [{}, {"lower": True}, {"old_labels": True}])
def test_an_exporter_rollout_in_the_window_keeps_one_gpu_one_gpu(
    world, django_capture_on_commit_callbacks, variant
):
    from scheduler_adapters.prometheus import device_usage_from_series

    uuids = list(world["pool"].nodes.get().gpus.order_by("index").values_list("uuid", flat=True))
    cut = (T0 - timedelta(minutes=15)).timestamp()  # the rollout, inside the 30-min window
    raw = []
    for uuid, util in ((uuids[0], 1.0), (uuids[1], 2.0)):
        raw += rollout_series(
            uuid,
            util,
            before="nvidia-dcgm-exporter-cwbcm",
            after="nvidia-dcgm-exporter-x7k2p",
            cut=cut,
            **variant,
        )
    devices = device_usage_from_series(raw)
    assert len(devices) == 2  # one per GPU, not one per (GPU, exporter pod)

    report = scan(T0, list(devices), django_capture_on_commit_callbacks)
    assert (report.devices, report.idle, report.unknown) == (2, 1, 0)
    finding = IdleFinding.objects.get()
    # 2 cards, each read over the whole window: mean of 1 % and 2 %
    assert (finding.card_count, str(finding.mean_util_pct)) == (2, "1.50")


# ---------------------------------------------------------- issue 27 item 1: cards without series


@pytest.fixture
def eight(world):
    """The same team holding 8 L40S: the node's 4 cards and 4 more on ``k8s-n2``."""
    node = NodeFactory(hostname="k8s-n2", pool=world["pool"], scheduler=Scheduler.KUBERNETES)
    for index in range(4):
        GpuFactory(node=node, index=index, gpu_model=world["l40s"], health=GpuHealth.OK)
    type(world["allocation"]).objects.filter(pk=world["allocation"].pk).update(card_count=8)
    world["allocation"].refresh_from_db()
    return world


def _untouched(world):
    allocation = world["allocation"]
    allocation.refresh_from_db()
    assert (allocation.status, allocation.card_count) == (AllocationStatus.ACTIVE, 8)
    assert mail.outbox == []


def test_series_for_four_of_eight_idle_cards_is_never_reclaimed(
    eight, django_capture_on_commit_callbacks
):
    """The issue's case: 8 cards held, series for 4 of them (all idle at 1 %), none for the
    other 4. Before, the 4 silent cards counted as "not in use" and all 8 were reclaimed.
    Now 4 cards are unknown, so the allocation is unknown at every scan, past the grace too:
    no finding, no e-mail, and the admins' no-data line says why."""
    devices = [usage(f"GPU-{i}", 1.0) for i in range(1, 5)]
    for now in (T0, LATER):
        report = scan(now, devices, django_capture_on_commit_callbacks)
        assert (report.unknown, report.idle, report.reclaimed) == (1, 0, 0)
    assert not IdleFinding.objects.exists()
    _untouched(eight)
    [line] = report.no_data
    assert f"allocation #{eight['allocation'].pk} (nlp, infer, 8 cards)" in line
    assert "series for 4 of the 8 cards held; 4 without any" in line


def test_four_busy_cards_and_four_silent_ones_open_no_finding(
    eight, django_capture_on_commit_callbacks
):
    """The same 4 series busy at 90 %: before, 4 busy of 8 held split into "idle" and the team
    was warned; now the 4 silent cards make it unknown (not idle, not busy)."""
    devices = [usage(f"GPU-{i}", 90.0) for i in range(1, 5)]
    report = scan(T0, devices, django_capture_on_commit_callbacks)
    assert (report.unknown, report.idle, report.busy, report.warned) == (1, 0, 0, 0)
    assert not IdleFinding.objects.exists()
    _untouched(eight)


def test_an_open_finding_waits_when_half_the_series_vanish(
    eight, django_capture_on_commit_callbacks
):
    """All 8 idle at T0 (finding opened, team warned); by the end of the grace 4 exporters have
    sent nothing for an hour (stale, then absent from the window): not reclaimed, still open."""
    gone = (LATER - timedelta(hours=1), LATER + timedelta(hours=1))
    devices = [usage(f"GPU-{i}", 1.0) for i in range(1, 5)] + [
        usage(f"GPU-{i}", 1.0, gap=gone) for i in range(5, 9)
    ]
    first = scan(T0, devices, django_capture_on_commit_callbacks)
    assert (first.idle, first.warned) == (1, 1)
    report = scan(LATER, devices, django_capture_on_commit_callbacks)
    assert (report.unknown, report.reclaimed) == (1, 0)
    assert IdleFinding.objects.get().state == IdleFindingState.OPEN
    eight["allocation"].refresh_from_db()
    assert eight["allocation"].card_count == 8


def test_stale_series_on_some_cards_is_unknown(eight, django_capture_on_commit_callbacks):
    """8 series, 3 of which stopped 10 min before the scan (21 of 31 steps, newest 600 s old,
    over the 300 s staleness bound): unknown."""
    stale = (T0 - timedelta(minutes=9), T0 + timedelta(hours=1))
    devices = [usage(f"GPU-{i}", 1.0) for i in range(1, 6)] + [
        usage(f"GPU-{i}", 1.0, gap=stale) for i in range(6, 9)
    ]
    report = scan(T0, devices, django_capture_on_commit_callbacks)
    assert (report.unknown, report.idle) == (1, 0)
    assert not IdleFinding.objects.exists()


def test_mig_card_without_series_is_unknown(world, django_capture_on_commit_callbacks):
    """MIG: the 2 cards held are split into 3g.40gb instances. Card GPU-1's two instances
    report (idle); card GPU-2 reports nothing: one card's instances are one card, so 1 of 2
    cards is seen and the allocation is unknown (before: "2 idle", reclaimed whole)."""
    devices = [
        dataclasses.replace(usage("GPU-1", 1.0), gpu_instance_id=gi, mig_profile="3g.40gb")
        for gi in ("1", "2")
    ]
    for now in (T0, LATER):
        report = scan(now, devices, django_capture_on_commit_callbacks)
        assert (report.unknown, report.idle, report.reclaimed) == (1, 0, 0)
    world["allocation"].refresh_from_db()
    assert (world["allocation"].status, world["allocation"].card_count) == ("active", 2)
    # both cards seen, all four instances idle: idle (the instances count as 2 cards, not 4)
    devices += [
        dataclasses.replace(usage("GPU-2", 1.0), gpu_instance_id=gi, mig_profile="3g.40gb")
        for gi in ("1", "2")
    ]
    report = scan(T0, devices, django_capture_on_commit_callbacks)
    assert (report.unknown, report.idle) == (0, 1)
    assert IdleFinding.objects.get().card_count == 2


def test_a_nul_in_one_devices_labels_leaves_the_scan_whole(
    world, django_capture_on_commit_callbacks
):
    """Through the real adapter's HTTP reading (Prometheus' JSON, NUL as ``\\u0000``): the
    team's second card's ``UUID`` and ``pod`` hold a NUL, which PostgreSQL's jsonb refuses.
    The scan completes, the finding is written with both cards, the bad UUID read as U+FFFD
    (the series readers' rule), and a third team's device with a NUL namespace changes nothing."""
    now = T0 - timedelta(seconds=T0.second)  # on a minute: the summary's steps end at ``now``
    good = {"UUID": "GPU-1", "Hostname": "k8s-n1", "gpu": "0", "namespace": "team-nlp", "pod": "p"}
    bad = good | {"UUID": "GPU-\x002", "gpu": "1", "pod": "p\x00"}
    other = good | {"UUID": "GPU-3", "gpu": "2", "namespace": "team-\x00x"}

    def row(labels, value):
        return {"metric": labels, "value": [now.timestamp(), str(value)]}

    # 31 steps of ratio 0.01, 0.02 and 0.5: means 1 %, 2 % and 50 %; framebuffer 0 MiB
    everyone = [(good, 0.01), (bad, 0.02), (other, 0.5)]
    rows = {
        ("prof", "series", 1800): [row(labels, 31) for labels, _ in everyone],
        ("fb", "series", 1800): [row(labels, 31) for labels, _ in everyone],
        ("prof", "sum", 1800): [row(labels, 31 * ratio) for labels, ratio in everyone],
        ("prof", "max", 1800): [row(labels, ratio) for labels, ratio in everyone],
        ("fb", "max", 1800): [row(labels, 0) for labels, _ in everyone],
    }
    names = {e: n for n, e in summary_queries([1800], step_s=60, shift_ms=0).items()}

    def answer(request: httpx.Request) -> httpx.Response:
        query = request.url.params["query"]
        instant = request.url.path == "/api/v1/query"
        data = {
            "resultType": "vector" if instant else "matrix",
            "result": rows.get(names.get(query), []) if instant else [],
        }
        return httpx.Response(200, json={"status": "success", "data": data})

    prom = PrometheusAdapter("http://prom.test:9090/", transport=httpx.MockTransport(answer))
    with django_capture_on_commit_callbacks(execute=True):
        report = idle_scan(now=now, metrics=prom)

    assert (report.error, report.busy, report.idle, report.unknown) == (None, 0, 1, 0)
    finding = IdleFinding.objects.get()
    assert (finding.card_count, str(finding.mean_util_pct)) == (2, "1.50")
    (evaluation,) = IdleGroupEvaluation.objects.all()
    cards = sorted(card["uuid"] for card in evaluation.detail["cards"])
    assert cards == ["GPU-1", "GPU-\ufffd2"]
