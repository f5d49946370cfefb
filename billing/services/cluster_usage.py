"""Slurm accounting per cluster (issue 35): one import task per Slurm cluster kept as data, each
through that cluster's own slurmrestd, recorded in the cluster's health; the environment's
cluster is imported by :func:`billing.tasks.usage_import_task` itself as before.

8 clusters are 8 tasks a pool of workers runs side by side, so one slow or unreachable
cluster holds up none of the others.
"""

from __future__ import annotations

from datetime import datetime

from billing.models import UsageImport
from billing.services.usage_import import usage_import_slurm
from pools.clusters.adapters import cluster_adapter_unshared
from pools.clusters.models import Cluster
from pools.clusters.services import cluster_of, cluster_operation_record
from pools.common.choices import ClusterOperation, CredentialKind, Scheduler
from pools.jobs import enqueue_on_commit
from scheduler_adapters.errors import SchedulerError

# Registered name of billing.tasks.usage_import_cluster_task (tasks import this module).
USAGE_IMPORT_CLUSTER = "billing.tasks.usage_import_cluster_task"


def _slurm_clusters_as_data() -> list[int]:
    return list(
        Cluster.objects.filter(kind=Scheduler.SLURM)
        .exclude(credential_kind=CredentialKind.ENVIRONMENT)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def usage_import_clusters_queue(*, hours: int) -> int:
    """Queue one Slurm accounting import of the last ``hours`` per Slurm cluster kept as data
    (:data:`USAGE_IMPORT_CLUSTER`); returns how many were queued."""
    ids = _slurm_clusters_as_data()
    for cluster_id in ids:
        enqueue_on_commit(USAGE_IMPORT_CLUSTER, cluster_id, hours)
    return len(ids)


def usage_import_clusters_here(*, start: datetime, end: datetime) -> dict[str, int]:
    """Import ``[start, end)`` of every Slurm cluster kept as data here, one after the other
    (the month close, which must have every cluster's usage before it closes); returns
    ``{"slurm:<slug>": records created}`` for those that answered. A cluster that fails is
    kept in its health and skipped: the others are still imported."""
    counts = {}
    for cluster_id in _slurm_clusters_as_data():
        try:
            imported = usage_import_cluster(cluster_id=cluster_id, start=start, end=end)
        except SchedulerError:
            continue  # recorded by usage_import_cluster
        if imported is not None:
            slug = Cluster.objects.filter(pk=cluster_id).values_list("slug", flat=True).first()
            counts[f"slurm:{slug}"] = imported.records_created
    return counts


def usage_import_cluster(*, cluster_id: int, start: datetime, end: datetime) -> UsageImport | None:
    """Import ``[start, end)`` of one Slurm cluster's accounting through its own connection
    (:func:`~billing.services.usage_import.usage_import_slurm` with the cluster: its pools'
    partitions, job keys naming the cluster). ``None`` when the cluster is gone or not Slurm,
    or its credentials cannot be read (kept as an error of the cluster). A scheduler error is
    kept as an error of the cluster and raised, so the task retries a transient one."""
    cluster = Cluster.objects.filter(pk=cluster_id, kind=Scheduler.SLURM).first()
    if cluster is None:
        return None
    try:
        adapter = cluster_adapter_unshared(cluster)  # its own connection, closed below
    except (OSError, ValueError) as error:
        cluster_operation_record(
            cluster=cluster, operation=ClusterOperation.USAGE, errors=[f"credentials: {error}"]
        )
        return None
    if adapter is None:
        return None
    try:
        imported = usage_import_slurm(scheduler=adapter, start=start, end=end, cluster=cluster)
    except SchedulerError as error:
        cluster_operation_record(
            cluster=cluster, operation=ClusterOperation.USAGE, errors=[f"{error.code}: {error}"]
        )
        raise
    finally:
        adapter.close()
    cluster_operation_record(cluster=cluster, operation=ClusterOperation.USAGE, errors=[])
    return imported


def usage_import_environment_recorded(*, error: Exception | None = None) -> None:
    """Record the environment's Slurm accounting import in its cluster's health (its row, when
    the environment variables define one)."""
    cluster_operation_record(
        cluster=cluster_of(kind=Scheduler.SLURM, cluster=None),
        operation=ClusterOperation.USAGE,
        errors=[str(error)] if error is not None else [],
    )
