"""The adapter and the idle scan against a real Prometheus holding backfilled dcgm-exporter
history (see dcgm_history.py): a busy, an idle, a MIG and a gappy GPU."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings
from factories import AllocationFactory, GpuFactory, NodeFactory, PoolFactory, TeamFactory

from pools.common.choices import AllocationStatus, GpuHealth, Scheduler
from pools.inventory.models import GpuModel
from pools.reclamation.models import IdleFinding, ReclamationPolicy
from pools.reclamation.services.scan import idle_scan
from scheduler_adapters.errors import SchedulerRejected
from scheduler_adapters.prometheus import PrometheusAdapter

pytestmark = pytest.mark.integration


def test_adapter_reads_backfilled_dcgm_history(prometheus):
    url, end = prometheus
    adapter = PrometheusAdapter(url, timeout_s=10)
    at = datetime.fromtimestamp(end, tz=UTC)
    devices = adapter.gpu_usage(start=at - timedelta(minutes=30), end=at, step_s=60)
    by_ns = {}
    for device in devices:
        by_ns.setdefault(device.namespace, []).append(device)
    assert set(by_ns) == {"team-busy", "team-idle", "team-mig", "team-gap", None}
    slurm = {d.gpu: d for d in by_ns[None] if d.hostname == "gpu-a100-01"}  # device level
    (consumer,) = [d for d in by_ns[None] if d.hostname == "gpu-4090-01"]
    assert consumer.util_source == "dev"  # no profiling metrics: DEV_GPU_UTIL kept by unless
    assert [s.value for s in consumer.util_pct] == [pytest.approx(55.0)] * 31
    assert all(d.util_source == "prof" for d in devices if d.hostname != "gpu-4090-01")
    assert set(slurm) == {"0", "1", "2", "3"}
    assert {d.hostname for d in slurm.values()} == {"gpu-a100-01"}
    assert [s.value for s in slurm["2"].util_pct] == [pytest.approx(70.0)] * 31
    (idle,) = by_ns["team-idle"]
    assert idle.hostname == "k8s-n1"  # new exporters' lower-case label
    assert idle.pods == ("team-idle-0",)  # exported_pod, not the exporter's own pod
    assert [s.value for s in idle.util_pct] == [pytest.approx(2.0)] * 31  # 0.02 x 100
    mig = {d.gpu_instance_id: d for d in by_ns["team-mig"]}
    assert set(mig) == {"1", "2"}  # the parent's DEV_GPU_UTIL 0 is dropped
    assert [s.value for s in mig["1"].util_pct] == [pytest.approx(80.0)] * 31
    (gap,) = by_ns["team-gap"]
    assert len(gap.util_pct) < 31
    with pytest.raises(SchedulerRejected):
        adapter.query("DCGM_FI_DEV_GPU_UTIL{", at=at)
    adapter.close()


@pytest.mark.django_db
def test_scan_classifies_busy_idle_mig_and_gappy(prometheus, django_capture_on_commit_callbacks):
    url, end = prometheus
    now = datetime.fromtimestamp(end, tz=UTC)
    l40s = GpuModel.objects.get(slug="l40s")
    pool = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    node = NodeFactory(hostname="k8s-n1", pool=pool, scheduler=Scheduler.KUBERNETES)
    for index in range(8):
        GpuFactory(node=node, index=index, gpu_model=l40s, health=GpuHealth.OK)
    ReclamationPolicy.objects.create(pool=pool, dry_run=True)
    allocations = {
        slug: AllocationFactory(
            team=TeamFactory(slug=slug),
            pool=pool,
            gpu_model=l40s,
            card_count=1,
            status=AllocationStatus.ACTIVE,
            starts_at=now - timedelta(days=1),
            ends_at=now + timedelta(days=1),
        )
        for slug in ("busy", "idle", "mig", "gap")
    }
    with override_settings(PROMETHEUS_URL=url), django_capture_on_commit_callbacks(execute=True):
        report = idle_scan(now=now)
    assert report.error is None
    assert (report.busy, report.idle, report.unknown) == (2, 1, 1), report.as_dict()
    finding = IdleFinding.objects.get()
    assert finding.allocation == allocations["idle"]
    assert finding.certainly_idle
    assert str(finding.mean_util_pct) == "2.00"


@pytest.mark.django_db
def test_an_allocation_with_more_cards_than_series_is_unknown(
    prometheus, django_capture_on_commit_callbacks
):
    """Issue 27 item 1 on the real Prometheus: team-idle's namespace has one card's series
    (idle, certainly); an allocation of 2 cards there has one card without any, so the scan
    leaves it unknown (no finding) and says why to the admins."""
    url, end = prometheus
    now = datetime.fromtimestamp(end, tz=UTC)
    l40s = GpuModel.objects.get(slug="l40s")
    pool = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    node = NodeFactory(hostname="k8s-n1", pool=pool, scheduler=Scheduler.KUBERNETES)
    for index in range(8):
        GpuFactory(node=node, index=index, gpu_model=l40s, health=GpuHealth.OK)
    ReclamationPolicy.objects.create(pool=pool, dry_run=False)
    allocation = AllocationFactory(
        team=TeamFactory(slug="idle"),
        pool=pool,
        gpu_model=l40s,
        card_count=2,
        status=AllocationStatus.ACTIVE,
        starts_at=now - timedelta(days=1),
        ends_at=now + timedelta(days=1),
    )
    with override_settings(PROMETHEUS_URL=url), django_capture_on_commit_callbacks(execute=True):
        report = idle_scan(now=now)
    assert (report.busy, report.idle, report.unknown) == (0, 0, 1), report.as_dict()
    assert not IdleFinding.objects.exists()
    assert report.no_data == [
        f"allocation #{allocation.pk} (idle, infer, 2 cards): not judged, series for 1 of the "
        "2 cards held; 1 without any, so unknown"
    ]


@pytest.mark.django_db
def test_prometheus_down_changes_nothing():
    with override_settings(PROMETHEUS_URL="http://127.0.0.1:9"):
        pool = PoolFactory(slug="infer2", scheduler=Scheduler.KUBERNETES, slurm_partition="")
        ReclamationPolicy.objects.create(pool=pool, dry_run=False)
        now = datetime.now(tz=UTC)
        AllocationFactory(
            pool=pool,
            card_count=1,
            status=AllocationStatus.ACTIVE,
            starts_at=now - timedelta(days=1),
            ends_at=now + timedelta(days=1),
        )
        report = idle_scan(now=now)
    assert "Prometheus unavailable" in report.error
    assert not IdleFinding.objects.exists()


def test_a_range_longer_than_prometheus_allows_is_read_in_pieces(prometheus):
    # 30 days at 60 s is 43,201 points; Prometheus refuses more than 11,000 in one query
    url, end = prometheus
    adapter = PrometheusAdapter(url, timeout_s=30)
    at = datetime.fromtimestamp(end, tz=UTC)
    with pytest.raises(SchedulerRejected, match="11,000|11000"):
        adapter.query_range("DCGM_FI_DEV_FB_USED", start=at - timedelta(days=30), end=at, step_s=60)
    devices = adapter.gpu_usage(start=at - timedelta(days=30), end=at, step_s=60)
    (idle,) = [d for d in devices if d.namespace == "team-idle"]
    # the history holds the last 3 hours: 181 steps, none twice across the pieces
    assert len(idle.util_pct) == 181
    assert len({s.timestamp for s in idle.util_pct}) == 181
    adapter.close()
