"""What-if: replay a scaling policy over a recorded metric history. Pure, no ORM, no clock.

"Over the last 30 days this policy would have scaled up N times and down M times, held
between A and B cards, spent X card-hours (Y fewer than a fixed allocation sized for the peak)
and breached the latency target for Z minutes." (issue #19)

How the replay counts (units: Unix seconds in, card-hours and minutes out):

- the policy decides at every sample, exactly as the live loop would (:func:`~pools.elastic.
  policy.decide` on the same signals, computed incrementally here: O(samples)), starting from
  ``cards_start`` (default the policy's lower bound) with no earlier scale event; a change
  takes effect at the sample that caused it;
- sample *i* stands for the interval up to sample *i + 1*; an interval longer than the
  policy's ``max_gap_s`` counts only ``max_gap_s`` (the rest is a hole in the history, not
  time the cards were seen), and the last sample closes the replay;
- **card-hours** = sum over intervals of cards held x interval length / 3600;
- the **fixed allocation** holds, for the same counted time, the most cards the replay ever
  held (the peak it needed), unless ``fixed_cards`` is given;
- **latency breach** = minutes of intervals whose *recorded* latency exceeded the policy's
  ``up_latency_ms``; **unknown** = minutes whose utilisation was missing. The history's
  latency was measured under the cards the team really held, not the replayed ones, so the
  breach minutes describe the traffic, not a modelled counterfactual.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pools.elastic.policy import (
    Action,
    Decision,
    MetricSample,
    ScalingPolicy,
    Signals,
    decide,
    down_condition,
    up_condition,
)


@dataclass(frozen=True)
class WhatIf:
    """The replay's totals, its scale events and its card timeline ``(unix s, cards)`` (one
    point at the start and one per change, for the chart)."""

    scale_ups: int
    scale_downs: int
    min_cards: int
    max_cards: int
    card_hours: float
    fixed_cards: int
    fixed_card_hours: float
    saved_card_hours: float
    breach_minutes: float
    unknown_minutes: float
    counted_hours: float
    events: tuple[Decision, ...]
    timeline: tuple[tuple[float, int], ...]


def replay(
    policy: ScalingPolicy,
    samples: Sequence[MetricSample],
    *,
    cards_start: int | None = None,
    fixed_cards: int | None = None,
    prescale: Callable[[float], int | None] | None = None,
) -> WhatIf:
    """Replay ``policy`` over ``samples`` (sorted by ``at``); see the module docstring.
    ``prescale(at)`` gives the forecast's pre-scale cards at ``at`` (``None``: none)."""
    cards = policy.lower_bound_cards if cards_start is None else cards_start
    lower = policy.lower_bound_cards
    last_scaled: float | None = None
    up_start: float | None = None
    down_start: float | None = None
    previous_at: float | None = None
    ups = downs = 0
    low = high = cards
    card_seconds = counted_s = breach_s = unknown_s = 0.0
    events: list[Decision] = []
    timeline: list[tuple[float, int]] = []
    for index, sample in enumerate(samples):
        at = sample.at
        if previous_at is not None and at - previous_at > policy.max_gap_s:
            up_start = down_start = None
        up_start = (
            (up_start if up_start is not None else at) if up_condition(policy, sample) else None
        )
        down_start = (
            (down_start if down_start is not None else at)
            if down_condition(policy, sample)
            else None
        )

        if not timeline:
            timeline.append((at, cards))
        up_held = _held(up_start, at, last_scaled)
        down_held = _held(down_start, at, last_scaled)
        wanted = prescale(at) if prescale is not None else None
        # Fast path: when no rule can move the cards (none met, or met at the ceiling / at
        # the lower bound) and they are within bounds, decide() would hold; skip building its
        # decision (most samples). test_replay_decides_as_the_live_
        # loop_does checks that this gives the live loop's events.
        if (
            lower <= cards <= policy.ceiling_cards
            and wanted is None
            and (
                sample.util_pct is None
                or (
                    (up_held < policy.up_window_s or cards >= policy.ceiling_cards)
                    and (down_held < policy.down_window_s or cards <= lower)
                )
            )
        ):
            decision = None
        else:
            signals = Signals(
                known=sample.util_pct is not None,
                util_pct=sample.util_pct,
                latency_ms=sample.latency_ms,
                sample_age_s=0.0,
                up_held_s=up_held,
                down_held_s=down_held,
            )
            decision = decide(
                policy,
                signals=signals,
                cards_now=cards,
                now=at,
                last_scaled_at=last_scaled,
                prescale_cards=wanted,
            )
        if decision is not None and decision.action is not Action.HOLD:
            ups += decision.action is Action.UP
            downs += decision.action is Action.DOWN
            cards = decision.cards_to
            last_scaled = at
            events.append(decision)
            timeline.append((at, cards))
            low, high = min(low, cards), max(high, cards)
        if index + 1 < len(samples):
            interval = min(samples[index + 1].at - at, float(policy.max_gap_s))
            counted_s += interval
            card_seconds += cards * interval
            if sample.latency_ms is not None and sample.latency_ms > policy.up_latency_ms:
                breach_s += interval
            if sample.util_pct is None:
                unknown_s += interval
        previous_at = at
    fixed = high if fixed_cards is None else fixed_cards
    fixed_card_hours = fixed * counted_s / 3600
    card_hours = card_seconds / 3600
    return WhatIf(
        scale_ups=ups,
        scale_downs=downs,
        min_cards=low,
        max_cards=high,
        card_hours=card_hours,
        fixed_cards=fixed,
        fixed_card_hours=fixed_card_hours,
        saved_card_hours=fixed_card_hours - card_hours,
        breach_minutes=breach_s / 60,
        unknown_minutes=unknown_s / 60,
        counted_hours=counted_s / 3600,
        events=tuple(events),
        timeline=tuple(timeline),
    )


def _held(start: float | None, at: float, last_scaled: float | None) -> float:
    """Seconds a run that began at ``start`` has held at ``at``, counted from the last change."""
    if start is None:
        return 0.0
    return max(0.0, at - (start if last_scaled is None else max(start, last_scaled)))
