"""Money so far this month (issue #37): what the month's statement would charge now, through
the statements' own path, and a forecast to the month's end at today's reserved price; on the
team dashboard and *My teams*."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from unittest import mock

import pytest
from factories import AllocationFactory, RateCardEntryFactory, RateCardFactory

from billing.dashboards.costs import teams_cost_so_far
from billing.services.usage_import import usage_import_reservations
from pools.common.choices import AllocationStatus
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 10, 12, 0, tzinfo=UTC)
DEC_1 = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture
def reserved(team):
    """2 L40S reserved for team nlp 1 Dec 00:00 -> 21 Dec 00:00 at 1.25 EUR a card-hour, the
    hourly reservation import run up to now (10 Dec 12:00)."""
    card = RateCardFactory(effective_from=date(2026, 12, 1))
    RateCardEntryFactory(rate_card=card, price=Decimal("1.25"))
    allocation = AllocationFactory(
        team=team,
        card_count=2,
        gpu_model=GpuModel.objects.get(slug="l40s"),
        status=AllocationStatus.ACTIVE,
        starts_at=DEC_1,
        ends_at=datetime(2026, 12, 21, tzinfo=UTC),
    )
    usage_import_reservations(start=DEC_1, end=NOW, now=NOW)
    return allocation


def test_to_date_and_forecast_by_hand(team, reserved):
    """To date: 2 cards x 9.5 days x 24 h = 456 card-h x 1.25 = 570.00 EUR (the statement's
    reserved line). Ahead: 10 Dec 12:00 -> 21 Dec 00:00 = 10.5 days = 252 h x 2 cards = 504
    card-h x 1.25 = 630.00; forecast 570.00 + 630.00 = 1,200.00 EUR."""
    cost = teams_cost_so_far(team_ids=[team.pk], now=NOW)[team.pk]

    assert cost.month == date(2026, 12, 1)
    assert (cost.to_date, cost.currency) == (Decimal("570.00"), "EUR")
    assert cost.reserved_ahead_card_hours == Decimal(504)
    assert cost.forecast == Decimal("1200.00")
    assert cost.unpriced == ()


def test_a_model_without_a_reserved_price_leaves_the_forecast_unknown(team, reserved):
    """1 H100 reserved 10 Dec -> 12 Dec: the card prices only L40S, so the forecast is unknown
    (never the L40S part alone) and names the H100; to date still 570.00 (the H100's first 12 h
    are unpriced on the statement too: a warning, not money)."""
    h100 = GpuModel.objects.get(slug="h100_sxm")
    AllocationFactory(
        team=team, card_count=1, gpu_model=h100, status=AllocationStatus.ACTIVE,
        starts_at=datetime(2026, 12, 10, tzinfo=UTC), ends_at=datetime(2026, 12, 12, tzinfo=UTC),
    )  # fmt: skip
    usage_import_reservations(start=DEC_1, end=NOW, now=NOW)

    cost = teams_cost_so_far(team_ids=[team.pk], now=NOW)[team.pk]

    assert cost.to_date == Decimal("570.00")
    assert cost.forecast is None and cost.unpriced == (h100.name,)


def test_without_a_rate_card_money_is_unknown_not_zero(team):
    AllocationFactory(team=team, status=AllocationStatus.ACTIVE, starts_at=DEC_1,
                      ends_at=datetime(2026, 12, 21, tzinfo=UTC))  # fmt: skip
    cost = teams_cost_so_far(team_ids=[team.pk], now=NOW)[team.pk]
    assert (cost.to_date, cost.forecast, cost.currency) == (None, None, None)


def test_the_team_dashboard_shows_it(client, team, team_member, reserved):
    client.force_login(team_member)
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        page = client.get(f"/teams/{team.slug}/dashboard/").content.decode()
    page = page.replace("\u00a0", " ").replace("\u202f", " ")  # money groups with thin spaces
    assert 'id="cost-so-far"' in page and "570.00 EUR" in page
    assert 'id="cost-forecast"' in page and "1 200.00 EUR" in page


def test_my_teams_shows_each_teams_cost_so_far(client, team, team_member, reserved):
    """The same figures as the dashboard, per team card (through billing's provider)."""
    client.force_login(team_member)
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        page = client.get("/teams/mine/").content.decode()
    page = page.replace("\u00a0", " ").replace("\u202f", " ")
    assert "data-cost-so-far>570.00 EUR<" in page
    assert "forecast 1 200.00 EUR by month end" in page


def test_a_statement_with_used_lines_says_used_means_outside_reservations(
    client, team, team_member
):
    """November: 1 reserved card-hour and 1 used card-hour of L40S at 1.25 EUR: two lines of
    1.25 EUR for one GPU model, which the page explains (used = outside the reservation), so
    it does not read as the same hour charged twice. A month with reserved lines only has no
    such note."""
    from factories import UsageRecordFactory

    from billing.services.statements import statement_build

    card = RateCardFactory(effective_from=date(2026, 11, 1))
    RateCardEntryFactory(rate_card=card, price=Decimal("1.25"))
    RateCardEntryFactory(rate_card=card, kind="gpu-used", price=Decimal("1.25"))
    start = datetime(2026, 11, 3, 10, tzinfo=UTC)
    UsageRecordFactory(team=team, period_start=start)
    statement_build(team=team, month=date(2026, 11, 1), now=NOW)
    client.force_login(team_member)
    before = client.get(f"/costs/{team.slug}/2026-11/").content.decode()
    assert "data-used-explained" not in before

    UsageRecordFactory(team=team, period_start=start, basis="used", source="slurm")
    statement = statement_build(team=team, month=date(2026, 11, 1), now=NOW)
    assert sorted((line.basis, line.amount) for line in statement.lines.all()) == [
        ("reserved", Decimal("1.25")),
        ("used", Decimal("1.25")),
    ]
    page = client.get(f"/costs/{team.slug}/2026-11/").content.decode()
    assert "data-used-explained" in page and "outside</em> the team's reservations" in page


def test_the_forecast_is_the_same_after_each_hourly_import(team):
    """1 L40S reserved all of 1 Dec 00:00 -> 21 Dec 00:00 (480 h) at 0.013 EUR a card-hour: the
    month's reserved line will be 480 × 0.013 = 6.24 EUR, whichever hour the import ran to.
    Imported to 2 Dec 11:00 (35 h): to date 35 × 0.013 = 0.455 → 0.46; rounding the 445 h
    ahead apart (5.785 → 5.79) forecast 6.25, a cent more than the same data imported an hour
    later (0.468 → 0.47 and 5.772 → 5.77: 6.24). The reserved hours ahead are priced with the
    line they will join, rounded once: 6.24 after both imports."""
    card = RateCardFactory(effective_from=date(2026, 12, 1))
    RateCardEntryFactory(rate_card=card, price=Decimal("0.013"))
    AllocationFactory(
        team=team, card_count=1, gpu_model=GpuModel.objects.get(slug="l40s"),
        status=AllocationStatus.ACTIVE, starts_at=DEC_1, ends_at=datetime(2026, 12, 21, tzinfo=UTC),
    )  # fmt: skip
    forecasts = []
    for hour in (11, 12):
        now = datetime(2026, 12, 2, hour, tzinfo=UTC)
        usage_import_reservations(start=DEC_1, end=now, now=now)
        cost = teams_cost_so_far(team_ids=[team.pk], now=now)[team.pk]
        forecasts.append((cost.to_date, cost.forecast))
    assert forecasts == [(Decimal("0.46"), Decimal("6.24")), (Decimal("0.47"), Decimal("6.24"))]


def test_between_two_imports_the_forecast_counts_from_where_the_import_stopped(team):
    """2 L40S reserved 1 Dec 00:00 -> 21 Dec 00:00 (480 h) at 1.25 EUR a card-hour; the hourly
    reservation import last ran at 10 Dec 12:00 and it is now 12:40. To date: 2 × 228 h = 456
    card-h × 1.25 = 570.00 (the import's). Ahead from 12:00, where that import stopped, to 21 Dec
    00:00: 252 h × 2 = 504 card-h × 1.25 = 630.00; forecast 1,200.00 = 960 card-h × 1.25, the
    month's reserved line. Counted from now (12:40) it was 503.333 card-h, 629.17: 1,199.17,
    the 40 minutes since the import counted nowhere.

    A second allocation, 1 L40S 10 Dec 12:10 -> 11 Dec 00:10, started after that import, so it
    has no record yet: all of it is ahead, 1 × 12 h = 12 card-h × 1.25 = 15.00 (from now: 11.333
    card-h, 14.17). Forecast 1,215.00 (ahead 516 card-h)."""
    card = RateCardFactory(effective_from=date(2026, 12, 1))
    RateCardEntryFactory(rate_card=card, price=Decimal("1.25"))
    l40s = GpuModel.objects.get(slug="l40s")
    AllocationFactory(
        team=team, card_count=2, gpu_model=l40s, status=AllocationStatus.ACTIVE,
        starts_at=DEC_1, ends_at=datetime(2026, 12, 21, tzinfo=UTC),
    )  # fmt: skip
    usage_import_reservations(start=DEC_1, end=NOW, now=NOW)
    now = datetime(2026, 12, 10, 12, 40, tzinfo=UTC)

    cost = teams_cost_so_far(team_ids=[team.pk], now=now)[team.pk]
    assert (cost.to_date, cost.reserved_ahead_card_hours, cost.forecast) == (
        Decimal("570.00"), Decimal(504), Decimal("1200.00"),
    )  # fmt: skip

    AllocationFactory(
        team=team, card_count=1, gpu_model=l40s, status=AllocationStatus.ACTIVE,
        starts_at=datetime(2026, 12, 10, 12, 10, tzinfo=UTC),
        ends_at=datetime(2026, 12, 11, 0, 10, tzinfo=UTC),
    )  # fmt: skip
    cost = teams_cost_so_far(team_ids=[team.pk], now=now)[team.pk]
    assert (cost.to_date, cost.reserved_ahead_card_hours, cost.forecast) == (
        Decimal("570.00"), Decimal(516), Decimal("1215.00"),
    )  # fmt: skip


def test_an_import_run_past_now_is_not_counted_again(team):
    """The import ran with its clock at 13:00 and the page asks at 12:40 (another host's
    clock): to date 2 × 229 h = 458 card-h × 1.25 = 572.50; ahead from 13:00: 251 h × 2 = 502
    card-h × 1.25 = 627.50; forecast 1,200.00 again (from now: 503.333 card-h, 629.17, the 20
    minutes counted twice: 1,201.67)."""
    card = RateCardFactory(effective_from=date(2026, 12, 1))
    RateCardEntryFactory(rate_card=card, price=Decimal("1.25"))
    AllocationFactory(
        team=team, card_count=2, gpu_model=GpuModel.objects.get(slug="l40s"),
        status=AllocationStatus.ACTIVE, starts_at=DEC_1, ends_at=datetime(2026, 12, 21, tzinfo=UTC),
    )  # fmt: skip
    at = datetime(2026, 12, 10, 13, tzinfo=UTC)
    usage_import_reservations(start=DEC_1, end=at, now=at)

    now = datetime(2026, 12, 10, 12, 40, tzinfo=UTC)
    cost = teams_cost_so_far(team_ids=[team.pk], now=now)[team.pk]
    assert (cost.to_date, cost.reserved_ahead_card_hours, cost.forecast) == (
        Decimal("572.50"), Decimal(502), Decimal("1200.00"),
    )  # fmt: skip
