"""Bounds on what billing takes in and shows (issue 27, item 6): a token record with an absurd
count or a date outside 2000–2100 is rejected by its index while the rest of the batch is kept;
cost pages and the statement filter refuse months in years 1 and 9999."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from billing.models import UsageRecord

pytestmark = pytest.mark.django_db

MAX_TOKENS_PER_RECORD = 100_000_000  # billing.services.tokens: 10 x Llama 4 Scout's 10M context

GOOD = {
    "idempotency_key": "ok",
    "team": "nlp",
    "served_model": "qwen",
    "prompt_tokens": 120,
    "completion_tokens": 8,
    "timestamp": "2026-10-05T10:00:00Z",
}


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ({"prompt_tokens": 10**30}, "prompt_tokens: at most 100,000,000 tokens a record"),
        ({"completion_tokens": MAX_TOKENS_PER_RECORD + 1}, "completion_tokens: at most"),
        ({"timestamp": "0001-01-01T00:00:00Z"}, "timestamp: Dates run from 2000-01-01"),
        ({"timestamp": "9999-12-31T23:00:00+00:00"}, "timestamp: Dates run from 2000-01-01"),
        ({"served_model": "qwen\u202e7b"}, "served_model: no control characters"),
        ({"served_model": "qwen\r\n7b"}, "served_model: no control characters"),
    ],
)
def test_an_out_of_range_record_is_rejected_by_index_and_the_rest_kept(
    admin_api, team, rates, bad, error
):
    """Record 1 is bad, records 0 and 2 are kept: 120 input + 8 output tokens each, so 2 x 2
    usage rows (input-tokens 120, output-tokens 8)."""
    records = [
        GOOD,
        {**GOOD, "idempotency_key": "bad", **bad},
        {**GOOD, "idempotency_key": "ok2"},
    ]
    response = admin_api.post("/api/v1/usage/tokens/", {"records": records}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["accepted"] == 2
    [rejected] = body["rejected"]
    assert (rejected["index"], rejected["idempotency_key"]) == (1, "bad")
    assert rejected["error"].startswith(error)
    assert sorted(UsageRecord.objects.values_list("source_id", "quantity")) == [
        ("ok2:input-tokens", Decimal("120")),
        ("ok2:output-tokens", Decimal("8")),
        ("ok:input-tokens", Decimal("120")),
        ("ok:output-tokens", Decimal("8")),
    ]


def test_a_count_at_the_bound_is_kept(admin_api, team, rates):
    record = {**GOOD, "prompt_tokens": MAX_TOKENS_PER_RECORD, "completion_tokens": 0}
    response = admin_api.post("/api/v1/usage/tokens/", {"records": [record]}, format="json")
    assert response.json() == {"accepted": 1, "duplicates": 0, "rejected": []}


@pytest.mark.parametrize("month", ["0001-01", "9999-12", "1999-12", "2101-01"])
def test_cost_pages_outside_2000_to_2100_are_404(admin_page, team, month):
    assert admin_page.get(f"/costs/finance/{month}/").status_code == 404
    assert admin_page.get(f"/costs/nlp/{month}/").status_code == 404
    assert admin_page.get(f"/costs/?month={month}").status_code == 404


@pytest.mark.parametrize("month", ["2000-01", "2100-12"])
def test_cost_pages_at_the_ends_of_the_range_answer(admin_page, month):
    assert admin_page.get(f"/costs/finance/{month}/").status_code == 200


def test_the_statement_month_filter_refuses_year_9999(admin_api):
    response = admin_api.get("/api/v1/statements/?month=9999-12")
    assert response.status_code == 400
    assert response.json()["errors"]["month"] == ["Dates run from 2000-01-01 to 2100-12-31."]


RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: "2027\u202eetar" shows as "2027rate"


@pytest.fixture
def superuser_page(django_user_model):
    from django.test import Client

    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root", password="pw"))
    return client


@pytest.mark.parametrize("name", [f"Rates{RLO}7202", "Rates\r\n2027", "Rates\u200f2027"])
def test_the_admin_refuses_bidi_marks_and_line_breaks_in_a_rate_card_name(superuser_page, name):
    """The statement PDF names the rate card: one line, left to right, like team names."""
    from billing.models import RateCard

    response = superuser_page.post(
        "/admin/billing/ratecard/add/",
        {
            "name": name,
            "currency": "EUR",
            "effective_from": "2027-01-01",
            "effective_to": "",
            "entries-TOTAL_FORMS": "0",
            "entries-INITIAL_FORMS": "0",
            "entries-MIN_NUM_FORMS": "0",
            "entries-MAX_NUM_FORMS": "1000",
        },
    )

    assert response.status_code == 200  # the form again, with its error
    assert "name" in response.context["adminform"].form.errors
    assert not RateCard.objects.exists()


def test_the_rate_card_service_refuses_a_served_model_with_a_bidi_mark():
    from billing.models import RateCard
    from billing.services.rates import rate_card_create
    from pools.common.errors import InvalidInput

    with pytest.raises(InvalidInput) as refused:
        rate_card_create(
            name="2027",
            currency="EUR",
            effective_from=date(2027, 1, 1),
            token_prices={(f"llama{RLO}b07", "token-input"): Decimal("0.5")},
        )
    assert list(refused.value.data["errors"]) == ["served_model"]
    assert not RateCard.objects.exists()
