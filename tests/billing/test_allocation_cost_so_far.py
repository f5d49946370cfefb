"""An allocation's reserved cost so far (issue #37), on its page and in its API: reserved
card-hours held to now × the rate card's reserved price; unknown, with the reason, never 0."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from unittest import mock

import pytest
from factories import (
    AllocationFactory,
    IdleFindingFactory,
    RateCardEntryFactory,
    RateCardFactory,
)

from billing.dashboards.costs import allocations_cost_so_far, teams_cost_so_far
from billing.services.statements import statement_build
from billing.services.usage_import import usage_import_reservations
from pools.common.choices import AllocationStatus, PricingMethod
from pools.inventory.models import GpuModel
from pools.reclamation.services.scan import allocation_reclaim

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 10, 12, 0, tzinfo=UTC)
DEC_1 = datetime(2026, 12, 1, tzinfo=UTC)
DEC_21 = datetime(2026, 12, 21, tzinfo=UTC)


@pytest.fixture
def card():
    card = RateCardFactory(effective_from=date(2026, 12, 1))
    RateCardEntryFactory(rate_card=card, price=Decimal("1.25"))  # L40S
    return card


def l40s_allocation(team, **kw):
    return AllocationFactory(
        team=team,
        card_count=2,
        gpu_model=GpuModel.objects.get(slug="l40s"),
        status=AllocationStatus.ACTIVE,
        starts_at=DEC_1,
        ends_at=DEC_21,
        **kw,
    )


def test_by_hand_and_equal_to_the_statement_path(team, card):
    """2 L40S from 1 Dec 00:00 to now 10 Dec 12:00 = 9.5 days × 24 h = 228 h × 2 cards = 456
    card-h × 1.25 EUR = 570.00 EUR — the same as the team's month to date through the
    statements' lines after the hourly reservation import (its only allocation)."""
    allocation = l40s_allocation(team)
    cost = allocations_cost_so_far(allocations=[allocation], now=NOW)[allocation.pk]

    assert cost.card_hours == Decimal(456)
    assert (cost.price_per_card_hour, cost.amount, cost.currency) == (
        Decimal("1.25"),
        Decimal("570.00"),
        "EUR",
    )
    assert cost.reason == ""
    usage_import_reservations(start=DEC_1, end=NOW, now=NOW)
    assert teams_cost_so_far(team_ids=[team.pk], now=NOW)[team.pk].to_date == cost.amount


def test_an_ended_window_counts_to_its_end(team, card):
    """Ended 21 Dec, asked on 28 Dec (same rate card): 20 days × 24 h × 2 = 960 card-h ×
    1.25 = 1200.00 EUR."""
    allocation = l40s_allocation(team)
    allocation.status = AllocationStatus.ENDED
    allocation.save()
    later = datetime(2026, 12, 28, tzinfo=UTC)
    cost = allocations_cost_so_far(allocations=[allocation], now=later)[allocation.pk]
    assert (cost.card_hours, cost.amount) == (Decimal(960), Decimal("1200.00"))


def test_unknown_with_its_reason_never_zero(team, card):
    """H100: the card prices only L40S. No card at all in November. Priced by use."""
    h100 = GpuModel.objects.get(slug="h100_sxm")
    unpriced = l40s_allocation(team)
    unpriced.gpu_model = h100
    unpriced.save()
    by_use = l40s_allocation(team, pricing_method=PricingMethod.USED)
    costs = allocations_cost_so_far(allocations=[unpriced, by_use], now=NOW)

    assert costs[unpriced.pk].amount is None
    assert costs[unpriced.pk].reason == (
        f"the rate card has no reserved card-hour price for {h100.name}"
    )
    assert costs[by_use.pk].amount is None
    assert "not reserved card-hours" in costs[by_use.pk].reason

    november = datetime(2026, 11, 20, tzinfo=UTC)
    early = l40s_allocation(team)
    early.starts_at, early.ends_at = datetime(2026, 11, 19, tzinfo=UTC), DEC_1
    early.save()
    cost = allocations_cost_so_far(allocations=[early], now=november)[early.pk]
    assert (cost.amount, cost.reason) == (None, "no rate card is in force now")
    assert cost.card_hours == Decimal(48)  # 19 -> 20 Nov: 24 h × 2 cards


def test_page_and_api_show_it(team, card, team_member, client, api_as):
    """Same 570.00 EUR on the request page and in ``cost_so_far`` of the allocation's API."""
    allocation = l40s_allocation(team)
    allocation.request.requested_by = team_member
    allocation.request.save()
    client.force_login(team_member)
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        page = client.get(f"/requests/{allocation.request_id}/").content.decode()
        body = api_as(team_member).get(f"/api/v1/allocations/{allocation.pk}/").json()
    assert "570.00" in page and "456.000 reserved card-hours" in page
    assert body["cost_so_far"] == {
        "card_hours": "456.000",
        "price_per_card_hour": "1.25",
        "amount": "570.00",
        "currency": "EUR",
        "reason": None,
    }


def test_page_says_unknown_and_why(team, team_member, client):
    """No rate card at all: *unknown* with the reason, no money figure."""
    allocation = l40s_allocation(team)
    client.force_login(team_member)
    page = client.get(f"/requests/{allocation.request_id}/").content.decode()
    assert "<strong>unknown</strong>" in page and "no rate card is in force now" in page


def test_an_allocation_reads_as_its_statement_line(team, card, team_member, client):
    """2 L40S held 1 Dec 00:00 -> 01:00:45, ended: 2 × 1.0125 h = 2.025 card-h, and so its
    December statement's reserved line (quantities to 3 places). The request page, the team
    dashboard's allocations table and the statement page all read 2.025; the request page
    said 2.02 (or 2.03) and the dashboard 2.0."""
    allocation = l40s_allocation(team)
    allocation.status = AllocationStatus.ENDED
    allocation.ends_at = DEC_1 + timedelta(hours=1, seconds=45)
    allocation.save()
    allocation.request.requested_by = team_member
    allocation.request.save()
    usage_import_reservations(start=DEC_1, end=NOW, now=NOW)
    statement = statement_build(team=team, month=date(2026, 12, 1), now=NOW)
    [line] = statement.lines.all()
    assert (line.quantity, line.unit) == (Decimal("2.025"), "card-hours")
    client.force_login(team_member)

    with mock.patch("django.utils.timezone.now", return_value=NOW):
        request_page = client.get(f"/requests/{allocation.request_id}/").content.decode()
        dashboard = client.get("/teams/nlp/dashboard/").content.decode()
        statement_page = client.get("/costs/nlp/2026-12/").content.decode()

    assert "2.025 reserved card-hours" in request_page
    row = dashboard[dashboard.index(f"/requests/{allocation.request_id}/") :]
    assert '<td class="num">2.025</td>' in row[: row.index("</tr>")]
    assert '<td class="num">2.025</td>' in statement_page


def _shrunk_at_noon(team):
    """4 L40S 10 Dec 10:00 -> 20:00, reclaimed down to 1 card at 12:00 by the
    idle scan's one reclaim path."""
    allocation = AllocationFactory(
        team=team, card_count=4, gpu_model=GpuModel.objects.get(slug="l40s"),
        status=AllocationStatus.ACTIVE, starts_at=NOW.replace(hour=10),
        ends_at=NOW.replace(hour=20),
    )  # fmt: skip
    finding = IdleFindingFactory(allocation=allocation, first_seen_at=NOW.replace(hour=11))
    reclaimed = allocation_reclaim(
        finding, allocation, keep=1, why="idle", now=NOW.replace(hour=12), actor=None
    )
    assert reclaimed is not None
    allocation.refresh_from_db()
    assert allocation.card_count == 1
    return allocation


def test_a_shrink_keeps_the_cards_held_before_it(team, card):
    """At 14:00: 4 cards 10:00 -> 12:00 (8 card-h) + 1 card 12:00 -> 14:00 (2) = 10 card-h ×
    1.25 EUR = 12.50 EUR (the latest count alone read 4 card-h, 5.00 EUR) — what the
    reservation import charges the team for the same hours."""
    allocation = _shrunk_at_noon(team)
    two_pm = NOW.replace(hour=14)
    cost = allocations_cost_so_far(allocations=[allocation], now=two_pm)[allocation.pk]

    assert (cost.card_hours, cost.amount, cost.currency) == (Decimal(10), Decimal("12.50"), "EUR")
    usage_import_reservations(start=DEC_1, end=two_pm, now=two_pm)
    assert teams_cost_so_far(team_ids=[team.pk], now=two_pm)[team.pk].to_date == Decimal("12.50")


def test_after_the_window_a_shrink_still_counts_its_cards_before(team, card):
    """Asked after the window (22:00): 4 × 2 + 1 × 8 = 16 card-h × 1.25 = 20.00 EUR."""
    allocation = _shrunk_at_noon(team)
    cost = allocations_cost_so_far(allocations=[allocation], now=NOW.replace(hour=22))
    assert (cost[allocation.pk].card_hours, cost[allocation.pk].amount) == (
        Decimal(16),
        Decimal("20.00"),
    )
