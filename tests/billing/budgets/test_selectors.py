"""Budget consumption read through the statements' own lines, worked out by hand.

Rate card (tests/billing/conftest.py ``rates``, EUR): A100 reserved 2.00 / used 3.00 per
card-hour, L40S reserved 8.00 (burst falls back to it), qwen input 2.00 / output 8.00 per
million tokens. Billing zone Europe/Berlin: March 2026 has the spring-forward day (29th, 23 h).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings

from billing.budgets.models import Budget
from billing.budgets.selectors import budget_list, budget_statuses, team_budget_banner
from billing.services.usage_import import usage_import_reservations

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rates")]
BERLIN = ZoneInfo("Europe/Berlin")


def berlin(*args) -> datetime:
    return datetime(*args, tzinfo=BERLIN)


def usage(team, model, *, basis, hours=None, tokens=None, unit="card-seconds", at, **extra):
    """One usage record of an hour starting ``at`` (its month read in Berlin, as March's
    records are; the UTC tests use mid-month times, the same month either way)."""
    from factories import UsageRecordFactory

    quantity = extra.pop("quantity", None)
    if quantity is None:
        quantity = Decimal(hours * 3600) if hours is not None else Decimal(tokens)
    return UsageRecordFactory(
        team=team, gpu_model=model, quantity=quantity, unit=unit, basis=basis,
        period_start=at, period_end=at + timedelta(hours=1),
        month=at.astimezone(BERLIN).date().replace(day=1), **extra,
    )  # fmt: skip


def budget(team, **values) -> Budget:
    values = {"period": "month", "starts_on": date(2026, 1, 1), **values}
    if values.get("money_limit") is not None:
        values.setdefault("currency", "EUR")
    return Budget.objects.create(team=team, **values)


@override_settings(BILLING_TIME_ZONE="Europe/Berlin")
def test_consumption_reserved_used_tokens_burst_across_dst(
    team, train_pool, infer_pool, a100, l40s
):
    """March 2026, read at 2026-03-30 00:00 Berlin:

    - reserved: 2 A100 from 29 Mar 00:00 Berlin (the 23-hour day), accrued by the reservation
      import up to now: 2 × 23 h = 46 card-h × 2.00 = 92.00 EUR
    - used outside reservations: 10 A100 card-h × 3.00 = 30.00
    - elastic burst: 5 L40S card-h × 8.00 (the reserved price) = 40.00
    - tokens: 1,000,000 input × 2.00 / 1M = 2.00; 500,000 output × 8.00 / 1M = 4.00
    card-hours 46 + 10 + 5 = 61 of 100 → 61.0 %; money 92 + 30 + 40 + 2 + 4 = 168.00 of 300
    → 56.0 %. Alert 50. Run-out, on card-hours: 61 card-h in the 695 h from 1 Mar 00:00 to
    30 Mar 00:00 Berlin (29 × 24 − 1), 39 left last 39 × 695 / 61 = 444.344… h, past the
    month's end: none in March.
    """
    from factories import AllocationFactory

    now = berlin(2026, 3, 30)
    AllocationFactory(team=team, pool=train_pool, gpu_model=a100, card_count=2,
                      starts_at=berlin(2026, 3, 29), ends_at=berlin(2026, 4, 2))  # fmt: skip
    usage_import_reservations(start=berlin(2026, 3, 1), end=berlin(2026, 4, 1), now=now)
    usage(team, a100, basis="used", hours=10, at=berlin(2026, 3, 10), source="slurm-accounting")
    usage(team, l40s, basis="burst", hours=5, at=berlin(2026, 3, 11), source="elastic-burst")
    usage(team, None, basis="tokens", tokens=1_000_000, unit="input-tokens",
          served_model="qwen", at=berlin(2026, 3, 12), source="token-api")  # fmt: skip
    usage(team, None, basis="tokens", tokens=500_000, unit="output-tokens",
          served_model="qwen", at=berlin(2026, 3, 12), source="token-api")  # fmt: skip
    b = budget(team, card_hours_limit=Decimal(100), money_limit=Decimal(300))
    status = budget_statuses([b], now=now)[b.pk]
    assert status.period == date(2026, 3, 1)
    assert status.card_hours.used == Decimal(61)
    assert status.money.used == Decimal("168.00")
    assert status.card_hours.percent == Decimal("61.0")
    assert status.money.percent == Decimal("56.0")
    assert status.percent == Decimal("61.0")
    assert status.alert == 50
    assert status.run_out_at is None
    assert team_budget_banner(team_id=team.pk, now=now) == []


@override_settings(BILLING_TIME_ZONE="Europe/Berlin")
def test_scopes_gpu_model_and_pool(team, train_pool, infer_pool, a100, l40s):
    """Same March: an A100-only budget counts the 46 reserved + 10 used card-h = 56 (not the
    L40S burst, not tokens: 92 + 30 = 122.00 EUR); a pool ``train`` budget counts only usage
    tied to an allocation in that pool: the 46 reserved card-h (the used hours name none)."""
    from factories import AllocationFactory

    now = berlin(2026, 3, 30)
    AllocationFactory(team=team, pool=train_pool, gpu_model=a100, card_count=2,
                      starts_at=berlin(2026, 3, 29), ends_at=berlin(2026, 4, 2))  # fmt: skip
    usage_import_reservations(start=berlin(2026, 3, 1), end=berlin(2026, 4, 1), now=now)
    usage(team, a100, basis="used", hours=10, at=berlin(2026, 3, 10), source="slurm-accounting")
    usage(team, l40s, basis="burst", hours=5, at=berlin(2026, 3, 11), source="elastic-burst")
    by_model = budget(team, gpu_model=a100, card_hours_limit=Decimal(100),
                      money_limit=Decimal(300))  # fmt: skip
    by_pool = budget(team, pool=train_pool, card_hours_limit=Decimal(50))
    statuses = budget_statuses([by_model, by_pool], now=now)
    assert statuses[by_model.pk].card_hours.used == Decimal(56)
    assert statuses[by_model.pk].money.used == Decimal("122.00")
    assert statuses[by_pool.pk].card_hours.used == Decimal(46)
    # 46 of 50 = 92.0 %: the banner lists it
    assert [s.budget for s in team_budget_banner(team_id=team.pk, now=now)] == [by_pool]


@override_settings(BILLING_TIME_ZONE="UTC")
def test_quarter_across_month_end(team, train_pool, a100):
    """A reservation of 4 A100 from 31 Jan 22:00 to 1 Feb 03:30 UTC is split at the month end:
    8 card-h in January, 14 in February (C24). The Q1 budget counts 22 card-h (44.00 EUR);
    a February budget counts 14."""
    from factories import AllocationFactory

    AllocationFactory(team=team, pool=train_pool, gpu_model=a100, card_count=4,
                      starts_at=datetime(2026, 1, 31, 22, tzinfo=ZoneInfo("UTC")),
                      ends_at=datetime(2026, 2, 1, 3, 30, tzinfo=ZoneInfo("UTC")),
                      status="ended")  # fmt: skip
    now = datetime(2026, 2, 10, tzinfo=ZoneInfo("UTC"))
    usage_import_reservations(start=now.replace(month=1, day=1), end=now, now=now)
    quarter = budget(team, period="quarter", card_hours_limit=Decimal(100),
                     money_limit=Decimal(100))  # fmt: skip
    month = budget(team, gpu_model=a100, card_hours_limit=Decimal(100))
    statuses = budget_statuses([quarter, month], now=now)
    assert statuses[quarter.pk].period == date(2026, 1, 1)
    assert statuses[quarter.pk].card_hours.used == Decimal(22)
    assert statuses[quarter.pk].money.used == Decimal("44.00")
    assert statuses[month.pk].card_hours.used == Decimal(14)


@override_settings(BILLING_TIME_ZONE="UTC")
@pytest.mark.parametrize(
    ("rollover", "cap", "february_hours", "limit", "remaining"),
    [
        # carry: February used 30 of 100, 70 unused, capped at 25 % = 25 → 125; 125 − 10 = 115
        ("carry", Decimal(25), 30, Decimal(125), Decimal(115)),
        # carry without a cap: all 70 → 170
        ("carry", None, 30, Decimal(170), Decimal(160)),
        # deduct: February used 130, 30 over → 70; 70 − 10 = 60
        ("deduct", None, 130, Decimal(70), Decimal(60)),
        # none: 100 whatever February did
        ("none", None, 130, Decimal(100), Decimal(90)),
    ],
)
def test_rollover_both_ways(team, a100, rollover, cap, february_hours, limit, remaining):
    """A monthly 100 card-hour budget read on 2026-03-15 with 10 A100 card-h used in March."""
    utc = ZoneInfo("UTC")
    usage(team, a100, basis="used", hours=february_hours, at=datetime(2026, 2, 10, tzinfo=utc),
          source="slurm-accounting")  # fmt: skip
    usage(team, a100, basis="used", hours=10, at=datetime(2026, 3, 10, tzinfo=utc),
          source="slurm-accounting")  # fmt: skip
    b = budget(team, card_hours_limit=Decimal(100), rollover=rollover, rollover_cap_percent=cap)
    status = budget_statuses([b], now=datetime(2026, 3, 15, tzinfo=utc))[b.pk]
    assert status.card_hours.limit == limit
    assert status.card_hours.remaining == remaining


@override_settings(BILLING_TIME_ZONE="UTC")
def test_no_rollover_before_the_budget_started(team, a100):
    """A budget starting in March hands nothing over from February's 30 card-h."""
    utc = ZoneInfo("UTC")
    usage(team, a100, basis="used", hours=30, at=datetime(2026, 2, 10, tzinfo=utc),
          source="slurm-accounting")  # fmt: skip
    b = budget(team, starts_on=date(2026, 3, 1), card_hours_limit=Decimal(100), rollover="carry")
    status = budget_statuses([b], now=datetime(2026, 3, 15, tzinfo=utc))[b.pk]
    assert status.card_hours.limit == Decimal(100)
    assert status.card_hours.used == Decimal(0)


@override_settings(BILLING_TIME_ZONE="UTC")
def test_exhausted_budget_alerts_100_and_runs_out_now(team, a100):
    """120 card-h used of 100 by 2026-03-15: exhausted, alert 100, run-out now."""
    utc = ZoneInfo("UTC")
    now = datetime(2026, 3, 15, tzinfo=utc)
    usage(team, a100, basis="used", hours=120, at=datetime(2026, 3, 10, tzinfo=utc),
          source="slurm-accounting")  # fmt: skip
    b = budget(team, card_hours_limit=Decimal(100))
    status = budget_statuses([b], now=now)[b.pk]
    assert status.exhausted and status.alert == 100 and status.run_out_at == now
    assert status.card_hours.remaining == Decimal(-20)


def test_budget_list_visibility(team, team_member, other_member, pool_admin):
    b = budget(team, card_hours_limit=Decimal(100))
    assert list(budget_list(user=team_member)) == [b]
    assert list(budget_list(user=other_member)) == []
    assert list(budget_list(user=pool_admin)) == [b]


@override_settings(BILLING_TIME_ZONE="Europe/Berlin")
def test_period_change_mid_budget_recounts_to_the_second(team, a100):
    """7,201 card-seconds on 15 Feb and 3,599 on 29 Mar 01:30 Berlin (the 23-hour day), read
    on 30 Mar. As a monthly budget March holds 3,599 s = 0.99972… card-h; changed to a
    quarterly one it holds 7,201 + 3,599 = 10,800 s = exactly 3 card-h: recounted from the
    records, nothing stored to drift."""
    from billing.budgets.services import budget_update

    for seconds, at in ((7201, berlin(2026, 2, 15)), (3599, berlin(2026, 3, 29, 1, 30))):
        usage(team, a100, basis="used", hours=0, at=at, source="slurm-accounting",
              quantity=Decimal(seconds))  # fmt: skip
    b = budget(team, card_hours_limit=Decimal(100))
    now = berlin(2026, 3, 30)
    assert budget_statuses([b], now=now)[b.pk].card_hours.used == Decimal(3599) / 3600
    admin = get_user_model().objects.create(username="pa", is_staff=True)
    b = budget_update(budget=b, actor=admin, period="quarter")
    assert budget_statuses([b], now=now)[b.pk].card_hours.used == Decimal(3)
