"""Reads of waiting work: what a user may see, and when each scheduler was last read."""

from __future__ import annotations

from django.db.models import QuerySet

from pools.waiting.models import PendingWork, PendingWorkRead


def pending_work_list(*, user) -> QuerySet[PendingWork]:
    """The waiting work of the teams ``user`` may see (pool admins: all), with the team."""
    return PendingWork.objects.visible_to(user).select_related("team")


def pending_work_reads() -> list[PendingWorkRead]:
    """The last read of each scheduler, by scheduler name."""
    return list(PendingWorkRead.objects.order_by("scheduler"))
