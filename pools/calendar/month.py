"""The month view of a capacity calendar (issue 32 item 2): per local day of a calendar month
the cards free over the whole day, counted by :func:`pools.capacity.availability.pool_free_cards`
as the week view and the request form count them (usable − the peak held: the least free at
any instant of the day; read once for the month,
:func:`pools.calendar.week.free_per_day`), how many allocations and recurring
occurrences hold cards that day, and how many planned maintenance windows take cards away.

Days are local days of the portal's zone (``TIME_ZONE``, 23 or 25 hours over a change of summer
time); months are named ``YYYY-MM``. The grid starts on the Monday on or before the 1st and
ends on the Sunday on or after the last day, so every row is an ISO week the week view opens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta
from itertools import pairwise

from pools.calendar.week import (
    FIRST_YEAR,
    LAST_YEAR,
    Hold,
    free_per_day,
    held_moved,
    local_midnight,
    maintenance_holds,
    week_holds,
    week_name,
)

_MONTH = re.compile(r"(\d{4})-(\d{2})")


MONTH_FORMAT = f"a month YYYY-MM (2027-03), years {FIRST_YEAR}-{LAST_YEAR}"


def month_first(text: str | None, today: date) -> date:
    """The 1st of month ``text`` (``2027-03``); of ``today``'s month when ``text`` is absent or
    empty. ``ValueError`` (its message :data:`MONTH_FORMAT`) when ``text`` is not a month
    within years ``FIRST_YEAR``-``LAST_YEAR`` (as :func:`week_monday`)."""
    if not text:
        return today.replace(day=1)
    match = _MONTH.fullmatch(text)
    if match and 1 <= int(match[2]) <= 12 and FIRST_YEAR <= int(match[1]) <= LAST_YEAR:
        return date(int(match[1]), int(match[2]), 1)
    raise ValueError(MONTH_FORMAT)


def month_name(first: date) -> str:
    return f"{first.year:04d}-{first.month:02d}"


def next_month(first: date) -> date:
    return (first + timedelta(days=32)).replace(day=1)


def previous_month(first: date) -> date:
    return (first - timedelta(days=1)).replace(day=1)


@dataclass(frozen=True)
class MonthDay:
    """One local day of the month: ``free`` cards over the whole day, ``allocations`` and
    ``occurrences`` the holding allocations and recurring occurrences overlapping it, ``week``
    the ISO week that holds it (``2027-W12``), ``maintenance`` the planned maintenance windows
    taking cards away that day."""

    day: date
    free: int
    allocations: int
    occurrences: int
    week: str
    maintenance: int = 0

    @property
    def holds(self) -> int:
        return self.allocations + self.occurrences


def count_holds(holds: list[Hold], bounds: list) -> list[tuple[int, int]]:
    """``(allocations, occurrences, maintenance windows)`` among ``holds`` overlapping each day
    ``[bounds[i], bounds[i + 1])`` (compared as Unix seconds: aware datetimes of two zones
    compare slowly, and a month has ~1,700 holds on the bench). An allocation counts once a day
    however many holds its cards' pieces make (:func:`pools.calendar.week.week_holds`)."""
    spans = [(h.starts_at.timestamp(), h.ends_at.timestamp(), h.kind, h.ref) for h in holds]
    edges = [b.timestamp() for b in bounds]
    counts = []
    for lo, hi in pairwise(edges):
        inside = [(kind, ref) for s, e, kind, ref in spans if s < hi and e > lo]
        kinds = [kind for kind, _ in inside]
        allocations = len({ref for kind, ref in inside if kind == "allocation"})
        counts.append((allocations, kinds.count("recurring"), kinds.count("maintenance")))
    return counts


def month_days(*, pool, gpu_model, first: date) -> list[MonthDay]:
    """The days of ``first``'s month. Eight queries (the month's holds, two, its maintenance
    windows, one, and :func:`free_per_day`'s five; one more when a reclamation changed an
    allocation's cards), whatever the number of days or allocations."""
    last = next_month(first)
    count = (last - first).days
    bounds = [local_midnight(first + timedelta(days=i)) for i in range(count + 1)]
    span = {"pool": pool, "gpu_model": gpu_model, "start": bounds[0], "end": bounds[-1]}
    moved = held_moved(**span)
    holds = week_holds(**span, moved=moved)
    holds += maintenance_holds(**span)
    free = free_per_day(pool=pool, gpu_model=gpu_model, bounds=bounds, moved=moved)
    counts = count_holds(holds, bounds)
    days = []
    for i in range(count):
        allocations, occurrences, maintenance = counts[i]
        day = first + timedelta(days=i)
        days.append(MonthDay(day, free[i], allocations, occurrences, week_name(day), maintenance))
    return days


def month_grid(days: list) -> list[list]:
    """``days`` (consecutive, from a 1st) as rows of seven from Monday, ``None`` before the 1st
    and after the last day."""
    cells = [None] * days[0].day.weekday() + list(days)
    cells += [None] * (-len(cells) % 7)
    return [cells[i : i + 7] for i in range(0, len(cells), 7)]
