"""Celery tasks of clusters: the periodic fan-out and one connection check per cluster."""

from __future__ import annotations

from celery import shared_task

from pools.clusters.models import Cluster
from pools.clusters.services import cluster_check, clusters_check_fan_out


@shared_task
def clusters_check_task() -> int:
    """Beat's entry: queue a check of every cluster; returns how many."""
    return clusters_check_fan_out()


@shared_task
def cluster_check_task(cluster_id: int) -> str:
    """Check one cluster's connection; returns its status (``"missing"`` when deleted since).
    Safe twice: a check only records what it found."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return "missing"
    return cluster_check(cluster=cluster).status
