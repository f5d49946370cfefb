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


# Slurm's flag for each rule (scontrol.1, "Flags": DAILY, WEEKDAY, WEEKLY; the same on 22.05,
# 24.11 and 26.05).
SLURM_REPEAT = {DAILY: "DAILY", WEEKDAY: "WEEKDAY", WEEKLY: "WEEKLY"}
SATURDAY = 5


def slurm_repeats(
    first: tuple[datetime, datetime], recurrence: str, zone: str, count: int
) -> list[tuple[datetime, datetime]]:
    """The first ``count`` windows slurmctld gives a reservation created over ``first`` with
    ``recurrence``'s flag, in UTC. slurmctld moves an ended window forward in its own local
    time (``_advance_resv_time`` in src/slurmctld/reservation.c: ``tm_mday`` plus 1, 7, or to
    the next Monday for WEEKDAY after a Friday, then ``mktime`` with ``tm_isdst = -1``), so the
    wall-clock hours stay those of ``zone`` (slurmctld's), whatever the rule's zone."""
    tz = ZoneInfo(zone)
    s0, e0 = first[0].astimezone(tz), first[1].astimezone(tz)
    span = e0.date() - s0.date()
    day, found = s0.date(), []
    while len(found) < count:
        s = datetime.combine(day, s0.time(), tzinfo=tz).astimezone(UTC)
        e = datetime.combine(day + span, e0.time(), tzinfo=tz).astimezone(UTC)
        found.append((s, e))
        day += timedelta(days=7 if recurrence == WEEKLY else 1)
        while recurrence == WEEKDAY and day.weekday() >= SATURDAY:
            day += timedelta(days=1)
    return found


def slurm_drift(ahead: list[tuple[datetime, datetime]], recurrence: str, zone: str) -> int | None:
    """The index in ``ahead`` (a rule's occurrences in order, from the one the Slurm reservation
    starts with) of the first occurrence Slurm's repetition in ``zone`` would place elsewhere,
    or ``None`` when it places them all right: a rule in another zone than slurmctld's drifts
    by an hour at the first change of summer time one zone has and the other has not."""
    repeated = slurm_repeats(ahead[0], recurrence, zone, len(ahead)) if ahead else []
    return next((i for i, (a, b) in enumerate(zip(ahead, repeated, strict=True)) if a != b), None)
