"""Never two priorities on one card (issue 36): the cards a pool × GPU model needs when
workload classes are kept apart. Pure: plain data in, integers out.

The 004 seed article §3.2: "never let tasks of different priorities share one card, or one
fills the memory and the other dies of OOM"; 000 §5.4: important models get whole cards.
So at every instant the held cards are split by class, and each class gets cards of its own:

* an exclusive class needs one card per card held (no over-commit, no sharing);
* any other class (and the unclassed allocations, one group) shares its own cards at the pool's
  over-commit ratio ``r``: ``h`` held cards need the least ``k`` with ``floor(k × r) >= h``
  (:func:`pools.capacity.arithmetic.usable_cards` read backwards), i.e. ``ceil(h / r)``.

The pool × model has room at an instant when the sum over the groups is at most its schedulable
cards. With one unclassed group this is exactly the over-commit rule the approval always kept
(``h <= floor(S × r)``), so a fleet with no classes sees no change.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from datetime import datetime
from decimal import Decimal
from fractions import Fraction
from typing import NamedTuple


class ClassHold(NamedTuple):
    """A holding allocation: ``cards`` over ``[starts_at, ends_at)`` of class ``group`` (its
    id, ``None``: unclassed), ``exclusive`` when its class is."""

    starts_at: datetime
    ends_at: datetime
    cards: int
    group: Hashable
    exclusive: bool


def cards_for(held: int, *, exclusive: bool, overcommit_ratio: Decimal) -> int:
    """Physical cards that ``held`` cards of one class need on their own: ``held`` when the
    class is exclusive (or the ratio is at most 1), else ``ceil(held / ratio)``."""
    ratio = Fraction(str(overcommit_ratio))
    if exclusive or ratio <= 1:
        return held
    return math.ceil(Fraction(held) / ratio)


def cards_needed(
    held: Mapping[Hashable, int], exclusive: Iterable[Hashable], overcommit_ratio: Decimal
) -> int:
    """Cards needed at one instant for ``held`` cards by group, each group on cards of its own
    (:func:`cards_for`; ``exclusive``: the groups of exclusive classes)."""
    only_own = set(exclusive)
    return sum(
        cards_for(n, exclusive=g in only_own, overcommit_ratio=overcommit_ratio)
        for g, n in held.items()
    )


def peak_cards_needed(
    holds: Iterable[ClassHold], *, start: datetime, end: datetime, overcommit_ratio: Decimal
) -> int:
    """The most cards :func:`cards_needed` asks for at any instant of ``[start, end)``: a
    sweep over the holds' starts and ends (the need only changes there), ``O(n × g)`` for
    ``n`` holds of ``g`` groups."""
    rows = [h for h in holds if h.starts_at < end and h.ends_at > start]
    exclusive = {h.group for h in rows if h.exclusive}
    instants = sorted({start} | {h.starts_at for h in rows if h.starts_at > start})
    peak = 0
    for at in instants:
        held: dict[Hashable, int] = {}
        for h in rows:
            if h.starts_at <= at < h.ends_at:
                held[h.group] = held.get(h.group, 0) + h.cards
        peak = max(peak, cards_needed(held, exclusive, overcommit_ratio))
    return peak
