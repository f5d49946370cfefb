"""The scaling decision (seed 004 §3.3 rules), with numbers worked out by hand."""

from __future__ import annotations

import pytest

from pools.elastic.policy import (
    Action,
    MetricSample,
    PolicyError,
    Reason,
    ScalingPolicy,
    evaluate,
    signals_at,
)

NOW = 1_800_000_000.0
POLICY = ScalingPolicy(floor_cards=2, ceiling_cards=8, step_cards=2, cards_per_replica=2)


def series(minutes: int, util, latency, *, end: float = NOW) -> list[MetricSample]:
    """One sample a minute from ``end - minutes`` to ``end`` inclusive (minutes + 1 samples);
    ``util``/``latency`` are constants or functions of the minute before ``end``."""
    out = []
    for back in range(minutes, -1, -1):
        u = util(back) if callable(util) else util
        lat = latency(back) if callable(latency) else latency
        out.append(MetricSample(end - 60 * back, u, lat))
    return out


def test_seed_defaults():
    policy = ScalingPolicy(floor_cards=1, ceiling_cards=4)
    assert (policy.up_util_pct, policy.up_latency_ms, policy.up_window_s) == (75.0, 800.0, 300)
    assert (policy.down_util_pct, policy.down_window_s, policy.cooldown_s) == (30.0, 1800, 900)
    assert policy.min_replicas == 1


def test_high_utilisation_with_low_latency_holds():
    decision = evaluate(POLICY, series(10, 90.0, 300.0), cards_now=4, now=NOW)
    assert decision.action is Action.HOLD
    assert decision.reason is Reason.STEADY
    assert decision.cards_to == 4
    assert decision.up_held_s == 0
    assert "both must hold" in decision.message


def test_both_high_for_five_minutes_scales_up_by_the_step():
    # high from 5 minutes ago (samples at -300 ... 0 s): held exactly 300 s; before that 50 %.
    samples = series(10, lambda m: 90.0 if m <= 5 else 50.0, 1200.0)
    decision = evaluate(POLICY, samples, cards_now=4, now=NOW)
    assert decision.action is Action.UP
    assert decision.reason is Reason.SCALE_UP
    assert (decision.cards_from, decision.cards_to) == (4, 6)  # + step of 2
    assert decision.up_held_s == 300
    assert decision.numbers()["util_pct"] == 90.0
    assert decision.numbers()["latency_ms"] == 1200.0


def test_both_high_for_four_minutes_is_not_yet():
    samples = series(10, lambda m: 90.0 if m <= 4 else 50.0, 1200.0)
    decision = evaluate(POLICY, samples, cards_now=4, now=NOW)
    assert (decision.action, decision.reason, decision.up_held_s) == (
        Action.HOLD,
        Reason.STEADY,
        240,
    )


def test_latency_dipping_once_breaks_the_run():
    # latency 700 ms two minutes ago: the run of both-high starts one minute ago (60 s).
    samples = series(10, 90.0, lambda m: 700.0 if m == 2 else 1200.0)
    decision = evaluate(POLICY, samples, cards_now=4, now=NOW)
    assert decision.action is Action.HOLD
    assert decision.up_held_s == 60


def test_up_stops_at_the_ceiling():
    samples = series(10, 90.0, 1200.0)
    assert evaluate(POLICY, samples, cards_now=7, now=NOW).cards_to == 8  # min(7 + 2, 8)
    at_ceiling = evaluate(POLICY, samples, cards_now=8, now=NOW)
    assert (at_ceiling.action, at_ceiling.reason) == (Action.HOLD, Reason.AT_CEILING)


def test_cooldown_is_respected():
    samples = series(20, 90.0, 1200.0)
    # scaled 10 minutes ago: the condition has held 600 s since, but 300 s of cooldown remain
    decision = evaluate(POLICY, samples, cards_now=4, now=NOW, last_scaled_at=NOW - 600)
    assert (decision.action, decision.reason) == (Action.HOLD, Reason.COOLDOWN)
    assert decision.cooldown_left_s == 300
    assert decision.up_held_s == 600
    # 15 minutes after: cooldown over and 900 s held since the last change
    later = evaluate(POLICY, samples, cards_now=4, now=NOW, last_scaled_at=NOW - 900)
    assert (later.action, later.cards_to, later.cooldown_left_s) == (Action.UP, 6, 0)


def test_run_counts_only_since_the_last_scale_event():
    # low for 40 minutes, but scaled down 20 minutes ago: held 1200 s < 1800 s
    samples = series(40, 10.0, 100.0)
    decision = evaluate(POLICY, samples, cards_now=6, now=NOW, last_scaled_at=NOW - 1200)
    assert (decision.action, decision.down_held_s) == (Action.HOLD, 1200)


def test_low_for_thirty_minutes_goes_down_to_the_floor_never_below():
    policy = ScalingPolicy(floor_cards=4, ceiling_cards=8, step_cards=2, cards_per_replica=2)
    samples = series(30, 10.0, 100.0)  # 31 samples, -1800 s ... 0 s: held 1800 s
    decision = evaluate(policy, samples, cards_now=8, now=NOW)
    assert (decision.action, decision.cards_to, decision.down_held_s) == (
        Action.DOWN,
        6,
        1800,
    )
    # at 6 the step would give 4 = the floor; at 4 nothing moves
    assert evaluate(policy, samples, cards_now=6, now=NOW).cards_to == 4
    at_floor = evaluate(policy, samples, cards_now=4, now=NOW)
    assert (at_floor.action, at_floor.reason, at_floor.cards_to) == (
        Action.HOLD,
        Reason.AT_FLOOR,
        4,
    )


def test_down_step_never_crosses_the_floor():
    policy = ScalingPolicy(floor_cards=5, ceiling_cards=8, step_cards=2)
    decision = evaluate(policy, series(30, 10.0, 100.0), cards_now=6, now=NOW)
    assert decision.cards_to == 5  # max(5, 6 - 2)


def test_low_for_29_minutes_is_not_yet():
    samples = series(40, lambda m: 10.0 if m <= 29 else 50.0, 100.0)
    decision = evaluate(POLICY, samples, cards_now=6, now=NOW)
    assert (decision.action, decision.down_held_s) == (Action.HOLD, 1740)


def test_min_replicas_keeps_cards_when_the_floor_is_zero():
    policy = ScalingPolicy(
        floor_cards=0, ceiling_cards=8, step_cards=2, cards_per_replica=2, min_replicas=1
    )
    assert policy.lower_bound_cards == 2
    decision = evaluate(policy, series(30, 0.0, None), cards_now=2, now=NOW)
    assert (decision.action, decision.reason) == (Action.HOLD, Reason.AT_FLOOR)


@pytest.mark.parametrize(
    "samples, why",
    [
        ([], "no samples"),
        (series(30, 10.0, 100.0, end=NOW - 240), "newest sample 240 s old (> 180 s)"),
        (series(30, lambda m: None if m == 0 else 90.0, 1200.0), "newest utilisation missing"),
    ],
)
def test_unknown_metrics_hold(samples, why):
    decision = evaluate(POLICY, samples, cards_now=4, now=NOW)
    assert (decision.action, decision.reason, decision.cards_to) == (
        Action.HOLD,
        Reason.UNKNOWN,
        4,
    ), why


def test_missing_latency_never_scales_up():
    decision = evaluate(POLICY, series(10, 95.0, None), cards_now=4, now=NOW)
    assert (decision.action, decision.up_held_s) == (Action.HOLD, 0)


def test_a_gap_breaks_the_run():
    # low for 31 minutes, but the samples at -16 and -15 min are missing: 180 s gap > 120 s
    samples = [s for s in series(31, 10.0, 100.0) if s.at not in (NOW - 960, NOW - 900)]
    signals = signals_at(POLICY, samples, now=NOW)
    assert signals.down_held_s == 840  # from -14 min
    assert evaluate(POLICY, samples, cards_now=6, now=NOW).action is Action.HOLD


def test_a_missing_value_inside_the_window_breaks_the_run():
    samples = series(31, lambda m: None if m == 10 else 10.0, 100.0)
    assert signals_at(POLICY, samples, now=NOW).down_held_s == 540


def test_prescale_raises_to_whole_replicas_and_blocks_scale_down():
    steady = series(10, 50.0, 300.0)
    decision = evaluate(POLICY, steady, cards_now=2, now=NOW, prescale_cards=5)
    assert (decision.action, decision.reason, decision.cards_to) == (
        Action.UP,
        Reason.PRESCALE,
        6,  # 5 cards rounded up to whole replicas of 2
    )
    low = series(30, 10.0, 100.0)
    held = evaluate(POLICY, low, cards_now=6, now=NOW, prescale_cards=6)
    assert (held.action, held.reason) == (Action.HOLD, Reason.AT_FLOOR)
    capped = evaluate(POLICY, steady, cards_now=2, now=NOW, prescale_cards=20)
    assert capped.cards_to == 8


def test_policy_edited_below_the_cards_held_is_obeyed_at_once():
    policy = ScalingPolicy(floor_cards=2, ceiling_cards=4, step_cards=2, cards_per_replica=2)
    decision = evaluate(policy, [], cards_now=6, now=NOW, last_scaled_at=NOW - 60)
    assert (decision.action, decision.reason, decision.cards_to) == (
        Action.DOWN,
        Reason.ABOVE_CEILING,
        4,
    )


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"floor_cards": 4, "ceiling_cards": 2}, "ceiling_cards"),
        ({"floor_cards": 1, "ceiling_cards": 4, "cooldown_s": 300}, "cooldown_s"),
        ({"floor_cards": 1, "ceiling_cards": 4, "min_replicas": 0}, "min_replicas"),
        (
            {"floor_cards": 1, "ceiling_cards": 4, "cards_per_replica": 2, "step_cards": 3},
            "step_cards",
        ),
        (
            {"floor_cards": 0, "ceiling_cards": 2, "cards_per_replica": 2, "min_replicas": 2},
            "min_replicas",
        ),
        ({"floor_cards": 1, "ceiling_cards": 4, "down_util_pct": 80.0}, "down_util_pct"),
        ({"floor_cards": 1.5, "ceiling_cards": 4}, "floor_cards"),
    ],
)
def test_contradictory_policies_are_refused(fields, field):
    with pytest.raises(PolicyError) as caught:
        ScalingPolicy(**fields)
    assert caught.value.field == field
