"""Capacity arithmetic, pure functions: card-hours, peak concurrent cards over a window, free cards.

Intervals are half-open ``[start, end)``: an allocation ending at 12:00 does not compete with one
starting at 12:00, and a request for next week does not compete with one that ends tomorrow.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import TypeVar

SECONDS_PER_HOUR = Decimal(3600)

Instant = TypeVar("Instant", datetime, date, float)


def clip(
    start: Instant, end: Instant, window_start: Instant, window_end: Instant
) -> tuple[Instant, Instant] | None:
    """The intersection of the half-open intervals ``[start, end)`` and ``[window_start,
    window_end)`` (aware datetimes, dates or Unix seconds), or ``None`` when it is empty:
    intervals that only touch (one ends as the other starts) do not overlap.

    The one overlap rule of the portal's Python; the database's is
    :meth:`pools.capacity.models.AllocationQuerySet.overlapping`."""
    lo, hi = max(start, window_start), min(end, window_end)
    return (lo, hi) if hi > lo else None


def card_seconds_hours(card_seconds: int | Decimal) -> Decimal:
    """Card-seconds as card-hours: ``card_seconds / 3600``, exact (a Decimal, never a float).

    The one conversion billing, pages, the API and reclamation use; ``Decimal(7559)`` card-seconds
    is 2.0997… card-hours.
    """
    return Decimal(card_seconds) / SECONDS_PER_HOUR


def card_hours(cards: int, start: datetime, end: datetime) -> Decimal:
    """Card-hours of ``cards`` held over ``[start, end)``: cards × elapsed whole seconds / 3600.

    ``start``/``end`` are timezone-aware and compared in UTC: Python subtracts two datetimes of
    the *same* tzinfo as wall-clock times (``datetime`` docs, "aware arithmetic"), which would
    make a Europe/Berlin day with the autumn clock change 24 h instead of 25. Whole seconds, as
    Slurm accounting and the billing meter count them; 0 when ``end <= start``. 2 cards from 00:30
    to 03:30 New York on 2026-11-01 (the fall-back night) is 8 card-hours.
    """
    seconds = int((end.astimezone(UTC) - start.astimezone(UTC)).total_seconds())
    return card_seconds_hours(cards * max(seconds, 0))


def peak_cards(
    intervals: Iterable[tuple[datetime, datetime, int]], start: datetime, end: datetime
) -> int:
    """Largest number of cards held at any instant of ``[start, end)``.

    ``intervals`` are ``(starts_at, ends_at, cards)``, half-open; those not overlapping the
    window are ignored. The one span of :func:`peaks_per_span`. Returns 0 for no overlap or an
    empty window.
    """
    if start >= end:
        return 0
    return peaks_per_span(intervals, [start, end])[0][0]


def peaks_per_span(
    intervals: Iterable[tuple[Instant, Instant, int]], bounds: list[Instant]
) -> list[tuple[int, Instant]]:
    """For each span ``[bounds[i], bounds[i + 1])`` (``bounds`` ascending, aware datetimes or
    Unix seconds): the most cards held at any instant of it, as :func:`peak_cards` counts them
    over that span, and the first instant that many are held from (the span's start when
    nothing changes inside it); ``len(bounds) - 1`` pairs.

    ``intervals`` are ``(starts_at, ends_at, cards)``, half-open. The level only changes at an
    interval's start or end, so each span's peak is the level at its start or just after one of
    the changes inside it: one sort of the endpoints and one pass over them for all the spans,
    ends and starts at one instant netted (an end before a start, as :func:`peak_cards` orders
    them). 20 cards from 17:06 to 08:00 the next morning make both days' peak 20 whatever
    else holds cards at noon (a noon sample missed them).
    """
    change: dict = {}
    for s, e, cards in intervals:
        if cards > 0 and e > s:
            change[s] = change.get(s, 0) + cards
            change[e] = change.get(e, 0) - cards
    instants = sorted(change)
    level, j, found = 0, 0, []
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        while j < len(instants) and instants[j] <= lo:
            level += change[instants[j]]
            j += 1
        peak, at = level, lo
        while j < len(instants) and instants[j] < hi:
            level += change[instants[j]]
            if level > peak:
                peak, at = level, instants[j]
            j += 1
        found.append((peak, at))
    return found


def spans_over(
    intervals: Iterable[tuple[datetime, datetime, int]],
    start: datetime,
    end: datetime,
    limit: int,
) -> list[tuple[datetime, datetime]]:
    """The stretches of ``[start, end)`` during which more than ``limit`` cards are held, as
    sorted, disjoint, half-open ``(from, to)`` pairs (adjacent stretches merged): the same
    sweep line as :func:`peak_cards` (ends before starts at one instant), so
    ``peak_cards(intervals, a, b) > limit`` exactly when ``[a, b)`` overlaps one of them
    (:func:`overlaps_any`). One sort, O(n log n): the over-commit alert asks this of every
    allocation of a pool, where a :func:`peak_cards` per allocation was O(n² log n)."""
    events: list[tuple[datetime, int]] = []
    for s, e, cards in intervals:
        if cards > 0 and (span := clip(s, e, start, end)) is not None:
            events.append((span[0], cards))
            events.append((span[1], -cards))
    events.sort(key=lambda ev: (ev[0], ev[1]))
    spans: list[tuple[datetime, datetime]] = []
    held, opened = 0, None
    for i, (instant, delta) in enumerate(events):
        held += delta
        if i + 1 < len(events) and events[i + 1][0] == instant:
            continue  # the level holds from the last event of an instant on
        if held > limit and opened is None:
            opened = instant
        elif held <= limit and opened is not None:
            if spans and spans[-1][1] == opened:
                spans[-1] = (spans[-1][0], instant)
            else:
                spans.append((opened, instant))
            opened = None
    return spans


def overlaps_any(spans: list[tuple[datetime, datetime]], start: datetime, end: datetime) -> bool:
    """Whether ``[start, end)`` overlaps one of ``spans`` (sorted, disjoint, half-open, as
    :func:`spans_over` gives them): a binary search, O(log n)."""
    if end <= start:
        return False
    i = bisect_right(spans, start, key=lambda span: span[1])  # first span ending after start
    return i < len(spans) and spans[i][0] < end


def usable_cards(schedulable: int, overcommit_ratio: Decimal) -> int:
    """Cards that may be promised: ``floor(schedulable × over-commit ratio)``, an integer.

    The ratio goes through ``str`` so a float (an unsaved model instance's attribute) counts as
    the decimal it was written as: ``Decimal(1.15)`` is 1.1499…, and 20 × it would floor to 22.
    """
    return math.floor(Decimal(schedulable) * Decimal(str(overcommit_ratio)))


def free_cards(
    *,
    schedulable: int,
    overcommit_ratio: Decimal,
    intervals: Iterable[tuple[datetime, datetime, int]],
    start: datetime,
    end: datetime,
) -> int:
    """Cards still free for the whole window ``[start, end)`` (never negative)."""
    return free_after_peak(
        schedulable=schedulable,
        overcommit_ratio=overcommit_ratio,
        peak=peak_cards(intervals, start, end),
    )


def free_after_peak(*, schedulable: int, overcommit_ratio: Decimal, peak: int) -> int:
    """Cards free when at most ``peak`` are held at once: usable cards − peak, never negative."""
    return max(0, usable_cards(schedulable, overcommit_ratio) - peak)
