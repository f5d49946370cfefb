"""Burst card-time from the cards an elastic allocation held over time. Pure, no ORM.

Chargeback (issue #19): the floor is billed as reserved card-hours like any allocation; burst
card-hours (cards held above the floor) are their own statement line, metered from the cards
*actually held*: the scale events' timeline, a step function that changes at each event.
"""

from __future__ import annotations

from collections.abc import Sequence

from pools.capacity.arithmetic import clip


def burst_card_seconds(
    timeline: Sequence[tuple[float, int]],
    *,
    floor_cards: int,
    start: float,
    end: float,
) -> float:
    """Card-seconds above ``floor_cards`` in ``[start, end)``.

    ``timeline``: ``(unix s, cards held from then on)`` in time order (the first point is the
    cards held before any later change; before it nothing is counted). The caller splits
    ``[start, end)`` at month boundaries in the billing time zone."""
    if end <= start:
        return 0.0
    total = 0.0
    for index, (at, cards) in enumerate(timeline):
        until = timeline[index + 1][0] if index + 1 < len(timeline) else end
        if cards > floor_cards and (span := clip(at, until, start, end)) is not None:
            total += (cards - floor_cards) * (span[1] - span[0])
    return total
