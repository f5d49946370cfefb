"""pools.capacity: peak concurrent cards over half-open windows, usable and free cards.

Every expected value is worked out by hand in the comment beside it; the property test checks
the sweep line against a minute-by-minute count.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pools.capacity.arithmetic import (
    free_cards,
    overlaps_any,
    peak_cards,
    spans_over,
    usable_cards,
)

MON = datetime(2026, 3, 2, tzinfo=UTC)  # a Monday, 00:00 UTC


def at(hours: float) -> datetime:
    return MON + timedelta(hours=hours)


def test_an_allocation_ending_at_noon_does_not_compete_with_one_starting_at_noon():
    morning = (at(8), at(12), 5)
    afternoon = (at(12), at(16), 4)

    # [08, 12) holds 5 and [12, 16) holds 4; they never overlap, so the peak is 5, not 9.
    assert peak_cards([morning, afternoon], at(8), at(16)) == 5
    assert peak_cards([afternoon, morning], at(8), at(16)) == 5  # order of input is irrelevant
    assert (
        free_cards(
            schedulable=8,
            overcommit_ratio=Decimal("1.00"),
            intervals=[morning, afternoon],
            start=at(8),
            end=at(16),
        )
        == 3
    )  # 8 - 5


def test_a_window_touching_an_allocation_at_either_end_does_not_overlap_it():
    held = (at(8), at(12), 6)

    assert peak_cards([held], at(12), at(18)) == 0  # the allocation ended as the window opens
    assert peak_cards([held], at(2), at(8)) == 0  # the window closes as the allocation starts
    assert peak_cards([held], at(11.99), at(18)) == 6  # one overlapping instant is enough


def test_a_request_for_next_week_does_not_compete_with_one_ending_tomorrow():
    today = at(9)
    ends_tomorrow = (today - timedelta(days=3), today + timedelta(days=1), 8)
    next_week = (today + timedelta(days=7), today + timedelta(days=14))

    assert peak_cards([ends_tomorrow], *next_week) == 0
    assert (
        free_cards(
            schedulable=8,
            overcommit_ratio=Decimal("1.00"),
            intervals=[ends_tomorrow],
            start=next_week[0],
            end=next_week[1],
        )
        == 8
    )
    # ... while a request for this week does compete: all 8 cards are held until tomorrow.
    assert (
        free_cards(
            schedulable=8,
            overcommit_ratio=Decimal("1.00"),
            intervals=[ends_tomorrow],
            start=today,
            end=today + timedelta(days=7),
        )
        == 0
    )


NESTED = [
    (at(0), at(10), 2),  # outer
    (at(2), at(8), 3),  # middle
    (at(4), at(6), 1),  # inner
]


@pytest.mark.parametrize(
    ("start", "end", "peak"),
    [
        (0, 10, 6),  # [4, 6): 2 + 3 + 1
        (0, 4, 5),  # [2, 4): 2 + 3; the inner one starts as the window ends
        (6, 10, 5),  # [6, 8): 2 + 3; the inner one ended as the window opens
        (8, 10, 2),  # only the outer one is left
        (4.5, 5.5, 6),  # a window inside the innermost interval
        (10, 12, 0),  # after everything
    ],
)
def test_peak_of_nested_intervals(start, end, peak):
    assert peak_cards(NESTED, at(start), at(end)) == peak


# Cards held, by hour:  [0,2) 3 | [2,4) 5 | [4,5) 2 | [5,6) 6 | [6,8) 4 | [8,9) 5 | [9,12) 1
STAGGERED = [
    (at(0), at(4), 3),
    (at(2), at(6), 2),
    (at(5), at(9), 4),
    (at(8), at(12), 1),
]


@pytest.mark.parametrize(
    ("start", "end", "peak"),
    [
        (0, 12, 6),
        (0, 5, 5),
        (4, 5, 2),
        (6, 12, 5),
        (6, 8, 4),
        (9, 12, 1),
        (12, 13, 0),
    ],
)
def test_peak_of_staggered_intervals(start, end, peak):
    assert peak_cards(STAGGERED, at(start), at(end)) == peak


def test_peak_of_no_allocations_and_of_zero_card_rows_is_zero():
    assert peak_cards([], at(0), at(1)) == 0
    assert peak_cards([(at(0), at(1), 0)], at(0), at(1)) == 0


@pytest.mark.parametrize(
    ("schedulable", "ratio", "usable"),
    [
        (8, "1.00", 8),
        (8, "1.50", 12),  # floor(8 x 1.5) = 12
        (7, "1.50", 10),  # floor(10.5) = 10: never round a card up
        (20, "1.15", 23),  # 23.0 exactly in Decimal (a float would give 22.999...)
        (3, "0.50", 1),  # floor(1.5)
        (0, "2.00", 0),
    ],
)
def test_usable_cards_is_floor_of_schedulable_times_over_commit(schedulable, ratio, usable):
    assert usable_cards(schedulable, Decimal(ratio)) == usable


def test_a_float_ratio_counts_as_the_decimal_it_was_written_as():
    # An unsaved Pool(overcommit_ratio=1.15) holds a float; 20 x 1.15 is 23, not floor(22.99...).
    assert usable_cards(20, 1.15) == 23
    assert usable_cards(10, 0.7) == 7


def test_over_commit_raises_what_can_still_be_promised():
    held = [(at(0), at(24), 10)]

    # floor(8 x 1.5) = 12 usable, 10 held: 2 free.
    assert (
        free_cards(
            schedulable=8, overcommit_ratio=Decimal("1.5"), intervals=held, start=at(0), end=at(1)
        )
        == 2
    )


def test_free_cards_is_never_negative():
    # 6 cards were promised when the pool had 8; a node went down and 4 are schedulable now.
    held = [(at(0), at(24), 6)]

    assert (
        free_cards(
            schedulable=4, overcommit_ratio=Decimal("1.00"), intervals=held, start=at(0), end=at(1)
        )
        == 0
    )


# --- property: the sweep line agrees with counting every minute ------------------------------

interval = st.tuples(
    st.integers(min_value=0, max_value=59),
    st.integers(min_value=1, max_value=30),
    st.integers(min_value=0, max_value=5),
).map(lambda t: (t[0], t[0] + t[1], t[2]))


def brute_force_peak(intervals: list[tuple[int, int, int]], start: int, end: int) -> int:
    """Cards held at each whole minute of ``[start, end)``; the largest. With integer-minute
    endpoints and half-open intervals, a minute's start represents the whole minute."""
    return max(
        (sum(c for s, e, c in intervals if s <= minute < e) for minute in range(start, end)),
        default=0,
    )


def minutes(m: int) -> datetime:
    return MON + timedelta(minutes=m)


@given(
    intervals=st.lists(interval, max_size=8),
    window=st.tuples(st.integers(0, 90), st.integers(1, 40)),
    schedulable=st.integers(0, 16),
    ratio=st.sampled_from(["0.50", "1.00", "1.25", "1.50", "2.00"]),
)
def test_peak_and_free_cards_match_a_minute_by_minute_count(intervals, window, schedulable, ratio):
    start, end = window[0], window[0] + window[1]
    as_datetimes = [(minutes(s), minutes(e), c) for s, e, c in intervals]
    expected = brute_force_peak(intervals, start, end)

    assert peak_cards(as_datetimes, minutes(start), minutes(end)) == expected
    assert free_cards(
        schedulable=schedulable,
        overcommit_ratio=Decimal(ratio),
        intervals=as_datetimes,
        start=minutes(start),
        end=minutes(end),
    ) == max(0, int(schedulable * Decimal(ratio)) - expected)


def test_card_hours_count_real_elapsed_time_across_a_clock_change():
    # 2 cards from 00:30 to 03:30 New York on 2026-11-01: the clocks fall back at 02:00, so
    # 4 real hours pass (00:30 EDT = 04:30Z, 03:30 EST = 08:30Z): 2 × 4 = 8 card-hours.
    from zoneinfo import ZoneInfo

    from pools.capacity.arithmetic import card_hours, card_seconds_hours

    ny = ZoneInfo("America/New_York")
    start = datetime(2026, 11, 1, 0, 30, tzinfo=ny)
    end = datetime(2026, 11, 1, 3, 30, tzinfo=ny)
    assert card_hours(2, start, end) == Decimal(8)
    assert card_hours(2, end, start) == Decimal(0)
    assert card_seconds_hours(9000) == Decimal("2.5")


def test_the_stretches_over_a_limit_of_two_overlapping_holds_are_where_both_run():
    # 3 cards [08, 12) and 2 cards [10, 14) with 4 usable: 5 held only in [10, 12).
    holds = [(at(8), at(12), 3), (at(10), at(14), 2)]

    assert spans_over(holds, at(0), at(24), 4) == [(at(10), at(12))]
    assert overlaps_any([(at(10), at(12))], at(11), at(20))  # starts inside the stretch
    assert not overlaps_any([(at(10), at(12))], at(12), at(20))  # starts as it ends: half-open
    assert not overlaps_any([(at(10), at(12))], at(6), at(10))  # ends as it starts


def test_stretches_that_touch_are_one():
    # 5 cards [08, 10) then 5 cards [10, 12) over a limit of 4: one stretch [08, 12) (the end
    # at 10:00 sorts before the start at 10:00; the level never drops to 4 or less).
    holds = [(at(8), at(10), 5), (at(10), at(12), 5)]

    assert spans_over(holds, at(0), at(24), 4) == [(at(8), at(12))]


@given(
    intervals=st.lists(interval, max_size=8),
    window=st.tuples(st.integers(0, 90), st.integers(1, 40)),
    limit=st.integers(0, 12),
)
def test_a_window_overlaps_a_stretch_over_the_limit_exactly_when_its_peak_is_over(
    intervals, window, limit
):
    """The over-commit alert's one sweep (``spans_over`` + ``overlaps_any``) against the
    minute-by-minute count of each window, inside the swept range [0, 130)."""
    start, end = window[0], window[0] + window[1]
    as_datetimes = [(minutes(s), minutes(e), c) for s, e, c in intervals]
    stretches = spans_over(as_datetimes, minutes(0), minutes(130), limit)

    assert overlaps_any(stretches, minutes(start), minutes(end)) == (
        brute_force_peak(intervals, start, end) > limit
    )
