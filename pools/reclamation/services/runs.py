"""Idle scans that leave a record (:class:`pools.models.IdleScanRun`), one per cluster: beat's
task queues one scan per cluster whose pools have a reclamation policy
(:func:`idle_scan_fan_out`, as the Slurm usage import fans out), so a cluster that is slow or
down holds up none of the others; each scan reads its cluster's pools only, from the cluster's
own Prometheus (``Cluster.prometheus_url``), records its run for the idle page, and a cluster
it cannot reach is an ``idle-scan`` error in that cluster's health
(:class:`~pools.clusters.models.ClusterError`) while the other clusters still scan."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import OuterRef, Subquery
from django.utils import timezone

from pools.clusters.adapters import metrics_adapter
from pools.clusters.models import Cluster
from pools.clusters.services import cluster_of, cluster_operation_record
from pools.common.choices import ClusterOperation, Scheduler
from pools.jobs import IDLE_SCAN_CLUSTER, enqueue_on_commit
from pools.reclamation.models import IdleScanRun, ReclamationPolicy
from pools.reclamation.services.scan import ScanReport, idle_scan

# Runs older than this are deleted when a new one is recorded (the beat scans every 5 minutes).
KEEP_RUNS = timedelta(days=30)
_COUNTS = (
    "allocations",
    "busy",
    "idle",
    "unknown",
    "warned",
    "reclaimed",
    "would_reclaim",
    "resolved",
    "exempt",
    "dismissed",
    "devices",
)


def idle_scan_clusters() -> list[int | None]:
    """The clusters whose pools have a reclamation policy, by id (``None``: pools without a
    cluster, the environment's), in id order with ``None`` first."""
    ids = set(ReclamationPolicy.objects.values_list("pool__cluster_id", flat=True))
    return sorted(ids, key=lambda i: (i is not None, i or 0))


def idle_scan_fan_out(*, now: datetime | None = None) -> dict[str, Any]:
    """Beat's entry: queue one :data:`~pools.jobs.IDLE_SCAN_CLUSTER` scan per cluster of
    :func:`idle_scan_clusters`; returns ``{"queued": n}``. With no policy anywhere one run is
    recorded here (its note says so: the idle page tells a quiet fleet from a scan that did
    not run), and ``"run"`` is its id."""
    clusters = idle_scan_clusters()
    if not clusters:
        return {"queued": 0, "run": idle_scan_recorded(now=now).pk}
    for cluster_id in clusters:
        enqueue_on_commit(IDLE_SCAN_CLUSTER, cluster_id)
    return {"queued": len(clusters)}


def idle_scan_cluster(
    *, cluster_id: int | None, now: datetime | None = None, **kwargs: Any
) -> IdleScanRun:
    """Scan the pools of one cluster (``None``: the pools without one) and record the run
    (``kwargs`` passed on to :func:`~pools.reclamation.services.scan.idle_scan`). The scan reads
    the cluster's own Prometheus (``Cluster.prometheus_url``; blank, or the pools without a
    cluster: ``settings.PROMETHEUS_URL``), unless ``metrics`` is given. What the scan
    could not reach of the cluster (its slurmrestd down, credentials unreadable) is kept as
    ``idle-scan`` errors in its health — for pools without a cluster, the row the environment
    defines for Slurm, if any."""
    cluster = Cluster.objects.filter(pk=cluster_id).first() if cluster_id is not None else None
    if cluster_id is not None and cluster is None:  # deleted since it was queued: nothing left
        pool_ids: list[int] = []
    else:
        pool_ids = list(
            ReclamationPolicy.objects.filter(pool__cluster_id=cluster_id).values_list(
                "pool_id", flat=True
            )
        )
    own = kwargs.get("metrics") is None and bool(pool_ids)
    if own:  # this cluster's Prometheus only, not the whole fleet's (Cluster.prometheus_url)
        kwargs["metrics"] = metrics_adapter(cluster=cluster)
    try:
        run = idle_scan_recorded(now=now, cluster=cluster, pool_ids=pool_ids, **kwargs)
    finally:
        if own and kwargs["metrics"] is not None:
            kwargs["metrics"].close()
    cluster_operation_record(
        cluster=cluster or cluster_of(kind=Scheduler.SLURM, cluster=None),
        operation=ClusterOperation.IDLE_SCAN,
        errors=run.cluster_errors,
        at=run.started_at,
    )
    return run


def idle_scan_recorded(
    *, now: datetime | None = None, cluster: Cluster | None = None, **kwargs: Any
) -> IdleScanRun:
    """Run :func:`~pools.reclamation.services.scan.idle_scan` (``kwargs`` passed on) and store what
    it reported, as a run of ``cluster``; returns the stored run, with the report's
    ``cluster_errors`` on it (not stored: they go to the cluster's health)."""
    report: ScanReport = idle_scan(now=now, **kwargs)
    run = IdleScanRun.objects.create(
        cluster=cluster,
        started_at=report.now,
        seconds=round(report.seconds, 3),
        error=report.error or "",
        notes=list(report.notes),
        no_data=list(report.no_data),
        **{name: getattr(report, name) for name in _COUNTS},
    )
    run.cluster_errors = list(report.cluster_errors)
    IdleScanRun.objects.filter(started_at__lt=(now or timezone.now()) - KEEP_RUNS).delete()
    return run


def last_scan_runs() -> list[IdleScanRun]:
    """The newest recorded run of each cluster (the pools without a cluster first, then by
    cluster name), with the cluster; ``[]`` when none ran yet. Two queries."""
    newest = (
        IdleScanRun.objects.filter(cluster_id=OuterRef("cluster_id"))
        .order_by("-started_at", "-id")
        .values("pk")[:1]
    )
    runs = list(
        IdleScanRun.objects.filter(cluster__isnull=False, pk=Subquery(newest))
        .select_related("cluster")
        .order_by("cluster__name", "cluster_id")
    )
    unclustered = IdleScanRun.objects.filter(cluster__isnull=True).first()
    return ([unclustered] if unclustered else []) + runs
