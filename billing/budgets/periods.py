"""Pure budget arithmetic: period bounds, rollover, burn-down, run-out forecast, alert level.

No ORM. Periods are calendar months, quarters (starting January, April, July, October) or
years, starting at local midnight in the billing time zone (:func:`billing.pricing.local_midnight`)
so a budget period and the statements' months cut the same instants; an hour is 3,600 real
seconds, so a month holding a daylight-saving change has one hour more or less.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from decimal import Decimal
from functools import cache

from billing.pricing import local_midnight, next_month

MONTHS_PER_PERIOD = {"month": 1, "quarter": 3, "year": 12}

ALERT_THRESHOLDS = (50, 80, 100)
"""Percent used at which a budget alerts (issue #32): managers are told once per period each."""

BANNER_PERCENT = 80
"""From this share used, the team's pages show a banner (issue #32)."""


def period_start(kind: str, day: date) -> date:
    """The first day of the ``kind`` period ``day`` lies in: 2026-05-17 → quarter 2026-04-01."""
    months = MONTHS_PER_PERIOD[kind]
    month = (day.month - 1) // months * months + 1
    return date(day.year, month, 1)


@cache  # a handful of distinct periods, asked for by every budget
def period_months(kind: str, first: date) -> tuple[date, ...]:
    """The months (first days) of the period that starts ``first``."""
    months = [first]
    for _ in range(MONTHS_PER_PERIOD[kind] - 1):
        months.append(next_month(months[-1]))
    return tuple(months)


def period_after(kind: str, first: date) -> date:
    """The first day of the period after the one starting ``first``."""
    return next_month(period_months(kind, first)[-1])


def period_before(kind: str, first: date) -> date:
    """The first day of the period before the one starting ``first``."""
    months = MONTHS_PER_PERIOD[kind]
    index = first.year * 12 + first.month - 1 - months
    return date(index // 12, index % 12 + 1, 1)


def period_bounds(kind: str, first: date, zone: tzinfo) -> tuple[datetime, datetime]:
    """``[local midnight of first, local midnight of the next period)`` in ``zone``."""
    return local_midnight(first, zone), local_midnight(period_after(kind, first), zone)


def rollover_amount(
    *, policy: str, limit: Decimal, previous_used: Decimal | None, cap_percent: Decimal | None
) -> Decimal:
    """What the previous period hands to this one, added to this period's ``limit``.

    ``none``: 0. ``carry``: the previous period's unused part of the same base limit, at most
    ``cap_percent`` % of it (no cap given: all of it) — 100 limit, 30 used, 25 % cap → +25.
    ``deduct``: minus the previous period's overage — 100 limit, 130 used → −30. Only the one
    previous period counts (it is measured against its base limit, not its own rollover), so a
    budget's limit never depends on its whole history. ``previous_used`` ``None`` (no
    previous period: the budget starts now) hands over nothing.
    """
    if policy == "none" or previous_used is None:
        return Decimal(0)
    if policy == "carry":
        unused = max(limit - previous_used, Decimal(0))
        cap = limit if cap_percent is None else limit * cap_percent / 100
        return min(unused, cap)
    return -max(previous_used - limit, Decimal(0))


def percent_used(used: Decimal, limit: Decimal) -> Decimal | None:
    """``used / limit × 100`` to one decimal; ``None`` when the limit is 0 or less (a
    deduction ate it): every use is then beyond it, which :func:`is_over` says."""
    if limit <= 0:
        return None
    return (used * 100 / limit).quantize(Decimal("0.1"))


def alert_level(percent: Decimal | None, *, exhausted: bool = False) -> int | None:
    """The highest threshold of :data:`ALERT_THRESHOLDS` reached, or ``None``."""
    if exhausted:
        return ALERT_THRESHOLDS[-1]
    if percent is None:
        return None
    reached = [t for t in ALERT_THRESHOLDS if percent >= t]
    return reached[-1] if reached else None


@dataclass(frozen=True)
class Forecast:
    """Linear burn from the period start: ``rate`` per hour so far; ``run_out_at`` when the
    remaining amount is gone at that rate (``None``: not within the period, or no use yet)."""

    rate_per_hour: Decimal
    run_out_at: datetime | None


def forecast(
    *, used: Decimal, limit: Decimal, start: datetime, end: datetime, now: datetime
) -> Forecast | None:
    """Run-out date at the average rate so far: 20 used of 100 in the first 48 h of a 30-day
    month burns 20/48 per hour, so the remaining 80 last 192 h: run-out 8 days after the start.
    Already at or over the limit: ``now``. ``None`` before the period started."""
    elapsed_h = Decimal(int((min(now, end) - start).total_seconds())) / 3600
    if elapsed_h <= 0:
        return None
    rate = used / elapsed_h
    if used >= limit:
        return Forecast(rate, min(now, end))
    if rate <= 0:
        return Forecast(rate, None)
    hours_left = (limit - used) / rate
    seconds = int((hours_left * 3600).to_integral_value())
    run_out = min(now, end) + timedelta(seconds=seconds)
    return Forecast(rate, run_out if run_out < end else None)
