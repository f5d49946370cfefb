"""Reads of recurring reservations."""

from __future__ import annotations

from django.db.models import QuerySet

from pools.recurring.models import RecurringReservation


def recurring_reservation_list(*, user) -> QuerySet[RecurringReservation]:
    """The recurring reservations ``user`` may see (their teams'; every one for a pool admin),
    with team, pool and GPU model joined, by first date."""
    return RecurringReservation.objects.visible_to(user).select_related("team", "pool", "gpu_model")
