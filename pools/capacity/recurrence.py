"""Occurrences of a recurring reservation, and the cards held over time: pure functions.

A rule repeats ``daily``, on ``weekday``s (Monday to Friday) or ``weekly`` (on the weekday of
its first date) from ``first_date`` to ``last_date`` (both included), each occurrence from
``start_time`` to ``end_time`` *local time in the rule's zone* (an IANA name). The instants
are worked out per date, so an occurrence keeps its wall-clock hours across a change of
summer time (09:00-18:00 Europe/Berlin is 08:00-17:00 UTC in July and 07:00-16:00 UTC in
January) and a day has as many hours as it has, never 24 by assumption.

A wall time the clock skips (02:30 on the spring-forward night) or passes twice (02:30 on the
fall-back night) is read as Python reads it (PEP 495, ``fold=0``): the offset before the
change, so a skipped 02:30 is 03:30 on the clock after it and a doubled one is the first.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

DAILY, WEEKDAY, WEEKLY = "daily", "weekday", "weekly"
FRIDAY = 4  # date.weekday(): Monday is 0


@dataclass(frozen=True)
class Rule:
    """What the occurrences are worked out from (see the module doc); ``end_time`` after
    ``start_time`` (an occurrence ends on its own date)."""

    recurrence: str
    first_date: date
    last_date: date
    start_time: time
    end_time: time
    time_zone: str
    cards: int = 0


def _dates(rule: Rule, since: date, until: date) -> Iterator[date]:
    day = max(rule.first_date, since)
    last = min(rule.last_date, until)
    if rule.recurrence == WEEKLY:  # forward to the first date's weekday
        day += timedelta(days=(rule.first_date.weekday() - day.weekday()) % 7)
    step = timedelta(days=7 if rule.recurrence == WEEKLY else 1)
    while day <= last:
        if rule.recurrence != WEEKDAY or day.weekday() <= FRIDAY:
            yield day
        day += step


def occurrences(
    rule: Rule, start: datetime | None = None, end: datetime | None = None
) -> list[tuple[datetime, datetime]]:
    """``(starts_at, ends_at)`` in UTC of every occurrence of ``rule``, in order; with ``start``
    and ``end`` (aware) only those overlapping ``[start, end)``. Raises ``ZoneInfoNotFoundError``
    for an unknown zone."""
    zone = ZoneInfo(rule.time_zone)
    # A local date is at most 14 h from UTC's (UTC+14, UTC-12): one day either side covers it.
    since = start.astimezone(UTC).date() - timedelta(days=1) if start else rule.first_date
    until = end.astimezone(UTC).date() + timedelta(days=1) if end else rule.last_date
    found = []
    for day in _dates(rule, since, until):
        s = datetime.combine(day, rule.start_time, tzinfo=zone).astimezone(UTC)
        e = datetime.combine(day, rule.end_time, tzinfo=zone).astimezone(UTC)
        if (start is None or e > start) and (end is None or s < end):
            found.append((s, e))
    return found


@dataclass(frozen=True)
class Steps:
    """Cards held over time as a step function: ``levels[i]`` from ``times[i]`` until
    ``times[i + 1]`` (0 before the first time and from the last on)."""

    times: list[datetime]
    levels: list[int]

    @classmethod
    def of(cls, intervals: Iterable[tuple[datetime, datetime, int]]) -> Steps:
        """The sum of ``(starts_at, ends_at, cards)`` half-open intervals."""
        deltas: dict[datetime, int] = {}
        for s, e, n in intervals:
            if e > s and n:
                deltas[s] = deltas.get(s, 0) + n
                deltas[e] = deltas.get(e, 0) - n
        times = sorted(deltas)
        levels, held = [], 0
        for t in times:
            held += deltas[t]
            levels.append(held)
        return cls(times, levels)

    def peak(self, start: datetime, end: datetime) -> int:
        """The most cards held at an instant of ``[start, end)``: the level in force at
        ``start`` and every level that starts before ``end``. O(log n + steps inside)."""
        first = bisect_right(self.times, start) - 1
        last = bisect_left(self.times, end)
        return max(self.levels[max(first, 0) : last], default=0)
