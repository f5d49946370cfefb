"""Where an elastic allocation's cards go: its home pool first, a burst pool when home is full
(issue 35; seed 004 §3.3 "across clouds": join a public-cloud pool for peaks, at a price).
Pure, no ORM; cards are whole numbers.

The rules:

- the loop's decision (:func:`pools.elastic.policy.evaluate`) says how many cards the
  allocation should hold, never above its ceiling; this module only says *where*;
- **up**: the extra cards come from the home pool's lendable cards first, then from the burst
  pool's free cards (for a team that opted in, after the budget check); whatever neither has
  is not granted;
- **down**: the cards released are taken from the burst pool first (they cost more and sit in
  another cluster), then from home;
- burst-pool cards are always above the floor: ``0 <= burst <= held - floor``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pools.elastic.metering import burst_card_seconds


@dataclass(frozen=True)
class Placement:
    """``cards`` held in all, of which ``burst_cards`` in the burst pool; ``home_cards`` the
    rest (the floor and the home pool's burst)."""

    cards: int
    burst_cards: int

    @property
    def home_cards(self) -> int:
        return self.cards - self.burst_cards


def place(
    *,
    floor_cards: int,
    ceiling_cards: int,
    held: Placement,
    wanted_cards: int,
    home_room: int,
    burst_room: int,
) -> Placement:
    """Where ``wanted_cards`` (the decision's target, capped to ``[floor, ceiling]``) go, from
    ``held``. ``home_room``: cards the home pool can still lend this allocation; ``burst_room``:
    cards the burst pool can still take for it (0 without a burst pool or opt-in)."""
    wanted = max(floor_cards, min(ceiling_cards, wanted_cards))
    if wanted >= held.cards:
        extra = wanted - held.cards
        from_home = min(extra, max(0, home_room))
        from_burst = min(extra - from_home, max(0, burst_room))
        return Placement(held.cards + from_home + from_burst, held.burst_cards + from_burst)
    release = held.cards - wanted
    from_burst = min(release, held.burst_cards)
    return Placement(wanted, held.burst_cards - from_burst)


def burst_split(
    timeline: Sequence[tuple[float, int]],
    *,
    floor_cards: int,
    home_cards: int,
    start: float,
    end: float,
) -> tuple[float, float]:
    """A what-if's cards over time split the way :func:`place` places them when the home
    pool can hold ``home_cards`` of them (floor included): ``(card-seconds above the floor
    at home, card-seconds in the burst pool)`` in ``[start, end)``. Without a burst pool the
    second is the load the home pool could not take."""
    capped = [(at, min(cards, max(home_cards, floor_cards))) for at, cards in timeline]
    home = burst_card_seconds(capped, floor_cards=floor_cards, start=start, end=end)
    burst = burst_card_seconds(
        timeline, floor_cards=max(home_cards, floor_cards), start=start, end=end
    )
    return home, burst
