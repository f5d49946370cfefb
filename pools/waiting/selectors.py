"""Reads of waiting work: what a user may see, and when each scheduler was last read."""

from __future__ import annotations

from django.db.models import F, QuerySet

from pools.waiting.models import PendingWork, PendingWorkRead


def pending_work_list(*, user) -> QuerySet[PendingWork]:
    """The waiting work of the teams ``user`` may see (pool admins: all), with the team and
    the cluster."""
    return PendingWork.objects.visible_to(user).select_related("team", "cluster")


def pending_work_reads() -> list[PendingWorkRead]:
    """The last read of each cluster, by scheduler and cluster name (the environment's
    cluster without a row first), with the cluster."""
    return list(
        PendingWorkRead.objects.select_related("cluster").order_by(
            "scheduler", F("cluster__name").asc(nulls_first=True), "pk"
        )
    )
