"""Reads of the calendars: a team's entries and its feed link."""

from __future__ import annotations

from datetime import UTC, timedelta

from pools.calendar.feed import TOKEN_LENGTH, feed_token, token_sha256
from pools.calendar.models import TeamCalendarFeed
from pools.capacity.models import Allocation
from pools.recurring.models import RecurringReservation, ReservationStatus
from pools.tenancy.models import Team


def team_calendar_entries(*, team_id: int, now) -> tuple[list, list]:
    """What the team's iCalendar feed lists: its allocations that hold cards (approved to
    expiring) and end after ``now``, and its active recurring reservations with a date from
    ``now``'s UTC date less a day on (a local date is at most 14 h from UTC's); pool and GPU
    model joined, by start."""
    allocations = (
        Allocation.objects.holding()
        .filter(team_id=team_id, ends_at__gt=now)
        .select_related("pool", "gpu_model")
        .order_by("starts_at", "id")
    )
    recurring = RecurringReservation.objects.filter(
        team_id=team_id,
        status=ReservationStatus.ACTIVE,
        last_date__gte=now.astimezone(UTC).date() - timedelta(days=1),
    ).select_related("pool", "gpu_model")
    return list(allocations), list(recurring)


def team_calendar_feed_token(*, team_id: int) -> str | None:
    """The team's secret feed token (made again from the row's salt,
    :mod:`pools.calendar.feed`), ``None`` while it has no link. One query."""
    salt = TeamCalendarFeed.objects.filter(team_id=team_id).values_list("salt", flat=True).first()
    return feed_token(salt) if salt else None


def team_by_feed_token(token: str) -> Team | None:
    """The team whose feed link has ``token``, ``None`` for any other string (a reset link,
    a guess). One query, by the token's SHA-256."""
    if len(token) != TOKEN_LENGTH:
        return None
    feed = (
        TeamCalendarFeed.objects.filter(token_sha256=token_sha256(token))
        .select_related("team")
        .first()
    )
    return feed.team if feed else None
