"""Bounds on what billing takes in and shows (issue 27, item 6): a token record with an absurd
count or a date outside 2000–2100 is rejected by its index while the rest of the batch is kept;
cost pages and the statement filter refuse months in years 1 and 9999."""

from __future__ import annotations

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
