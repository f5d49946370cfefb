"""What-if replay: totals worked out by hand on a three-hour history."""

from __future__ import annotations

import math
import random

import pytest

from pools.elastic.policy import Action, MetricSample, ScalingPolicy, evaluate
from pools.elastic.whatif import replay

T0 = 1_800_000_000.0
POLICY = ScalingPolicy(floor_cards=2, ceiling_cards=6, step_cards=2, cards_per_replica=2)


def minute_samples(spec):
    """``spec(minute) -> (util, latency)`` for minutes 0..180 inclusive, one sample a minute."""
    return [MetricSample(T0 + 60 * m, *spec(m)) for m in range(181)]


def three_hours(m):
    if m < 30:
        return 50.0, 300.0
    if m < 60:
        return 90.0, 1200.0
    return 10.0, 100.0


def test_hand_worked_totals():
    # minute 35: up 2->4 (both high since 30: 300 s); cooldown to 50; minute 50: up 4->6
    # (held since the last change: 900 s); minute 55: at the ceiling (and in cooldown).
    # low from 60: minute 90 down 6->4 (1800 s), minute 120 down 4->2 (1800 s since 90),
    # minute 150 at the floor. Card-minutes: 2x35 + 4x15 + 6x40 + 4x30 + 2x60 = 610.
    result = replay(POLICY, minute_samples(three_hours))
    assert (result.scale_ups, result.scale_downs) == (2, 2)
    assert (result.min_cards, result.max_cards) == (2, 6)
    assert [(e.action, e.at - T0, e.cards_to) for e in result.events] == [
        (Action.UP, 35 * 60, 4),
        (Action.UP, 50 * 60, 6),
        (Action.DOWN, 90 * 60, 4),
        (Action.DOWN, 120 * 60, 2),
    ]
    assert result.card_hours == pytest.approx(610 / 60)
    assert result.counted_hours == 3.0
    assert (result.fixed_cards, result.fixed_card_hours) == (6, 18.0)  # 6 cards x 3 h
    assert result.saved_card_hours == pytest.approx(18 - 610 / 60)  # 470 card-minutes
    assert result.breach_minutes == 30.0  # minutes 30..59 had 1200 ms > 800 ms
    assert result.unknown_minutes == 0.0
    assert result.timeline == (
        (T0, 2),
        (T0 + 35 * 60, 4),
        (T0 + 50 * 60, 6),
        (T0 + 90 * 60, 4),
        (T0 + 120 * 60, 2),
    )


def test_unknown_stretch_scales_nothing_and_is_counted():
    # utilisation missing from minute 30 to 59: no scale-up, 30 unknown minutes
    result = replay(
        POLICY,
        minute_samples(lambda m: (None, None) if 30 <= m < 60 else (50.0, 300.0)),
    )
    assert (result.scale_ups, result.scale_downs, result.unknown_minutes) == (0, 0, 30.0)
    assert result.card_hours == pytest.approx(2 * 3)


def test_a_hole_in_the_history_counts_only_max_gap():
    samples = minute_samples(lambda m: (50.0, 300.0))
    holed = [s for s in samples if not 60 < (s.at - T0) / 60 < 120]  # 60 -> 120: 3600 s gap
    result = replay(POLICY, holed)
    # 180 minutes less the 59 missing minutes' time beyond the 120 s cap: 3 h - 3480 s
    assert result.counted_hours == pytest.approx((180 * 60 - 3600 + 120) / 3600)


def test_fixed_cards_given():
    result = replay(POLICY, minute_samples(three_hours), fixed_cards=8)
    assert result.fixed_card_hours == 24.0


def test_prescale_in_the_replay():
    # the forecast asks for 6 cards from minute 10 on: one pre-scale up, then cooldown
    result = replay(
        POLICY,
        minute_samples(lambda m: (50.0, 300.0)),
        prescale=lambda at: 6 if at >= T0 + 600 else None,
    )
    assert [(e.reason, e.at - T0, e.cards_to) for e in result.events] == [("prescale", 600, 6)]


def test_replay_decides_as_the_live_loop_does():
    rng = random.Random(19)
    samples = []
    for m in range(1200):
        # a 4-hour wave with noise: peaks at ~95 % / ~1300 ms, troughs at ~5 %
        util = min(100.0, max(0.0, 50 + 45 * math.sin(2 * math.pi * m / 240) + rng.uniform(-5, 5)))
        latency = max(50.0, 20 * util - 600 + rng.uniform(-100, 100))
        if rng.random() < 0.02:
            continue  # a missed scrape
        samples.append(MetricSample(T0 + 60 * m, round(util, 1), round(latency)))
    result = replay(POLICY, samples)
    cards, last = POLICY.lower_bound_cards, None
    live = []
    for i, sample in enumerate(samples):
        decision = evaluate(
            POLICY, samples[: i + 1], cards_now=cards, now=sample.at, last_scaled_at=last
        )
        if decision.action is not Action.HOLD:
            cards, last = decision.cards_to, sample.at
            live.append((decision.at, decision.action, decision.cards_to))
    assert live == [(e.at, e.action, e.cards_to) for e in result.events]
    assert live, "the random walk should scale at least once"


def test_thirty_days_replay_in_under_three_seconds():
    import time

    samples = [
        MetricSample(T0 + 60 * m, 50 + 45 * math.sin(2 * math.pi * m / 1440), 900.0)
        for m in range(30 * 1440)
    ]
    started = time.perf_counter()
    result = replay(POLICY, samples)
    elapsed = time.perf_counter() - started
    assert result.counted_hours == pytest.approx(30 * 24 - 1 / 60)
    assert elapsed < 3.0, elapsed
