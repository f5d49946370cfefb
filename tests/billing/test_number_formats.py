"""Money and quantities as the house format writes them (README "Every amount shows its
currency in one format"): unit prices to the minor unit or finer ("1.90 EUR"), quantities to 3
places, no negative zero, and the API's statement money to the currency's minor unit."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from unittest import mock

import pytest
from factories import AllocationFactory, RateCardEntryFactory, RateCardFactory

from billing.api.views import MinorUnitMoneyField
from billing.dashboards.costs import AllocationCost
from billing.elastic_costs import DecisionMoney
from billing.pricing import quantity_places
from pools.common.choices import AllocationStatus
from pools.inventory.models import GpuModel

NOW = datetime(2026, 12, 10, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "price,currency,text",
    [
        (Decimal("1.900000"), "EUR", "1.90\u00a0EUR"),
        (Decimal("0.012500"), "EUR", "0.0125\u00a0EUR"),
        (Decimal("1250"), "EUR", "1\u202f250.00\u00a0EUR"),
        (Decimal("300"), "JPY", "300\u00a0JPY"),
    ],
)
def test_an_allocations_price_per_card_hour_as_pages_show_unit_prices(price, currency, text):
    cost = AllocationCost(Decimal(10), price, currency, Decimal(19))
    assert cost.price_text == text
    assert cost.price_plain == format(price.normalize(), "f")  # the API and CSV keep it plain


@pytest.mark.django_db
def test_the_request_page_shows_the_price_to_the_cent(team, team_member, client):
    """2 L40S from 1 Dec 00:00 at 1.9 EUR: 2 x 228 h = 456 card-h x 1.9 = 866.40 EUR."""
    card = RateCardFactory(effective_from=date(2026, 12, 1))
    RateCardEntryFactory(rate_card=card, price=Decimal("1.9"))
    allocation = AllocationFactory(
        team=team, card_count=2, gpu_model=GpuModel.objects.get(slug="l40s"),
        status=AllocationStatus.ACTIVE, starts_at=datetime(2026, 12, 1, tzinfo=UTC),
        ends_at=datetime(2026, 12, 21, tzinfo=UTC), request__requested_by=team_member,
    )  # fmt: skip
    client.force_login(team_member)
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        page = client.get(f"/requests/{allocation.request_id}/").content.decode()
    page = " ".join(page.replace("\u00a0", " ").replace("\u202f", " ").split())
    assert "866.40 EUR" in page
    assert "456.000 reserved card-hours × 1.90 EUR a card-hour" in page


@pytest.mark.parametrize(
    "cards,hours,text",
    [
        (-2, Decimal("0.000411"), "0.000\u00a0card-h released"),  # a decision moments ago
        (2, Decimal("0.0004"), "0.000\u00a0card-h added"),
        (-2, Decimal("1.5"), "\u22121.500\u00a0card-h released"),
        (4, Decimal("1234.5"), "+1\u202f234.500\u00a0card-h added"),
    ],
)
def test_a_decisions_card_hours_never_read_negative_zero(cards, hours, text):
    assert DecisionMoney(cards, hours, None, None).card_hours_text == text


@pytest.mark.parametrize(
    "unit,places",
    [("gb-months", 3), ("gb", 3), ("card-hours", 3), ("output-tokens", 0)],
)
def test_quantities_are_shown_to_3_places_tokens_whole(unit, places):
    assert quantity_places(unit) == places


@pytest.mark.parametrize(
    "amount,currency,sent",
    [
        (Decimal("1384.4900"), "EUR", "1384.49"),
        (Decimal("-0.0400"), "EUR", "-0.04"),
        (Decimal("1384.0000"), "JPY", "1384"),
        (Decimal("1.2340"), "KWD", "1.234"),
        (None, "EUR", None),
    ],
)
def test_statement_money_is_sent_to_the_minor_unit(amount, currency, sent):
    assert MinorUnitMoneyField().to_representation((amount, currency)) == sent
