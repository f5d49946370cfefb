"""Time-of-week profile and pre-scaling, against a history with a known weekly shape."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pools.elastic.forecast import (
    MONDAY_EPOCH_S,
    WEEK_S,
    build_profile,
    cards_for,
    prescale,
)

HOUR = 3600
W0 = MONDAY_EPOCH_S + 2975 * WEEK_S  # a Monday 00:00 UTC
NOW = W0 + 4 * WEEK_S  # Monday 00:00 of the week after four weeks of history
PER_CARD = 250.0  # tok/s one card serves (the sizing engine's number, here given)


def shape(at: float) -> float:
    """Weekdays 09:00-12:00 UTC: 1000 tok/s; otherwise 100 tok/s. Week 1's Wednesday
    15:00-16:00 has a one-off spike of 10 000 tok/s; week 2's Monday is a holiday (10 tok/s)."""
    offset = at - W0
    week, in_week = divmod(offset, WEEK_S)
    day, in_day = divmod(in_week, 86_400)
    if week == 1 and day == 2 and 15 * HOUR <= in_day < 16 * HOUR:
        return 10_000.0
    if week == 2 and day == 0:
        return 10.0
    if day < 5 and 9 * HOUR <= in_day < 12 * HOUR:
        return 1000.0
    return 100.0


HISTORY = [(t, shape(t)) for t in range(int(W0), int(NOW), 300)]  # one sample every 5 min


def test_base_is_a_monday():
    assert datetime.fromtimestamp(W0, UTC).strftime("%a %H:%M") == "Mon 00:00"


@pytest.fixture(scope="module")
def profile():
    return build_profile(HISTORY, now=NOW, weeks=4)


def test_profile_learns_the_weekday_peak(profile):
    assert profile.level_at(NOW + 9 * HOUR) == 1000.0  # Monday 09:00 (holiday week outvoted)
    assert profile.level_at(NOW + 8 * HOUR + 45 * 60) == 100.0
    assert profile.weeks_seen[profile.slot_of(NOW + 9 * HOUR)] == 4


def test_one_off_spike_is_not_learned(profile):
    wednesday_15 = NOW + 2 * 86_400 + 15 * HOUR
    # slot means per week 100, 10000, 100, 100 -> median 100 (a mean would give 2575)
    assert profile.level_at(wednesday_15) == 100.0
    assert prescale(profile, now=wednesday_15 - 1800, per_card_rate=PER_CARD).cards == 1


def test_holiday_is_not_learned(profile):
    # Monday 10:00: 1000, 1000, 10, 1000 -> median 1000
    assert profile.level_at(NOW + 10 * HOUR) == 1000.0


def test_prescale_reaches_the_peak_level_thirty_minutes_before_it(profile):
    at_0830 = prescale(profile, now=NOW + 8 * HOUR + 30 * 60, per_card_rate=PER_CARD)
    assert at_0830.expected_rate == 1000.0
    assert at_0830.peak_at == NOW + 9 * HOUR
    assert at_0830.cards == 4  # 1000 / 250
    at_0829 = prescale(profile, now=NOW + 8 * HOUR + 29 * 60, per_card_rate=PER_CARD)
    assert (at_0829.expected_rate, at_0829.cards) == (100.0, 1)


def test_prescale_covers_the_peak_until_it_ends(profile):
    at_1145 = prescale(profile, now=NOW + 11 * HOUR + 45 * 60, per_card_rate=PER_CARD)
    assert at_1145.cards == 4
    after = prescale(profile, now=NOW + 12 * HOUR, per_card_rate=PER_CARD)
    assert after.cards == 1


def test_too_few_weeks_pre_scale_nothing():
    two_weeks = [(t, r) for t, r in HISTORY if t >= NOW - 2 * WEEK_S]
    thin = build_profile(two_weeks, now=NOW, weeks=4, min_weeks=3)
    assert thin.level_at(NOW + 9 * HOUR) is None
    assert prescale(thin, now=NOW + 8 * HOUR + 30 * 60, per_card_rate=PER_CARD).cards is None


def test_missing_samples_are_skipped():
    gappy = [(t, None if t % 600 == 0 else r) for t, r in HISTORY]
    assert build_profile(gappy, now=NOW).level_at(NOW + 9 * HOUR) == 1000.0


@pytest.mark.parametrize(
    "rate, per_replica, expected",
    [(1000.0000001, 1, 4), (1001.0, 1, 5), (1001.0, 2, 6), (0.0, 2, 0), (100.0, 4, 4)],
)
def test_cards_for(rate, per_replica, expected):
    assert cards_for(rate, per_card_rate=PER_CARD, cards_per_replica=per_replica) == expected


def test_bad_arguments():
    with pytest.raises(ValueError):
        build_profile([], now=NOW, slot_s=11)
    with pytest.raises(ValueError):
        cards_for(1.0, per_card_rate=0.0)


def test_a_stored_plan_gives_the_same_pre_scale(profile):
    from pools.elastic.forecast import plan_ahead, prescale_from_plan

    plan = plan_ahead(profile, now=NOW + 8 * HOUR, hours=2)
    assert plan[0] == (NOW + 8 * HOUR, 100.0) and plan[4] == (NOW + 9 * HOUR, 1000.0)
    for minute in (0, 29, 30, 45, 60):
        at = NOW + 8 * HOUR + minute * 60
        live = prescale(profile, now=at, per_card_rate=PER_CARD)
        stored = prescale_from_plan(plan, now=at, per_card_rate=PER_CARD)
        assert (stored.cards, stored.expected_rate) == (live.cards, live.expected_rate), minute
    # beyond the plan: nothing known, nothing pre-scaled
    assert prescale_from_plan(plan, now=NOW + 20 * HOUR, per_card_rate=PER_CARD).cards is None
