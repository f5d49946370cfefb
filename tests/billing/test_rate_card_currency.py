"""A month is billed in one currency: a rate card that would share a month with a card of
another currency is refused at creation (h-small found the team dashboard a 500 for such a
month; the statements refuse to price it)."""

from __future__ import annotations

from datetime import date

import pytest

from billing.models import RateCard
from billing.services.rates import rate_card_create
from pools.common.errors import InvalidInput

pytestmark = pytest.mark.django_db


def test_a_card_of_another_currency_from_the_middle_of_a_month_is_refused():
    rate_card_create(name="EUR 2026", currency="EUR", effective_from=date(2026, 1, 1))

    with pytest.raises(InvalidInput) as refused:
        rate_card_create(name="USD", currency="USD", effective_from=date(2026, 3, 15))

    assert list(refused.value.data["errors"]) == ["currency"]
    assert "2026-03" in refused.value.data["errors"]["currency"][0]
    assert list(RateCard.objects.values_list("name", flat=True)) == ["EUR 2026"]


def test_a_card_of_another_currency_ending_inside_a_later_cards_month_is_refused():
    rate_card_create(name="EUR from May", currency="EUR", effective_from=date(2026, 5, 10))

    with pytest.raises(InvalidInput) as refused:  # in force 1 Apr to 10 May: shares May
        rate_card_create(name="USD April", currency="USD", effective_from=date(2026, 4, 1))

    assert "2026-05" in refused.value.data["errors"]["currency"][0]
    assert RateCard.objects.count() == 1


def test_a_new_currency_from_the_first_of_a_month_is_kept():
    rate_card_create(name="EUR", currency="EUR", effective_from=date(2026, 1, 1))
    rate_card_create(name="USD", currency="USD", effective_from=date(2026, 4, 1))

    assert RateCard.objects.count() == 2
