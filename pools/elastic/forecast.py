"""Pre-scaling from traffic history: a time-of-week profile and the cards it asks for next.

Seed 004 §3.3: loading a model takes 30 s to minutes, so scale "predictively, half an hour
ahead, to the expected level from the historical traffic curve". Pure: no ORM, no clock; times
in Unix seconds, rates in whatever unit the caller measures demand in (output-equivalent
tokens/s from vLLM's token counters, or requests/s), per-card throughput in the same unit.

**The method.** The week is cut into slots of ``slot_s`` (default 15 min: 672 slots). For each
of the last ``weeks`` whole weeks, each slot's level is the mean of that week's samples in the
slot; the profile's level for a slot is the **median across weeks** of those means, and needs at
least ``min_weeks`` (default 3) weeks with data, else the slot is unknown and pre-scales nothing.

**Why the median.** A holiday (a low day) or a one-off spike (a launch, a load test) sits in
one week of the history. With three or more weeks, the median of a slot ignores any single
outlying week in either direction (its breakdown point is 50 %), so neither is learned as a
weekly peak; a mean would keep 1/N of the spike and a maximum all of it. The price: a real new
pattern shows only once it is in more than half of the weeks; until then the reactive rules of
:mod:`pools.elastic.policy` cover it. Slots are in UTC weeks starting Monday 00:00; the shift of
a daylight-saving change moves a local-time peak by one slot-hour until the history has more
weeks after the change than before it. A plain median needs no forecasting library; a seasonal
model (Holt-Winters, Prophet) would fit trends too, but also learns a spike in proportion.

**Pre-scale level.** At ``now`` the allocation must already hold what the next ``lead_s``
(default 1800 s) needs: the highest profile level of the slots overlapping
``[now, now + lead_s]``, converted to cards as ``ceil(level x headroom / per-card rate)``,
rounded up to whole replicas. The per-card rate is the sizing engine's modelled throughput for
the allocation's model and GPU (``pools.sizing.plan.PlanRow.per_card_equivalent_tok_s``), taken
here as an input.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

WEEK_S = 7 * 86_400
MONDAY_EPOCH_S = 4 * 86_400  # 1970-01-05T00:00Z, the first Monday after the Unix epoch
SEED_LEAD_S = 30 * 60  # seed 004 §3.3: "提前半小时"


@dataclass(frozen=True)
class WeeklyProfile:
    """``levels[i]`` is the median across weeks of slot ``i``'s level (``None``: fewer than
    ``min_weeks`` weeks had data); slot 0 starts Monday 00:00 UTC. ``weeks_seen[i]``: how
    many weeks contributed to slot ``i``."""

    slot_s: int
    levels: tuple[float | None, ...]
    weeks_seen: tuple[int, ...]

    def slot_of(self, at: float) -> int:
        return int(((at - MONDAY_EPOCH_S) % WEEK_S) // self.slot_s)

    def level_at(self, at: float) -> float | None:
        return self.levels[self.slot_of(at)]


def build_profile(
    samples: Iterable[tuple[float, float | None]],
    *,
    now: float,
    weeks: int = 4,
    slot_s: int = 900,
    min_weeks: int = 3,
) -> WeeklyProfile:
    """The profile from ``(unix s, rate)`` samples of the ``weeks`` weeks before ``now``
    (samples outside ``[now - weeks x 7 d, now)`` and ``None`` rates are ignored)."""
    if slot_s <= 0 or WEEK_S % slot_s:
        raise ValueError(f"slot_s must divide a week ({WEEK_S} s), got {slot_s!r}")
    if weeks < 1 or not 1 <= min_weeks <= weeks:
        raise ValueError("need weeks >= 1 and 1 <= min_weeks <= weeks")
    start = now - weeks * WEEK_S
    sums: dict[tuple[int, int], float] = defaultdict(float)
    counts: dict[tuple[int, int], int] = defaultdict(int)
    for at, rate in samples:
        if rate is None or not start <= at < now or not math.isfinite(rate):
            continue
        week = int((at - start) // WEEK_S)
        slot = int(((at - MONDAY_EPOCH_S) % WEEK_S) // slot_s)
        sums[(week, slot)] += rate
        counts[(week, slot)] += 1
    per_slot: dict[int, list[float]] = defaultdict(list)
    for key, total in sums.items():
        per_slot[key[1]].append(total / counts[key])
    slots = WEEK_S // slot_s
    levels: list[float | None] = []
    seen: list[int] = []
    for slot in range(slots):
        values = per_slot.get(slot, [])
        seen.append(len(values))
        levels.append(statistics.median(values) if len(values) >= min_weeks else None)
    return WeeklyProfile(slot_s=slot_s, levels=tuple(levels), weeks_seen=tuple(seen))


@dataclass(frozen=True)
class Prescale:
    """What the next ``lead_s`` needs: ``expected_rate`` (the highest known level of the slots
    overlapping ``[start, end]``, at ``peak_at``, the start of that slot) and ``cards``
    (``None`` when every slot in the window is unknown)."""

    start: float
    end: float
    expected_rate: float | None
    peak_at: float | None
    cards: int | None
    per_card_rate: float


def cards_for(
    rate: float, *, per_card_rate: float, cards_per_replica: int = 1, headroom: float = 1.0
) -> int:
    """``ceil(rate x headroom / per_card_rate)`` cards, rounded up to whole replicas."""
    if not per_card_rate > 0:
        raise ValueError(f"per_card_rate must be > 0, got {per_card_rate!r}")
    if cards_per_replica < 1 or not headroom > 0:
        raise ValueError("cards_per_replica must be >= 1 and headroom > 0")
    # Rates come from floating-point rate() sums: 1000.0000001 tok/s over 250 tok/s per card
    # is 4 cards, not 5 (a relative tolerance of 1e-9 is far below any real difference).
    raw = rate * headroom / per_card_rate
    cards = math.ceil(raw - 1e-9 * max(1.0, raw))
    replicas = -(-max(cards, 0) // cards_per_replica)
    return replicas * cards_per_replica


def prescale(
    profile: WeeklyProfile,
    *,
    now: float,
    per_card_rate: float,
    lead_s: int = SEED_LEAD_S,
    cards_per_replica: int = 1,
    headroom: float = 1.0,
) -> Prescale:
    """The level the allocation must hold at ``now`` so the next ``lead_s`` is covered."""
    end = now + lead_s
    slot_start = now - ((now - MONDAY_EPOCH_S) % profile.slot_s)
    best: float | None = None
    best_at: float | None = None
    at = slot_start
    while at <= end:
        level = profile.level_at(at)
        if level is not None and (best is None or level > best):
            best, best_at = level, at
        at += profile.slot_s
    cards = (
        None
        if best is None
        else cards_for(
            best,
            per_card_rate=per_card_rate,
            cards_per_replica=cards_per_replica,
            headroom=headroom,
        )
    )
    return Prescale(now, end, best, best_at, cards, per_card_rate)


def plan_ahead(
    profile: WeeklyProfile, *, now: float, hours: float = 2.0
) -> list[tuple[float, float | None]]:
    """The profile's levels for the slots from the one holding ``now`` to ``hours`` ahead, as
    ``(slot start, level)``: what an hourly forecast stores for the minute loop to read."""
    first = now - ((now - MONDAY_EPOCH_S) % profile.slot_s)
    count = int(math.ceil(hours * 3600 / profile.slot_s)) + 1
    return [
        (first + i * profile.slot_s, profile.level_at(first + i * profile.slot_s))
        for i in range(count)
    ]


def prescale_from_plan(
    plan: list[tuple[float, float | None]],
    *,
    now: float,
    per_card_rate: float,
    slot_s: int = 900,
    lead_s: int = SEED_LEAD_S,
    cards_per_replica: int = 1,
) -> Prescale:
    """:func:`prescale` from a stored :func:`plan_ahead`: the highest known level of the slots
    overlapping ``[now, now + lead_s]``; ``cards`` is ``None`` when none is known (a plan that
    does not reach that far pre-scales nothing)."""
    end = now + lead_s
    best: float | None = None
    best_at: float | None = None
    for start, level in plan:
        if start + slot_s <= now or start > end or level is None:
            continue
        if best is None or level > best:
            best, best_at = level, start
    cards = (
        None
        if best is None
        else cards_for(best, per_card_rate=per_card_rate, cards_per_replica=cards_per_replica)
    )
    return Prescale(now, end, best, best_at, cards, per_card_rate)
