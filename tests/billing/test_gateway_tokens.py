"""Issue 18, kind 5: token usage as gateways really send it.

Sources (data facts only):

* vllm-project/vllm#7262: with ``stream_options.include_usage`` (and ``continuous_usage_stats``)
  every chunk carried a running total: ``prompt_tokens=16, completion_tokens=0``, then
  ``16, 1``, ... — the last one is the request's total.
* tjardoo/openai-client#140: with ``include_usage`` alone "the final chunk (and only the final
  one) will have the usage of the total request".
* vllm-project/vllm#7299 and #6083: streamed responses with ``usage=None`` in every chunk (no
  ``stream_options``): the request's tokens are unknown.
* BerriAI/litellm#8570 and #39057: on a cache hit LiteLLM logs ``response_cost 0.0`` but the
  token columns replay the original usage (``completion_tokens=50, prompt_tokens=10``).
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from billing.models import UsageRecord
from billing.selectors import tokens_toward_quota
from billing.services.statements import statement_build
from billing.services.tokens import usage_tokens_ingest

OCT = date(2026, 10, 1)
BASE = {"team": "nlp", "served_model": "qwen", "timestamp": "2026-10-05T10:00:00+00:00"}


def rows():
    return sorted(
        UsageRecord.objects.values_list("source_id", "basis", "unit", "quantity"),
    )


def chunk(prompt, completion):
    return {"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                     "total_tokens": prompt + completion}}  # fmt: skip


def test_running_totals_in_every_chunk_are_billed_once_from_the_last(team, rates):
    chunks = [chunk(16, 0), chunk(16, 1), chunk(16, 2), {"choices": [], "usage": None}]
    result = usage_tokens_ingest(records=[{**BASE, "idempotency_key": "s1", "chunks": chunks}])
    assert (result.accepted, result.rejected) == (1, [])
    assert rows() == [
        ("s1:input-tokens", "tokens", "input-tokens", Decimal("16")),  # not 48
        ("s1:output-tokens", "tokens", "output-tokens", Decimal("2")),  # not 3
    ]


def test_usage_only_in_the_final_chunk_with_cached_prompt_tokens(team, rates):
    final = {"choices": [], "usage": {"prompt_tokens": 120, "completion_tokens": 8,
                                      "prompt_tokens_details": {"cached_tokens": 100}}}  # fmt: skip
    chunks = [{"choices": [{"delta": {"content": "Hi"}}], "usage": None}, final]
    usage_tokens_ingest(records=[{**BASE, "idempotency_key": "s2", "chunks": chunks}])
    assert [(u, q) for _, _, u, q in rows()] == [
        ("cached-input-tokens", Decimal("100")),
        ("input-tokens", Decimal("20")),
        ("output-tokens", Decimal("8")),
    ]


@pytest.mark.parametrize(
    "usage",
    [
        {"chunks": [{"choices": [], "usage": None}, {"choices": [], "usage": None}]},
        {"usage": None},
        {},
    ],
    ids=["stream-without-usage", "null-usage", "no-usage-field"],
)
def test_a_request_without_usage_is_one_unmetered_request_never_zero_tokens(team, rates, usage):
    result = usage_tokens_ingest(records=[{**BASE, "idempotency_key": "u1", **usage}])
    assert (result.accepted, result.rejected) == (1, [])
    assert rows() == [("u1:unmetered-requests", "tokens", "unmetered-requests", Decimal("1"))]
    statement = statement_build(team=team, month=OCT)
    assert statement.total_amount == Decimal("0.00")
    assert [w["code"] for w in statement.warnings] == ["unmetered_requests"]
    assert statement.warnings[0]["requests"] == "1.000000"


def test_unreadable_usage_is_rejected_with_its_field(team, rates):
    result = usage_tokens_ingest(
        records=[
            {**BASE, "idempotency_key": "b1", "usage": {"prompt_tokens": "ten"}},
            {**BASE, "idempotency_key": "b2", "chunks": "data: {...}"},
            {**BASE, "idempotency_key": "b3", "usage": None, "cache_hit": "yes"},
        ]
    )
    assert [r["error"].split(":")[0].split(" ")[0] for r in result.rejected] == [
        "prompt_tokens",
        "chunks",
        "cache_hit",
    ]
    assert not UsageRecord.objects.exists()


def cache_hit(key):
    # litellm#8570: the replayed usage (10 prompt + 50 completion tokens) x 100,000
    usage = {"prompt_tokens": 1_000_000, "completion_tokens": 5_000_000}
    return {**BASE, "idempotency_key": key, "usage": usage, "cache_hit": True}


def test_replayed_tokens_are_kept_apart_and_shown_free_by_default(team, rates):
    usage_tokens_ingest(
        records=[
            cache_hit("c1"),
            {**BASE, "idempotency_key": "g1", "prompt_tokens": 1_000_000,
             "completion_tokens": 1_000_000},
        ]
    )  # fmt: skip
    assert {(sid, basis) for sid, basis, _, _ in rows()} == {
        ("c1:input-tokens", "replayed"),
        ("c1:output-tokens", "replayed"),
        ("g1:input-tokens", "tokens"),
        ("g1:output-tokens", "tokens"),
    }
    statement = statement_build(team=team, month=OCT)
    got = [(x.basis, x.unit, x.quantity, x.amount) for x in statement.lines.order_by("position")]
    # GPU-backed: 1e6 x 2.00/1e6 + 1e6 x 8.00/1e6 = 10.00; replayed shown at 0
    assert got == [
        ("tokens", "input-tokens", 1_000_000, Decimal("2.00")),
        ("tokens", "output-tokens", 1_000_000, Decimal("8.00")),
        ("replayed", "input-tokens", 1_000_000, Decimal("0.00")),
        ("replayed", "output-tokens", 5_000_000, Decimal("0.00")),
    ]
    assert statement.total_amount == Decimal("10.00")
    assert tokens_toward_quota(team_id=team.pk, month=OCT) == {"qwen": 2_000_000}


def test_a_rate_card_may_charge_replays_and_count_them_to_quota(team, rates):
    rates.replayed_tokens_charged = True
    rates.replayed_tokens_count_to_quota = True
    rates.save()
    usage_tokens_ingest(records=[cache_hit("c2")])
    statement = statement_build(team=team, month=OCT)
    # 1e6 x 2.00/1e6 + 5e6 x 8.00/1e6 = 2.00 + 40.00
    assert statement.total_amount == Decimal("42.00")
    assert tokens_toward_quota(team_id=team.pk, month=OCT) == {"qwen": 6_000_000}


def test_the_api_takes_streams_and_the_costs_page_shows_unmetered_requests(
    admin_api, team, team_member, rates, client
):
    stream = [chunk(16, 0), chunk(16, 1), chunk(16, 2)]  # vllm#7262's running totals
    records = [
        {**BASE, "idempotency_key": "a1", "chunks": stream},
        {**BASE, "idempotency_key": "a2", "chunks": [{"choices": [], "usage": None}]},
        cache_hit("a3"),
    ]
    answer = admin_api.post("/api/v1/usage/tokens/", {"records": records}, format="json")
    assert answer.json() == {"accepted": 3, "duplicates": 0, "rejected": []}
    assert sorted(UsageRecord.objects.values_list("basis", "unit", "quantity")) == [
        ("replayed", "input-tokens", Decimal("1000000")),
        ("replayed", "output-tokens", Decimal("5000000")),
        ("tokens", "input-tokens", Decimal("16")),
        ("tokens", "output-tokens", Decimal("2")),
        ("tokens", "unmetered-requests", Decimal("1")),
    ]
    statement_build(team=team, month=OCT)
    client.force_login(team_member)
    page = client.get("/costs/nlp/2026-10/").content.decode()
    assert "Unmetered: 1 request(s) to qwen" in page
