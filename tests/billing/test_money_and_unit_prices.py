"""Money and unit prices as people read them (issue #21): the currency on every amount, one
grouping, prices with the unit they are quoted in, and CSV columns that multiply back."""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime
from decimal import ROUND_HALF_UP, Decimal

import pytest

from billing.pricing import format_money, price_unit, priced_quantity
from billing.services.statements import statement_build

pytestmark = pytest.mark.django_db

OCT = date(2026, 10, 1)


def test_format_money_groups_thousands_and_names_the_currency():
    assert format_money(Decimal("9166.2666"), "EUR") == "9\u202f166.27\u00a0EUR"
    assert format_money(Decimal("9618.725"), "EUR") == "9\u202f618.73\u00a0EUR"  # half-up
    assert format_money(Decimal("1234567.5"), "JPY") == "1\u202f234\u202f568\u00a0JPY"
    assert format_money(Decimal("-0.125"), "EUR") == "-0.13\u00a0EUR"


def test_prices_are_per_card_hour_or_per_million_tokens():
    assert price_unit("card-hours") == "card-hour"
    assert price_unit("input-tokens") == "1M input tokens"
    assert price_unit("cached-input-tokens") == "1M cached input tokens"
    assert priced_quantity(Decimal(534_907_485), "input-tokens") == Decimal("534.907485")
    assert priced_quantity(Decimal("12.5"), "card-hours") == Decimal("12.5")


@pytest.fixture
def token_statement(team, rates):
    """534,907,485 input tokens of ``qwen`` at 2.00 EUR per million in October."""
    from django.utils import timezone

    from billing.choices import ChargeBasis, UsageSource, UsageUnit
    from billing.models import UsageRecord

    now = timezone.now()
    UsageRecord.objects.create(
        team=team, served_model="qwen", quantity=Decimal(534_907_485),
        unit=UsageUnit.INPUT_TOKENS, basis=ChargeBasis.TOKENS, month=OCT,
        period_start=datetime(2026, 10, 1, tzinfo=UTC),
        period_end=datetime(2026, 10, 2, tzinfo=UTC),
        source=UsageSource.TOKEN_API, source_id="tokens-1", created_at=now, updated_at=now,
    )  # fmt: skip
    return statement_build(team=team, month=OCT)


def test_a_token_line_reads_per_million_on_the_page_and_multiplies_back_in_the_csv(
    token_statement, team_member, client
):
    # 534.907485 M tokens × 2.00 EUR = 1,069.81497 EUR -> 1,069.81 EUR
    (line,) = token_statement.lines.all()
    assert line.amount == Decimal("1069.81")
    client.force_login(team_member)

    page = client.get("/costs/nlp/2026-10/").content.decode()
    csv_text = client.get("/costs/nlp/2026-10/?export=csv").content.decode()

    assert "2.00\u00a0EUR / 1M input tokens" in page
    assert "1\u202f069.81\u00a0EUR" in page
    (row,) = list(csv.DictReader(io.StringIO(csv_text)))
    assert (row["price_unit"], row["priced_quantity"], row["currency"]) == (
        "1M input tokens",
        "534.907485",
        "EUR",
    )
    product = Decimal(row["priced_quantity"]) * Decimal(row["unit_price"])
    assert product.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP) == Decimal(row["amount"])
