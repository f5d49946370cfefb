"""Upgrade waves (issue 32 item 2), pure: take a driver group's nodes out in successive
maintenance windows so that no approved allocation loses its cards.

The waves are slots of ``length`` every ``length + gap`` from ``first_start``; slot *i* is
``[first_start + i·(length + gap), … + length)``. The rule, greedy and in host-name order:
for each slot, each node not yet planned joins the slot's wave when

1. no allocation with cards *placed* on that node (its shape named the node) overlaps the
   slot — taking the node away would take exactly those cards; and
2. for every pool × GPU model the node has schedulable cards of, the cards left once the
   wave's nodes are away still cover what is held there in the slot: the peak of the
   holding intervals (allocations, recurring occurrences, other maintenance windows) over the
   slot is at most ``floor((schedulable − away) × over-commit ratio)`` — the card invariant
   the approval keeps (:func:`pools.capacity.arithmetic.usable_cards`), so the unplaced
   allocations ("any N cards") still find theirs. The same for every pool × model × MIG
   profile the node has slices of, in slices at ratio 1 (slices are never placed: a slice
   allocation holds "any N slices of the profile", and the slice approval counts them
   without over-commit, :func:`pools.capacity.availability.pool_free_slices`); a key is any
   hashable, the caller's (:func:`pools.maintenance.selectors.maintenance_wave_plan`);

until the wave has ``per_wave`` nodes. A slot where no node can go is skipped (no window is
made for it). Planning stops when every node is in a wave, or after ``max_slots`` slots: then
there is no plan, and :attr:`WavePlan.reason` says which nodes could not go and why (placed
cards on them in every slot tried, or the pool short of cards or slices for what it holds).

Greedy is not optimal (an earlier node taken in a slot can keep a later one out of it), but
every wave it returns keeps both rules, which is what the property test checks.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from pools.capacity.arithmetic import peak_cards

Interval = tuple[datetime, datetime, int]


@dataclass(frozen=True)
class WaveNode:
    """A node to upgrade: ``cards`` its schedulable cards by pool × model key (and its MIG
    slices by pool × model × profile key)."""

    hostname: str
    cards: Mapping[Hashable, int]


@dataclass(frozen=True)
class KeyCapacity:
    """A pool × model: its schedulable cards, over-commit ratio and holding intervals (a pool ×
    model × profile: its slices, ratio 1 and the intervals held in slices)."""

    schedulable: int
    ratio: Decimal
    intervals: Sequence[Interval]


@dataclass(frozen=True)
class Wave:
    number: int  # from 1
    starts_at: datetime
    ends_at: datetime
    hostnames: tuple[str, ...]


@dataclass
class WavePlan:
    waves: list[Wave] = field(default_factory=list)
    unplanned: tuple[str, ...] = ()
    reason: str | None = None  # why there is no plan; None when every node is in a wave

    @property
    def complete(self) -> bool:
        return not self.unplanned


def _overlaps(s: datetime, e: datetime, start: datetime, end: datetime) -> bool:
    return s < end and start < e


def node_blocked(
    hostname: str, placed: Sequence[tuple[str, datetime, datetime]], start, end
) -> bool:
    """Rule 1: an allocation placed on ``hostname`` overlaps ``[start, end)``."""
    return any(h == hostname and _overlaps(s, e, start, end) for h, s, e in placed)


def counts_hold(
    away: Mapping[Hashable, int], capacity: Mapping[Hashable, KeyCapacity], start, end
) -> bool:
    """Rule 2: with ``away`` cards gone by key, each key's peak held in ``[start, end)`` is at
    most ``floor((schedulable − away) × ratio)``."""
    for key, gone in away.items():
        cap = capacity.get(key)
        if cap is None or not gone:
            continue
        left = math.floor(max(cap.schedulable - gone, 0) * cap.ratio)
        if peak_cards(cap.intervals, start, end) > left:
            return False
    return True


def plan_waves(
    *,
    nodes: Sequence[WaveNode],
    placed: Sequence[tuple[str, datetime, datetime]],
    capacity: Mapping[Hashable, KeyCapacity],
    first_start: datetime,
    length: timedelta,
    gap: timedelta,
    per_wave: int,
    max_slots: int,
) -> WavePlan:
    """See the module docstring. ``placed``: ``(hostname, starts_at, ends_at)`` of each
    allocation's placed cards; ``capacity`` by the same keys as :attr:`WaveNode.cards`."""
    if per_wave < 1 or max_slots < 1 or length <= timedelta(0) or gap < timedelta(0):
        raise ValueError("per_wave, max_slots and length must be positive, gap not negative")
    remaining = sorted(nodes, key=lambda n: n.hostname)
    plan = WavePlan()
    for slot in range(max_slots):
        if not remaining:
            break
        start = first_start + slot * (length + gap)
        end = start + length
        taken: list[WaveNode] = []
        away: dict[Hashable, int] = {}
        for node in remaining:
            if len(taken) == per_wave:
                break
            if node_blocked(node.hostname, placed, start, end):
                continue
            trial = dict(away)
            for key, n in node.cards.items():
                trial[key] = trial.get(key, 0) + n
            if counts_hold(trial, capacity, start, end):
                taken.append(node)
                away = trial
        if taken:
            hosts = tuple(n.hostname for n in taken)
            plan.waves.append(Wave(len(plan.waves) + 1, start, end, hosts))
            remaining = [n for n in remaining if n.hostname not in hosts]
    if remaining:
        plan.unplanned = tuple(n.hostname for n in remaining)
        plan.reason = _why_not(remaining, placed, capacity, first_start, length, gap, max_slots)
    return plan


def _why_not(remaining, placed, capacity, first_start, length, gap, max_slots) -> str:
    slots = [first_start + i * (length + gap) for i in range(max_slots)]
    pinned = [
        n.hostname
        for n in remaining
        if all(node_blocked(n.hostname, placed, s, s + length) for s in slots)
    ]
    short = [n.hostname for n in remaining if n.hostname not in pinned]
    parts = []
    if pinned:
        parts.append(f"allocations have cards placed on {', '.join(pinned)} in every slot")
    if short:
        parts.append(
            f"taking {', '.join(short)} away would leave fewer cards or MIG slices than are held"
        )
    return (
        f"No wave plan within {max_slots} slot(s): {len(remaining)} node(s) could not go "
        f"without an approved allocation losing cards ({'; '.join(parts)})."
    )
