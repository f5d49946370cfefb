"""One pricing path (:mod:`billing.charges`): what the database sums equals the records priced
one by one in Python, over random months.

Each example draws a month (March or October 2026, each with a daylight-saving change in
Europe/Berlin, the billing zone here), one to three rate cards starting on random days (the
first possibly after the month starts: a gap nothing prices), each at its own reserved A100
price in one currency per month (EUR: cents, JPY: whole yen, KWD: fils, ISO 4217), and up to
seven reserved allocations with their usage records at random second-exact windows, some
straddling a rate change or the clock change. The reference reckons every record by hand:
:func:`billing.pricing.prorate` over the rate periods, the period's price, one rounding.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal
from unittest import mock
from zoneinfo import ZoneInfo

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from billing import charges, selectors
from billing.choices import RateKind
from billing.pricing import next_month, prorate, round_money, seconds_in_periods
from billing.rate_periods import rate_periods

pytestmark = pytest.mark.django_db
BERLIN = ZoneInfo("Europe/Berlin")
MONTHS = [date(2026, 3, 1), date(2026, 10, 1)]  # DST: 29 Mar (23 h), 25 Oct (25 h) in Berlin

records_st = st.lists(
    st.tuples(
        st.integers(0, 30 * 86400),  # start: seconds after the month's first local midnight
        st.integers(1, 4 * 86400),  # length in seconds
        st.integers(1, 8),  # cards
    ),
    min_size=1,
    max_size=7,
)
cards_st = st.lists(st.integers(0, 30), min_size=1, max_size=3, unique=True)  # start days
prices_st = st.lists(
    st.decimals("0.01", "50", places=6, allow_nan=False), min_size=3, max_size=3, unique=True
)


def _setup(month, days, prices, currency, rows, team, pool, a100):
    """The month's rate cards and allocations with their reserved usage records (whole
    card-seconds of each window inside the month), after clearing the last example's."""
    from factories import AllocationFactory

    from billing.models import RateCard, UsageRecord
    from billing.services.rates import rate_card_create
    from pools.models import Allocation

    UsageRecord.objects.all().delete()
    Allocation.objects.all().delete()
    # Committed, these writes would replace the allocations' generation and so hide the last
    # example's held card-seconds (billing.selectors._held_card_seconds); the test's
    # transaction never commits, so that cache is emptied here instead.
    cache.clear()
    RateCard.objects.all().delete()
    for n, day in enumerate(sorted(days)):
        rate_card_create(
            name=f"card {n}", currency=currency, effective_from=month + timedelta(days=day),
            gpu_prices={(a100.pk, RateKind.GPU_RESERVED): prices[n]},
        )  # fmt: skip
    first = datetime.combine(month, datetime.min.time(), BERLIN)
    last = datetime.combine(next_month(month), datetime.min.time(), BERLIN)
    made = []
    for offset, length, cards in rows:
        start = first + timedelta(seconds=offset)
        end = min(start + timedelta(seconds=length), last)
        if end <= start:
            continue
        allocation = AllocationFactory(
            team=team, pool=pool, gpu_model=a100, card_count=cards, starts_at=start,
            ends_at=end, status="active",
        )  # fmt: skip
        seconds = seconds_in_periods(start, end, [(first, last)])[0]
        made.append(
            UsageRecord.objects.create(
                team=team, gpu_model=a100, allocation=allocation, quantity=cards * seconds,
                unit="card-seconds", basis="reserved", month=month, period_start=start,
                period_end=end, source="reservation", source_id=f"alloc:{allocation.pk}",
                created_at=start, updated_at=start,
            )
        )  # fmt: skip
    return made


def _price(period, a100):
    return period.prices.get((RateKind.GPU_RESERVED, a100.pk, ""))


@settings(
    max_examples=25, deadline=None, database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)  # fmt: skip
@given(
    month=st.sampled_from(MONTHS), days=cards_st, prices=prices_st,
    currency=st.sampled_from(["EUR", "JPY", "KWD"]), rows=records_st, limit=st.integers(1, 7),
)  # fmt: skip
def test_sql_sums_equal_every_record_priced_in_python(
    month, days, prices, currency, rows, limit, team, train_pool, a100
):
    with override_settings(BILLING_TIME_ZONE="Europe/Berlin"):
        _check(month, days, prices, currency, rows, limit, team, train_pool, a100)


def _check(month, days, prices, currency, rows, limit, team, train_pool, a100):
    records = _setup(month, days, prices, currency, rows, team, train_pool, a100)
    periods = rate_periods(month=month, zone=BERLIN)
    bounds = [(p.start, p.end) for p in periods]
    by_record = {r.pk: prorate(r.quantity, r.period_start, r.period_end, bounds) for r in records}

    # 1. quantities per rate period: GROUP BY + straddlers == every record prorated
    from billing.models import UsageRecord

    sums, _ = charges.period_sums(UsageRecord.objects.all(), periods, ("team_id",))
    expected = [
        sum((parts[i] for parts in by_record.values()), Decimal(0)) for i in range(len(periods))
    ]
    assert sums.get((team.pk,), [Decimal(0)] * len(periods)) == expected

    # 2. the statement's lines: one per priced period (prices differ), rounded once
    lines, _, line_currency = charges.statement_lines_compute(team_id=team.pk, month=month)
    hand = {}
    for period, raw in zip(periods, expected, strict=True):
        if raw and _price(period, a100) is not None:
            amount = round_money(raw * _price(period, a100) / 3600, currency)
            hand[period.rate_from] = amount
    assert line_currency == currency
    assert {line.rate_from: line.amount for line in lines} == hand

    # 3. the finance month's top allocations: each record's cost, rounded once, dearest first
    def cost(parts):
        return sum(
            (q * _price(p, a100) for q, p in zip(parts, periods, strict=True) if _price(p, a100)),
            Decimal(0),
        )

    ranked = sorted(
        ((-round_money(cost(by_record[r.pk]) / 3600, currency), r.allocation_id) for r in records),
    )[:limit]
    top = selectors.top_allocations(month=month, limit=limit)
    assert [(r["allocation"].pk, r["amount"]) for r in top] == [(a, -m) for m, a in ranked]

    # 4. idle cost's held cards: the SQL sum == the Python card timeline == by hand
    held = sum(
        (
            cost([Decimal(r.allocation.card_count * s) for s in seconds_in_periods(
                r.allocation.starts_at, r.allocation.ends_at, bounds)])
            for r in records
        ),
        Decimal(0),
    )  # fmt: skip
    sql = selectors.pool_idle_costs(month=month)
    with mock.patch.object(connection, "vendor", "sqlite"):
        python = selectors.pool_idle_costs(month=month)
    assert [r.allocated_cost for r in sql] == [r.allocated_cost for r in python]
    assert [r.allocated_cost for r in sql] == [round_money(held / 3600, currency)]


def test_prorate_splits_by_whole_seconds_across_the_clock_change():
    """30 cards over 28 Mar 2026 22:00 → 29 Mar 2026 23:00 UTC: 25 real hours, 30 × 25 × 3600 =
    2,700,000 card-seconds, cut at Berlin's midnight of 29 → 30 Mar (22:00 UTC on the 29th,
    CEST): 24 h before it, 1 h after: 2,700,000 × 24/25 = 2,592,000 and × 1/25 = 108,000.
    Berlin's 29 Mar lasts 23 h (23:00 UTC on the 28th → 22:00 UTC on the 29th), though both
    ends carry the same ``ZoneInfo`` (which would subtract as wall-clock times: 24 h)."""
    from datetime import UTC

    cut = datetime(2026, 3, 30, tzinfo=BERLIN)
    assert cut == datetime(2026, 3, 29, 22, tzinfo=UTC)
    start, end = datetime(2026, 3, 28, 22, tzinfo=UTC), datetime(2026, 3, 29, 23, tzinfo=UTC)
    periods = [
        (datetime(2026, 3, 1, tzinfo=BERLIN), cut),
        (cut, datetime(2026, 4, 1, tzinfo=BERLIN)),
    ]
    assert prorate(Decimal(2_700_000), start, end, periods) == [2_592_000, 108_000]
    day = (datetime(2026, 3, 29, tzinfo=BERLIN), cut)
    assert seconds_in_periods(*day, [day]) == [23 * 3600]  # same ZoneInfo: read in UTC
