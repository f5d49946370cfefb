"""The idle scan as one task per cluster (issue 35): beat queues one scan per cluster whose
pools have a policy; each scans its own cluster's pools through that cluster's adapter and
records its own run; a cluster that is down is an ``idle-scan`` error in its health while
the others still scan."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from factories import AllocationFactory, ClusterFactory, PoolFactory

from pools.clusters.models import ClusterError
from pools.clusters.selectors import cluster_list
from pools.common.choices import AllocationStatus, ClusterOperation
from pools.reclamation.models import IdleScanRun, ReclamationPolicy
from pools.reclamation.services.runs import (
    idle_scan_cluster,
    idle_scan_clusters,
    idle_scan_fan_out,
    last_scan_runs,
)
from scheduler_adapters.fake import FakeScheduler

pytestmark = pytest.mark.django_db


class NoSeries:
    """Prometheus answering, with no dcgm-exporter series: nothing is judged idle."""

    def gpu_usage_summary(self, **_kwargs):
        return []


@pytest.fixture
def fleet(monkeypatch):
    """Slurm clusters ``train`` and ``old``, a pool with a policy in each and one pool without
    a cluster (the environment's); one allocation per pool, active since yesterday."""
    now = timezone.now()
    clusters = {s: ClusterFactory(slug=s, name=s.title()) for s in ("train", "old")}
    pools = {
        "train-gpu": PoolFactory(slug="train-gpu", cluster=clusters["train"]),
        "old-gpu": PoolFactory(slug="old-gpu", cluster=clusters["old"]),
        "env-gpu": PoolFactory(slug="env-gpu"),
    }
    for pool in pools.values():
        ReclamationPolicy.objects.create(pool=pool)
        AllocationFactory(pool=pool, card_count=2, status=AllocationStatus.ACTIVE,
                          starts_at=now - timedelta(days=1),
                          ends_at=now + timedelta(days=1))  # fmt: skip
    adapters = {"train": FakeScheduler(), "old": FakeScheduler(), None: FakeScheduler()}
    monkeypatch.setattr(
        "pools.reclamation.services.scan.pool_adapter",
        lambda pool: adapters[pool.cluster.slug if pool.cluster else None],
    )
    return clusters, pools, adapters


def test_beat_queues_one_scan_per_cluster(fleet, django_capture_on_commit_callbacks):
    clusters, _, _ = fleet
    assert idle_scan_clusters() == [None, clusters["train"].pk, clusters["old"].pk]
    with django_capture_on_commit_callbacks(execute=False) as queued:
        assert idle_scan_fan_out() == {"queued": 3}
    assert len(queued) == 3
    assert not IdleScanRun.objects.exists()  # the scans run in their own tasks


def test_each_cluster_scans_its_own_pools_through_its_own_adapter(fleet):
    clusters, _, adapters = fleet
    run = idle_scan_cluster(cluster_id=clusters["train"].pk, metrics=NoSeries())
    assert (run.cluster, run.allocations, run.error) == (clusters["train"], 1, "")
    assert adapters["train"].calls.count("running_gpu_jobs") == 1
    assert adapters["old"].calls == [] and adapters[None].calls == []

    pools_without = idle_scan_cluster(cluster_id=None, metrics=NoSeries())
    assert (pools_without.cluster, pools_without.allocations) == (None, 1)
    assert adapters[None].calls.count("running_gpu_jobs") == 1


def test_a_cluster_that_is_down_is_an_error_in_its_health_and_the_others_still_scan(fleet):
    clusters, _, adapters = fleet
    adapters["old"].down = True

    old = idle_scan_cluster(cluster_id=clusters["old"].pk, metrics=NoSeries())
    train = idle_scan_cluster(cluster_id=clusters["train"].pk, metrics=NoSeries())

    assert (old.allocations, old.unknown) == (1, 1)
    assert old.notes == [
        "Slurm unavailable for old-gpu, its allocations unknown: "
        "running_gpu_jobs: connection refused (fake)"
    ]
    error = ClusterError.objects.get()
    assert (error.cluster, error.operation) == (clusters["old"], ClusterOperation.IDLE_SCAN)
    assert error.message == "old-gpu: running_gpu_jobs: connection refused (fake)"
    assert error.at == old.started_at
    assert (train.allocations, train.notes, train.error) == (1, [], "")
    health = {c.slug: c for c in cluster_list()}
    assert (health["old"].errors_last_hour, health["train"].errors_last_hour) == (1, 0)

    # the idle page shows the newest run of each cluster, by name
    assert last_scan_runs() == [old, train]
    newer = idle_scan_cluster(cluster_id=clusters["old"].pk, metrics=NoSeries())
    assert last_scan_runs() == [newer, train]


def test_with_no_policy_anywhere_one_run_says_so():
    result = idle_scan_fan_out()
    assert result["queued"] == 0
    run = IdleScanRun.objects.get(pk=result["run"])
    assert (run.cluster, run.notes) == (None, ["no pool has a reclamation policy"])


def test_the_idle_page_names_each_clusters_last_scan(fleet, pool_admin, client):
    clusters, _, _ = fleet
    for key in (None, clusters["train"].pk):
        idle_scan_cluster(cluster_id=key, metrics=NoSeries())
    client.force_login(pool_admin)
    html = client.get("/idle/").content.decode()
    assert "<strong>Last scan of the pools without a cluster</strong>" in html
    assert "<strong>Last scan of Train</strong>" in html
