"""How slurmctld repeats a reservation (``_advance_resv_time``: the same wall-clock hours in its
own zone), against the portal's occurrences of a rule: hand-worked dates and hours."""

from __future__ import annotations

from datetime import UTC, date, datetime, time

from pools.recurring.recurrence import Rule, occurrences, slurm_drift, slurm_repeats


def utc(y, m, d, h) -> datetime:
    return datetime(y, m, d, h, tzinfo=UTC)


def test_weekday_repetition_skips_from_friday_to_monday():
    # Friday 4 December 2026 09:00-10:00 UTC: then Monday 7, Tuesday 8
    got = slurm_repeats((utc(2026, 12, 4, 9), utc(2026, 12, 4, 10)), "weekday", "UTC", 3)
    assert got == [
        (utc(2026, 12, 4, 9), utc(2026, 12, 4, 10)),
        (utc(2026, 12, 7, 9), utc(2026, 12, 7, 10)),
        (utc(2026, 12, 8, 9), utc(2026, 12, 8, 10)),
    ]


def test_slurm_in_berlin_keeps_berlin_hours_across_the_spring_change():
    # 09:00 Berlin is 08:00 UTC on Saturday 27 March 2027 (CET), 07:00 UTC on Sunday 28 (CEST)
    got = slurm_repeats((utc(2027, 3, 27, 8), utc(2027, 3, 27, 17)), "daily", "Europe/Berlin", 2)
    assert got[1] == (utc(2027, 3, 28, 7), utc(2027, 3, 28, 16))


def test_a_berlin_rule_drifts_on_a_utc_cluster_from_the_first_summer_day_only():
    rule = Rule("daily", date(2027, 3, 25), date(2027, 3, 30), time(9), time(18),
                "Europe/Berlin", 4)  # fmt: skip
    ahead = occurrences(rule)
    assert len(ahead) == 6
    assert slurm_drift(ahead, "daily", "Europe/Berlin") is None
    assert slurm_drift(ahead, "daily", "UTC") == 3  # 25, 26, 27 March, then Sunday 28
    weekly = Rule("weekly", date(2027, 1, 4), date(2027, 3, 1), time(9), time(18), "UTC", 4)
    assert slurm_drift(occurrences(weekly), "weekly", "UTC") is None
