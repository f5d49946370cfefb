"""Occurrences of recurring reservations and the held-cards step function (pure, no database).

Summer time in Europe/Berlin ends on Sunday 2026-10-25 at 03:00 CEST (clocks go back to 02:00
CET; EU directive 2000/84/EC: last Sunday of October, 01:00 UTC). 09:00-18:00 local is
07:00-16:00 UTC while CEST (UTC+2) is in force and 08:00-17:00 UTC from the 25th (CET, UTC+1).
In America/New_York summer time starts on Sunday 2027-03-14 at 02:00 EST (second Sunday of
March, 15 U.S.C. 260a): 02:30 that night does not exist on the clock.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pools.capacity.arithmetic import peak_cards
from pools.recurring.recurrence import Rule, Steps, occurrences


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def course(recurrence: str, first: date, last: date, zone="Europe/Berlin") -> Rule:
    return Rule(recurrence, first, last, time(9), time(18), zone, 8)


def test_daily_keeps_local_hours_across_the_autumn_change():
    """Fri 23 and Sat 24 October in CEST, Sun 25 and Mon 26 in CET."""
    found = occurrences(course("daily", date(2026, 10, 23), date(2026, 10, 26)))
    assert found == [
        (utc(2026, 10, 23, 7), utc(2026, 10, 23, 16)),
        (utc(2026, 10, 24, 7), utc(2026, 10, 24, 16)),
        (utc(2026, 10, 25, 8), utc(2026, 10, 25, 17)),
        (utc(2026, 10, 26, 8), utc(2026, 10, 26, 17)),
    ]


def test_weekdays_skip_the_weekend():
    """Fri 23, (Sat 24, Sun 25 skipped), Mon 26, Tue 27 October 2026."""
    found = occurrences(course("weekday", date(2026, 10, 23), date(2026, 10, 27)))
    assert [s.date() for s, _ in found] == [date(2026, 10, 23), date(2026, 10, 26),
                                            date(2026, 10, 27)]  # fmt: skip


def test_weekly_repeats_on_the_first_dates_weekday():
    """Wednesdays 21 and 28 October and 4 November 2026; 11 November is past the last date.
    The 4 November one is in CET: 08:00 UTC."""
    found = occurrences(course("weekly", date(2026, 10, 21), date(2026, 11, 10)))
    assert [s for s, _ in found] == [utc(2026, 10, 21, 7), utc(2026, 10, 28, 8),
                                     utc(2026, 11, 4, 8)]  # fmt: skip


def test_a_window_keeps_only_the_occurrences_it_meets():
    """Half-open: the 24th's ends at 16:00 UTC, a window from then does not meet it."""
    rule = course("daily", date(2026, 10, 23), date(2026, 10, 26))
    found = occurrences(rule, utc(2026, 10, 24, 16), utc(2026, 10, 25, 8, 1))
    assert found == [(utc(2026, 10, 25, 8), utc(2026, 10, 25, 17))]


def test_a_wall_time_the_clock_skips_reads_with_the_offset_before_the_change():
    """02:30-04:00 New York on 2027-03-14: 02:30 at EST (UTC-5) is 07:30 UTC, 04:00 EDT (UTC-4)
    is 08:00 UTC: 30 minutes that night, 90 the night before (07:30-09:00 UTC)."""
    rule = Rule("daily", date(2027, 3, 13), date(2027, 3, 14), time(2, 30), time(4),
                "America/New_York", 1)  # fmt: skip
    assert occurrences(rule) == [
        (utc(2027, 3, 13, 7, 30), utc(2027, 3, 13, 9)),
        (utc(2027, 3, 14, 7, 30), utc(2027, 3, 14, 8)),
    ]


hours = st.integers(0, 60)
intervals = st.lists(st.tuples(hours, st.integers(1, 20), st.integers(0, 9)), max_size=12).map(
    lambda rows: [(h, h + length, n) for h, length, n in rows]
)


# a shared 2-core machine can draw slowly: the property, not the timing, is under test
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(intervals=intervals, start=hours, length=st.integers(1, 30))
def test_the_step_function_peaks_as_the_sweep_line_does(intervals, start, length):
    """Steps.peak over any window equals peak_cards' sweep over the same intervals, which the
    approval uses (both half-open)."""
    base = utc(2027, 1, 1)
    spans = [(base + timedelta(hours=a), base + timedelta(hours=b), n) for a, b, n in intervals]
    lo, hi = base + timedelta(hours=start), base + timedelta(hours=start + length)
    assert Steps.of(spans).peak(lo, hi) == peak_cards(spans, lo, hi)
