"""A month is billed in one currency: a rate card that would share a month with a card of
another currency is refused at creation, by the service and by the Django admin's add, change
and delete (a month holding two currencies cannot be priced: the statements refuse it and the
pages show it unpriced)."""

from __future__ import annotations

from datetime import date

import pytest
from django.test import Client

from billing.errors import RateCardConflict
from billing.models import RateCard
from billing.services.rates import rate_card_create
from pools.audit.models import AuditEvent
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


# The Django admin writes rate cards too: its form and its delete run the service's own check
# (billing.services.rates.rate_card_check), so no writer can leave a month in two currencies.

_EMPTY_ENTRIES = {
    "entries-TOTAL_FORMS": "0",
    "entries-INITIAL_FORMS": "0",
    "entries-MIN_NUM_FORMS": "0",
    "entries-MAX_NUM_FORMS": "1000",
}


@pytest.fixture
def admin_page(django_user_model):
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("rates", password="pw"))
    return client


def _card_post(name, currency, effective_from, effective_to=""):
    return {
        "name": name,
        "currency": currency,
        "effective_from": effective_from,
        "effective_to": effective_to,
        **_EMPTY_ENTRIES,
    }


def _three_cards():
    """EUR from 1 Jan, USD from 1 Mar, USD from 10 May 2026: March is USD only (EUR ends on its
    first), May is USD only (the two USD cards)."""
    return (
        rate_card_create(name="EUR", currency="EUR", effective_from=date(2026, 1, 1)),
        rate_card_create(name="USD March", currency="USD", effective_from=date(2026, 3, 1)),
        rate_card_create(name="USD May", currency="USD", effective_from=date(2026, 5, 10)),
    )


def test_the_admin_add_page_refuses_a_card_of_another_currency_from_mid_month(admin_page):
    rate_card_create(name="EUR 2026", currency="EUR", effective_from=date(2026, 1, 1))

    response = admin_page.post(
        "/admin/billing/ratecard/add/", _card_post("USD", "USD", "2026-03-15")
    )

    assert response.status_code == 200  # the form again, with its error
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["currency"]
    assert "2026-03" in errors["currency"][0]
    assert "2026-03" in response.content.decode()
    assert list(RateCard.objects.values_list("name", flat=True)) == ["EUR 2026"]
    assert not AuditEvent.objects.filter(action="ratecard.created").exists()


def test_the_admin_add_page_refuses_an_overlap_as_the_service_does(admin_page):
    rate_card_create(
        name="EUR H1", currency="EUR", effective_from=date(2026, 1, 1),
        effective_to=date(2026, 7, 1),
    )  # fmt: skip

    response = admin_page.post(
        "/admin/billing/ratecard/add/", _card_post("EUR spring", "EUR", "2026-04-01")
    )

    assert response.status_code == 200
    assert "overlaps" in response.context["adminform"].form.non_field_errors()[0]
    assert RateCard.objects.count() == 1
    with pytest.raises(RateCardConflict):
        rate_card_create(name="EUR spring", currency="EUR", effective_from=date(2026, 4, 1))
    assert RateCard.objects.count() == 1


def test_the_admin_add_page_keeps_a_new_currency_from_the_first_of_a_month(admin_page):
    rate_card_create(name="EUR", currency="EUR", effective_from=date(2026, 1, 1))

    response = admin_page.post(
        "/admin/billing/ratecard/add/", _card_post("USD", "USD", "2026-04-01")
    )

    assert response.status_code == 302
    assert list(RateCard.objects.values_list("currency", flat=True)) == ["EUR", "USD"]


@pytest.mark.parametrize(
    ("post", "refused_in", "kept"),
    [
        # GBP from 1 Mar to 10 May: May would hold GBP and the USD card from the 10th
        (("USD March", "GBP", "2026-03-01"), "2026-05", ("USD March", "USD", date(2026, 3, 1))),
        # moved to July, the EUR card runs on to 10 May, where the other USD card starts
        (("USD March", "USD", "2026-07-01"), "2026-05", ("USD March", "USD", date(2026, 3, 1))),
        # from April: March is EUR only, April and May USD only
        (("USD from April", "USD", "2026-04-01"), None,
         ("USD from April", "USD", date(2026, 4, 1))),
    ],
    ids=["currency-mixes-may", "move-lets-eur-run-on", "within-the-rules"],
)  # fmt: skip
def test_the_admin_change_page_refuses_only_a_change_that_mixes_a_month(
    admin_page, post, refused_in, kept
):
    """The March card of :func:`_three_cards` changed on the admin's change page: refused
    (the form again, its currency error naming the month) or saved (a redirect)."""
    _eur, march, _may = _three_cards()

    response = admin_page.post(f"/admin/billing/ratecard/{march.pk}/change/", _card_post(*post))

    if refused_in is None:
        assert response.status_code == 302
    else:
        assert response.status_code == 200
        assert refused_in in response.context["adminform"].form.errors["currency"][0]
    march.refresh_from_db()
    assert (march.name, march.currency, march.effective_from) == kept


def test_the_admin_refuses_a_delete_that_lets_the_card_before_run_into_another_currency(
    admin_page,
):
    _eur, march, _may = _three_cards()

    response = admin_page.post(
        f"/admin/billing/ratecard/{march.pk}/delete/", {"post": "yes"}, follow=True
    )

    # without the March card the EUR one runs on to 10 May, where USD starts
    assert "2026-05" in response.content.decode()
    assert RateCard.objects.filter(pk=march.pk).exists()
    assert not AuditEvent.objects.filter(action="ratecard.deleted").exists()


def test_the_admin_deletes_a_card_whose_neighbours_share_its_currency(admin_page):
    _eur, _march, may = _three_cards()

    response = admin_page.post(f"/admin/billing/ratecard/{may.pk}/delete/", {"post": "yes"})

    assert response.status_code == 302
    assert list(RateCard.objects.values_list("name", flat=True)) == ["EUR", "USD March"]
    assert AuditEvent.objects.filter(action="ratecard.deleted", object_id=str(may.pk)).exists()


def test_the_rate_card_list_offers_no_bulk_delete(admin_page):
    response = admin_page.get("/admin/billing/ratecard/")

    assert response.status_code == 200
    assert "delete_selected" not in response.content.decode()
