"""reclamation_what_if: the policy replayed over past (fake) metrics, writing nothing.

A Kubernetes pool ``infer`` with 4 L40S on ``k8s-n1``; ``NOW`` is on the hour, the replay runs
over the last 3 days every 60 min (steps on the hour). Default policy: idle < 30 % mean over
30 min, certainly idle < 5 % peak and at most 64 MiB, grace 24 h.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from factories import AllocationFactory, GpuFactory, NodeFactory, PoolFactory, TeamFactory

from pools.audit.models import AuditEvent
from pools.capacity.models import Allocation
from pools.choices import AllocationStatus, GpuHealth, Scheduler
from pools.inventory.models import GpuModel
from pools.reclamation.models import IdleFinding, ReclamationPolicy
from pools.reclamation.services import whatif as reclamation_whatif
from pools.reclamation.services.whatif import reclamation_what_if
from scheduler_adapters.prometheus import DeviceUsage, Sample
from scheduler_adapters.prometheus_fake import FakePrometheus

pytestmark = pytest.mark.django_db

NOW = timezone.now().replace(minute=0, second=0, microsecond=0)
IDLE_FROM = NOW - timedelta(hours=30, minutes=30)  # first fully idle 30-min window ends NOW-30h


def usage(uuid, namespace, util, *, every_s=60, fb=0.0):
    """Samples every ``every_s`` from NOW - 4 d to NOW; ``util(t)`` gives the % at time t."""
    start = (NOW - timedelta(days=4)).timestamp()
    stamps = [start + every_s * i for i in range(int((NOW.timestamp() - start) // every_s) + 1)]
    return DeviceUsage(
        hostname="k8s-n1",
        uuid=uuid,
        gpu="0",
        model_name="NVIDIA L40S",
        gpu_instance_id=None,
        mig_profile=None,
        namespace=namespace,
        pods=("p",),
        hpc_jobs=(),
        util_source="prof",
        util_pct=tuple(Sample(t, util(t)) for t in stamps),
        fb_used_mib=tuple(Sample(t, fb) for t in stamps),
    )


def idle_for_30h(t):
    return 1.0 if t >= IDLE_FROM.timestamp() else 80.0


@pytest.fixture
def world():
    l40s = GpuModel.objects.get(slug="l40s")
    pool = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    node = NodeFactory(hostname="k8s-n1", pool=pool, scheduler=Scheduler.KUBERNETES)
    for index in range(4):
        GpuFactory(node=node, index=index, gpu_model=l40s, raw_model_name="NVIDIA L40S",
                   health=GpuHealth.OK)  # fmt: skip
    ReclamationPolicy.objects.create(pool=pool, dry_run=False)
    allocations = {}
    for slug in ("idle", "busy", "gappy"):
        allocations[slug] = AllocationFactory(
            team=TeamFactory(slug=slug),
            pool=pool,
            gpu_model=l40s,
            card_count=2 if slug == "idle" else 1,
            status=AllocationStatus.ACTIVE,
            starts_at=NOW - timedelta(days=5),
            ends_at=NOW + timedelta(days=5),
        )
    devices = [
        usage("GPU-1", "team-idle", idle_for_30h),
        usage("GPU-2", "team-idle", idle_for_30h),
        usage("GPU-3", "team-busy", lambda t: 85.0),
        # idle readings, but one sample every 10 min: coverage < 90 %, always unknown
        usage("GPU-4", "team-gappy", lambda t: 0.0, every_s=600),
    ]
    return {"pool": pool, "allocations": allocations, "metrics": FakePrometheus(devices)}


def run(world, **overrides):
    report = reclamation_what_if(
        pool=world["pool"],
        policy_overrides=overrides or None,
        days=3,
        now=NOW,
        metrics=world["metrics"],
    )
    return report, {row.team: row for row in report.rows}


def test_idle_allocation_would_be_reclaimed_at_first_idle_plus_grace(world):
    report, rows = run(world)
    assert report.error is None
    idle = rows["idle"]
    assert idle.first_idle == NOW - timedelta(hours=30)
    assert idle.would_reclaim_at == NOW - timedelta(hours=6)  # first idle + 24 h grace
    assert idle.cards_reclaimed == 2
    assert idle.card_hours_freed == 12.0  # 2 cards x 6 h until NOW
    assert (report.findings, report.reclaimed, report.cards_reclaimed) == (1, 1, 2)
    assert report.card_hours_freed == 12.0


def test_busy_and_gappy_allocations_would_not_be_touched(world):
    _, rows = run(world)
    for team in ("busy", "gappy"):
        row = rows[team]
        assert (row.first_idle, row.would_reclaim_at, row.cards_reclaimed) == (None, None, 0)
        assert row.card_hours_freed == 0.0


def test_overrides_change_the_result(world):
    _, rows = run(world, grace_hours=36)  # idle for 30 h only
    assert rows["idle"].first_idle == NOW - timedelta(hours=30)
    assert rows["idle"].would_reclaim_at is None
    # stricter: 1 % is not idle below 0.5 %
    report, rows = run(world, idle_below_pct=0.5, certainly_idle_below_pct=0.5)
    assert rows["idle"].first_idle is None and report.card_hours_freed == 0.0
    # a shorter grace reclaims earlier and frees more
    _, rows = run(world, grace_hours=12)
    assert rows["idle"].would_reclaim_at == NOW - timedelta(hours=18)
    assert rows["idle"].card_hours_freed == 36.0


def test_the_database_is_unchanged(world):
    def snapshot():
        return (
            IdleFinding.objects.count(),
            AuditEvent.objects.count(),
            list(
                Allocation.objects.order_by("pk").values_list(
                    "pk", "status", "card_count", "ends_at", "updated_at"
                )
            ),
            list(ReclamationPolicy.objects.values()),
        )

    before = snapshot()
    run(world)
    run(world, grace_hours=1, idle_below_pct=50)
    assert snapshot() == before


@override_settings(PROMETHEUS_URL="")
def test_without_prometheus_the_report_says_so(world):
    report = reclamation_what_if(pool=world["pool"], now=NOW)
    assert report.error and "no Prometheus configured" in report.error


def test_policy_page_shows_the_what_if(admin_page, world, monkeypatch):
    monkeypatch.setattr(reclamation_whatif, "metrics_adapter", lambda: world["metrics"])
    body = admin_page.get("/idle/policies/?pool=infer&whatif=1&days=3").content.decode()
    assert "What if…" in body and "data-whatif-totals" in body
    assert f"#{world['allocations']['idle'].pk}<" in body
    strict = admin_page.get(
        "/idle/policies/?pool=infer&whatif=1&days=3&idle_below_pct=0.5"
        "&certainly_idle_below_pct=0.5&process_memory_max_mib=64&window_minutes=30"
        "&min_coverage=0.9&grace_hours=24&cooldown_minutes=15"
    ).content.decode()
    assert "freeing 0" in strict


@override_settings(PROMETHEUS_URL="")
def test_policy_page_without_prometheus(admin_page, world):
    body = admin_page.get("/idle/policies/?pool=infer&whatif=1").content.decode()
    assert "data-whatif-error" in body and "no Prometheus configured" in body


def test_the_what_if_form_runs_and_keeps_the_saved_dry_run(admin_page, world, monkeypatch):
    # the what-if form sends only the numbers it replays: no cooldown, no dry-run box
    monkeypatch.setattr(reclamation_whatif, "metrics_adapter", lambda: world["metrics"])
    ReclamationPolicy.objects.update_or_create(pool=world["pool"], defaults={"dry_run": True})
    body = admin_page.get(
        "/idle/policies/?pool=infer&whatif=1&days=3&idle_below_pct=0.5"
        "&certainly_idle_below_pct=0.5&process_memory_max_mib=64&window_minutes=30"
        "&min_coverage=0.9&grace_hours=24"
    ).content.decode()
    assert "Fix the values above" not in body
    assert "freeing 0" in body
    assert 'name="dry_run" id="id_dry_run" checked' in body  # saving keeps the dry run
