"""Burst cards: what an elastic allocation may borrow, and what is handed back when a
guaranteed approval needs it. Pure, no ORM; cards are whole numbers, times Unix seconds.

The rules (issue #19):

- an elastic allocation's **floor** is its ``card_count``, approved like any allocation and
  counted in the capacity invariant; its **burst** (cards held above the floor) is borrowed only
  from the pool's **free** cards: usable cards x over-commit, less every holding allocation's
  floor, less the burst others already hold;
- burst is **never counted against guaranteed cards**: an approval checks floors only, so it
  may take cards that are lent out; those are then **handed back**: the newest bursts first
  (the most recently borrowed cards are the least settled), each down to its floor at most,
  until floors plus burst fit again. The cut takes effect when the guaranteed allocation starts
  (at once if it already has); the notice is the time until then.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Burst:
    """An elastic allocation holding ``cards_held`` cards over its ``floor_cards`` since
    ``borrowed_since`` (Unix s; when its burst last rose from zero)."""

    allocation_id: int
    floor_cards: int
    cards_held: int
    borrowed_since: float

    @property
    def burst_cards(self) -> int:
        return max(0, self.cards_held - self.floor_cards)


@dataclass(frozen=True)
class HandBack:
    """Allocation ``allocation_id`` goes from ``cards_from`` to ``cards_to`` at
    ``effective_at`` (Unix s), ``notice_s`` after it was decided."""

    allocation_id: int
    cards_from: int
    cards_to: int
    effective_at: float
    notice_s: float


def hand_back_plan(
    *,
    capacity_cards: int,
    guaranteed_cards: int,
    bursts: Iterable[Burst],
    now: float,
    guaranteed_starts_at: float,
) -> list[HandBack]:
    """What to take back after an approval that brings the floors to ``guaranteed_cards``:
    nothing when floors + burst fit ``capacity_cards``; else the newest bursts first."""
    ordered = sorted(bursts, key=lambda b: (-b.borrowed_since, -b.allocation_id))
    excess = guaranteed_cards + sum(b.burst_cards for b in ordered) - capacity_cards
    effective_at = max(now, guaranteed_starts_at)
    plan: list[HandBack] = []
    for burst in ordered:
        if excess <= 0:
            break
        take = min(burst.burst_cards, excess)
        if take <= 0:
            continue
        excess -= take
        plan.append(
            HandBack(
                burst.allocation_id,
                burst.cards_held,
                burst.cards_held - take,
                effective_at,
                effective_at - now,
            )
        )
    return plan
