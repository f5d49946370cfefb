"""The week view of a pool × GPU model's capacity calendar (issue 32 item 2): per local day the
cards free over the whole day, as the request form counts them
(:func:`pools.capacity.availability.pool_free_cards`: usable − the peak held, so the minimum
free over the day), and what holds cards that week — holding allocations (and those ended or
reclaimed, up to their end) and the occurrences of active recurring reservations — or takes them
away: planned maintenance windows, which the free count already leaves out
(:func:`maintenance_holds`).

Days are local days of the portal's zone (``TIME_ZONE``), so a day over a change of summer time
has 23 or 25 hours. Weeks are ISO weeks (Monday first), named ``YYYY-Www``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from itertools import pairwise

from django.utils import timezone

from pools.capacity.arithmetic import peaks_per_span
from pools.capacity.availability import held_intervals, pool_free_cards
from pools.capacity.selectors import cards_moved_since, intervals_as_held
from pools.capacity.window import (
    WindowHolds,
    held_allocations,
    maintenance_windows_by_pool_model,
)
from pools.inventory.selectors import inventory_generation
from pools.recurring.models import RecurringReservation
from pools.recurring.recurrence import occurrences

_WEEK = re.compile(r"(\d{4})-W(\d{2})")
OTHER_TEAMS = "other teams"
# The years a calendar shows, weeks and months alike (pool and driver-group calendars): a
# week or month outside them is refused like one that does not exist (the pages answer 400).
# Far from ``date.min``/``date.max`` so the previous and next links, local midnights and the
# day's margin in UTC all stay dates.
FIRST_YEAR, LAST_YEAR = 1970, 9998
WEEK_FORMAT = f"an ISO week YYYY-Www (2027-W03), years {FIRST_YEAR}-{LAST_YEAR}"


def week_monday(text: str | None, today: date) -> date:
    """The Monday of ISO week ``text`` (``2027-W03``); of ``today``'s week when ``text`` is
    absent or empty. ``ValueError`` (its message :data:`WEEK_FORMAT`) when ``text`` is not a
    week that exists (``2027-W53``) within years ``FIRST_YEAR``-``LAST_YEAR``."""
    if not text:
        return today - timedelta(days=today.weekday())
    match = _WEEK.fullmatch(text)
    if match and FIRST_YEAR <= int(match[1]) <= LAST_YEAR:
        try:
            return date.fromisocalendar(int(match[1]), int(match[2]), 1)
        except ValueError:
            pass
    raise ValueError(WEEK_FORMAT)


def week_name(monday: date) -> str:
    year, week, _ = monday.isocalendar()
    return f"{year}-W{week:02d}"


@dataclass(frozen=True)
class Hold:
    kind: str  # "allocation", "recurring" or "maintenance" (``team``: the window's title)
    ref: int
    team: str
    cards: int
    starts_at: datetime
    ends_at: datetime
    workload_class: str = ""  # the allocation's class name (issue 36); "" unclassed or recurring
    # A team the reader may not see: the page shows its cards and times only, never the
    # allocation's or reservation's id or class (pools.tenancy.permissions.may_see_all_holders).
    other_team: bool = False


@dataclass(frozen=True)
class Day:
    day: date
    free: int
    holds: list[Hold]


def local_midnight(day: date) -> datetime:
    """00:00 of ``day`` in the portal's zone."""
    return datetime.combine(day, time(), tzinfo=timezone.get_current_timezone())


def held_moved(*, pool, gpu_model, start, end) -> list:
    """The allocations of whole cards of the pool × model that held cards in ``[start, end)``
    and whose cards a reclamation changed after ``start`` (shrunk, ended, or undone), each
    with the pieces ``(start, end, cards)`` of what it held
    (:func:`pools.capacity.selectors.cards_moved_since`): read once for a calendar's holds
    (:func:`week_holds`) and its free cards (:func:`free_per_day`). One query when none
    changed, two when some did."""
    held = held_allocations(pool=pool, gpu_model=gpu_model, start=start, end=end)
    return cards_moved_since(held, start)


def week_holds(
    *,
    pool,
    gpu_model,
    start,
    end,
    team_names: dict[int, str] | None = None,
    moved: list | None = None,
) -> list[Hold]:
    """Allocations of whole cards of the pool × model that held cards in ``[start, end)``
    (:func:`pools.capacity.window.held_allocations`: holding ones, and those ended or reclaimed
    up to their end, as :func:`free_per_day` counts them) and recurring occurrences there, by
    start; a team not in ``team_names`` (those the reader may see) reads :data:`OTHER_TEAMS`,
    its holds marked ``other_team``. An allocation a reclamation changed after ``start``
    (``moved``, :func:`held_moved`, read here when not given) is one hold per piece of the
    cards it held in the window, as :func:`free_per_day` counts it: shrunk from 4 cards to 1
    at 06:00 and released at 10:00, it holds 4 until 06:00 and 1 from 06:00 to 10:00, not 1
    throughout (its ``card_count`` now); a piece of 0 cards (ended by a reclamation, later
    undone) holds nothing. Two queries, three or four without ``moved``."""
    team_names = team_names or {}
    if moved is None:
        moved = held_moved(pool=pool, gpu_model=gpu_model, start=start, end=end)
    pieces = {a.pk: spans for a, spans in moved}
    holds = [
        Hold(
            "allocation",
            a.pk,
            team_names.get(a.team_id, OTHER_TEAMS),
            cards,
            starts_at,
            ends_at,
            a.workload_class.name if a.workload_class else "",
            a.team_id not in team_names,
        )
        for a in held_allocations(
            pool=pool, gpu_model=gpu_model, start=start, end=end
        ).select_related("workload_class")
        for starts_at, ends_at, cards in pieces.get(a.pk, [(a.starts_at, a.ends_at, a.card_count)])
        if cards and starts_at < end and ends_at > start
    ]
    rules = RecurringReservation.objects.holding(
        pool_id=pool.pk, gpu_model_id=gpu_model.pk, start=start, end=end
    )
    for r in rules:
        team, other = team_names.get(r.team_id, OTHER_TEAMS), r.team_id not in team_names
        holds += [
            Hold("recurring", r.pk, team, r.card_count, s, e, other_team=other)
            for s, e in occurrences(r.rule, start, end)
        ]
    return sorted(holds, key=lambda h: (h.starts_at, h.kind, h.ref))


def maintenance_holds(*, pool, gpu_model, start, end) -> list[Hold]:
    """The planned maintenance windows overlapping ``[start, end)`` that take cards of the
    pool × model away, as holds of kind ``maintenance`` (``ref`` the window's id, ``team`` its
    title, ``cards`` as the free count takes them:
    :func:`pools.capacity.window.maintenance_windows_by_pool_model`). Without them a day read
    "40 free" out of 48 with nothing holding cards. One query."""
    found = maintenance_windows_by_pool_model(
        start, end, pool_id=pool.pk, gpu_model_id=gpu_model.pk
    )
    return [
        Hold("maintenance", ref, title, cards, s, e)
        for ref, title, s, e, cards in found.get((pool.pk, gpu_model.pk), [])
    ]


def free_per_day(
    *, pool, gpu_model, bounds: list[datetime], moved: list | None = None
) -> list[int]:
    """Free cards over each day ``[bounds[i], bounds[i + 1])``:
    :func:`pool_free_cards` of the day, given the day's peak of what held cards over the whole
    span (:func:`held_intervals`, read once; each day's peak by
    :func:`pools.capacity.arithmetic.peaks_per_span`, as the capacity timeline finds it) and the
    inventory generation it is read at. A past day is what was held that day, as the timeline
    counts it: an allocation ended or reclaimed early counts its cards until its end (at 06:00
    today: today's hours before 06:00), and the hours before a reclamation changed an
    allocation's cards count the cards it held then
    (:func:`pools.capacity.selectors.intervals_as_held`; ``moved``: :func:`held_moved` of the
    span when the caller read it). From now on the count is the approval's (an ended
    allocation's end is never after now). Five queries (the generation, the allocations, the
    recurring rules, the maintenance windows, the allocations a reclamation changed in the
    span; one more when there are any; one fewer with ``moved``), whatever the number of days
    or allocations."""
    generation = inventory_generation()
    span = {"pool": pool, "gpu_model": gpu_model, "start": bounds[0], "end": bounds[-1]}
    intervals = intervals_as_held(
        held_intervals(**span), held_allocations(**span), since=bounds[0], moved=moved
    )
    free = []
    for (start, end), (peak, _) in zip(
        pairwise(bounds), peaks_per_span(intervals, bounds), strict=True
    ):
        holds = WindowHolds(generation, peak, None, None)
        free.append(
            pool_free_cards(pool=pool, gpu_model=gpu_model, start=start, end=end, holds=holds)
        )
    return free


def week_days(*, pool, gpu_model, monday: date, team_names: dict[int, str]) -> list[Day]:
    """The seven days from ``monday``: free cards over each local day and its holds, planned
    maintenance windows among them."""
    bounds = [local_midnight(monday + timedelta(days=i)) for i in range(8)]
    span = {"pool": pool, "gpu_model": gpu_model, "start": bounds[0], "end": bounds[-1]}
    moved = held_moved(**span)
    holds = week_holds(**span, team_names=team_names, moved=moved)
    holds += maintenance_holds(**span)
    holds.sort(key=lambda h: (h.starts_at, h.kind, h.ref))
    free = free_per_day(pool=pool, gpu_model=gpu_model, bounds=bounds, moved=moved)
    days = []
    for i in range(7):
        start, end = bounds[i], bounds[i + 1]
        inside = [h for h in holds if h.starts_at < end and h.ends_at > start]
        days.append(Day(start.date(), free[i], inside))
    return days
