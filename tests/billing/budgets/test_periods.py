"""The pure budget arithmetic: periods, rollover both ways, percent, alert level, run-out."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

from billing.budgets import periods as p


def test_period_start_and_months():
    assert p.period_start("month", date(2026, 5, 17)) == date(2026, 5, 1)
    assert p.period_start("quarter", date(2026, 5, 17)) == date(2026, 4, 1)
    assert p.period_start("quarter", date(2026, 12, 31)) == date(2026, 10, 1)
    assert p.period_start("year", date(2026, 5, 17)) == date(2026, 1, 1)
    assert p.period_months("quarter", date(2026, 10, 1)) == (
        date(2026, 10, 1), date(2026, 11, 1), date(2026, 12, 1)
    )  # fmt: skip
    assert p.period_after("quarter", date(2026, 10, 1)) == date(2027, 1, 1)
    assert p.period_before("quarter", date(2026, 1, 1)) == date(2025, 10, 1)
    assert p.period_before("month", date(2026, 1, 1)) == date(2025, 12, 1)
    assert p.period_before("year", date(2026, 1, 1)) == date(2025, 1, 1)


def test_period_bounds_across_dst_are_real_hours():
    """March 2026 in Europe/Berlin: 31 days, the clocks go forward on the 29th, so the month
    is 31 × 24 − 1 = 743 real hours, from 2026-02-28 23:00 UTC to 2026-03-31 22:00 UTC."""
    from zoneinfo import ZoneInfo

    start, end = p.period_bounds("month", date(2026, 3, 1), ZoneInfo("Europe/Berlin"))
    assert start == datetime(2026, 2, 28, 23, tzinfo=UTC)
    assert end == datetime(2026, 3, 31, 22, tzinfo=UTC)
    assert (end.astimezone(UTC) - start.astimezone(UTC)).total_seconds() / 3600 == 743


def test_rollover_none_carry_deduct():
    """Limit 100. carry, 30 used before, cap 25 %: unused 70 capped at 25 → +25; no cap → +70;
    deduct, 130 used before: overage 30 → −30; deduct, 80 used: nothing; none: 0."""
    h = Decimal
    assert p.rollover_amount(policy="carry", limit=h(100), previous_used=h(30),
                             cap_percent=h(25)) == 25  # fmt: skip
    assert p.rollover_amount(policy="carry", limit=h(100), previous_used=h(30),
                             cap_percent=None) == 70  # fmt: skip
    assert p.rollover_amount(policy="carry", limit=h(100), previous_used=h(130),
                             cap_percent=h(25)) == 0  # fmt: skip
    assert p.rollover_amount(policy="deduct", limit=h(100), previous_used=h(130),
                             cap_percent=None) == -30  # fmt: skip
    assert p.rollover_amount(policy="deduct", limit=h(100), previous_used=h(80),
                             cap_percent=None) == 0  # fmt: skip
    assert p.rollover_amount(policy="none", limit=h(100), previous_used=h(30),
                             cap_percent=None) == 0  # fmt: skip
    assert p.rollover_amount(policy="carry", limit=h(100), previous_used=None,
                             cap_percent=None) == 0  # fmt: skip


def test_percent_and_alert_levels():
    assert p.percent_used(Decimal(61), Decimal(100)) == Decimal("61.0")
    assert p.percent_used(Decimal(1), Decimal(0)) is None
    assert p.alert_level(Decimal("49.9")) is None
    assert p.alert_level(Decimal("50.0")) == 50
    assert p.alert_level(Decimal("80.0")) == 80
    assert p.alert_level(Decimal("100.0")) == 100
    assert p.alert_level(None, exhausted=True) == 100


def test_forecast_run_out():
    """20 used of 100 in the first 48 h of a 30-day period: 20/48 per hour, the remaining 80
    last 80 × 48 / 20 = 192 h = 8 days after now, i.e. 10 days after the start."""
    start, end = datetime(2026, 4, 1, tzinfo=UTC), datetime(2026, 5, 1, tzinfo=UTC)
    now = datetime(2026, 4, 3, tzinfo=UTC)
    f = p.forecast(used=Decimal(20), limit=Decimal(100), start=start, end=end, now=now)
    assert f.run_out_at == datetime(2026, 4, 11, tzinfo=UTC)
    assert f.rate_per_hour == Decimal(20) / 48
    # 5 used in 48 h: 95 left last 912 h = 38 days, after the period ends → no run-out in it
    late = p.forecast(used=Decimal(5), limit=Decimal(100), start=start, end=end, now=now)
    assert late.run_out_at is None
    # already over: now
    over = p.forecast(used=Decimal(120), limit=Decimal(100), start=start, end=end, now=now)
    assert over.run_out_at == now
    assert p.forecast(used=Decimal(0), limit=Decimal(1), start=start, end=end, now=start) is None
