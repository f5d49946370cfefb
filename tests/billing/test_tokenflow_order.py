"""The task table's costliest-first order by whole numbers (``cost_order_key``): the same order
as the ``numeric`` cost, ties to the newest first call, unknown costs last, and the ``numeric``
cost itself when the rollup's token sums could overflow a 64-bit integer.

Prices of the ``rates`` card for ``qwen`` per million tokens: input 2.00, cached 0.50, output
8.00 EUR, two decimals: whole numbers 200, 50, 800 (x 10²). Tasks on 2026-12-01:

* P 10:00: 1,000,000 input, none cached, no output: 1,000,000 x 2.00 / 10⁶ = 2.00 EUR;
* Q 11:00: 250,000 input, 187,500 output: 0.50 + 1.50 = 2.00 EUR;
* S 12:00: 4,000,000 input all cached: 4,000,000 x 0.50 / 10⁶ = 2.00 EUR;
* R 09:00: 1,000,001 input: 2.000002 EUR, the costliest;
* U 13:00: on ``other``, which has no price: unknown, last.

Costliest first, ties newest first: R, S, Q, P, U.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from django.db.models import F
from factories import AgentTaskDayFactory, AgentTaskFactory

from billing.tokenflow.selectors import cost_order_key, priced_tasks, token_prices
from pools.tokenflow.models import AgentTask, AgentTaskDay

pytestmark = pytest.mark.django_db
SINCE, UNTIL = datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC)


@pytest.fixture
def tasks(team, rates):
    for name, hour, model, tokens_in, cached, out in (
        ("P", 10, "qwen", 1_000_000, 0, 0),
        ("Q", 11, "qwen", 250_000, 0, 187_500),
        ("S", 12, "qwen", 4_000_000, 4_000_000, 0),
        ("R", 9, "qwen", 1_000_001, 0, 0),
        ("U", 13, "other", 1_000_000, 0, 0),
    ):
        AgentTaskFactory(
            team=team,
            task_id=name,
            served_model=model,
            first_call_at=datetime(2026, 12, 1, hour, tzinfo=UTC),
            input_tokens=tokens_in,
            cached_tokens=cached,
            output_tokens=out,
        )
    AgentTaskDayFactory(team=team, served_model="qwen", day=date(2026, 12, 1), task_calls=1,
                        tasks=4, input_tokens=6_250_001, cached_tokens=4_000_000,
                        output_tokens=187_500)  # fmt: skip
    return team


def _ordered(key, team):
    prices = token_prices(since=SINCE, until=UNTIL)
    priced = priced_tasks(AgentTask.objects.filter(team=team), prices=prices,
                          models=["qwen", "other"])  # fmt: skip
    rows = priced.order_by(key.desc(nulls_last=True), "-first_call_at", "pk")
    return [t.task_id for t in rows]


def test_costliest_first_by_whole_numbers_is_the_numeric_order(tasks):
    prices = token_prices(since=SINCE, until=UNTIL)
    days = AgentTaskDay.objects.filter(team=tasks)
    key = cost_order_key("cost", prices=prices, models=["qwen", "other"], days=days)

    assert not isinstance(key, F)  # the whole-number key, not the numeric cost
    assert _ordered(key, tasks) == ["R", "S", "Q", "P", "U"]
    assert _ordered(F("cost"), tasks) == ["R", "S", "Q", "P", "U"]


def test_the_numeric_cost_when_the_token_sums_could_overflow(tasks):
    """A rollup row of 2 x 10¹⁶ input tokens: x 800 (the highest whole-number price) is
    1.6 x 10¹⁹, over 2⁶³ - 1 ≈ 9.22 x 10¹⁸: sorted by the numeric cost instead."""
    prices = token_prices(since=SINCE, until=UNTIL)
    AgentTaskDay.objects.filter(team=tasks).update(input_tokens=2 * 10**16)
    days = AgentTaskDay.objects.filter(team=tasks)

    key = cost_order_key("cost", prices=prices, models=["qwen"], days=days)

    assert key == F("cost")
    assert _ordered(key, tasks) == ["R", "S", "Q", "P", "U"]
    assert cost_order_key("calls", prices=prices, models=["qwen"], days=days) == F("calls")


def test_the_api_pages_costliest_first_with_ties_newest_first(tasks, team_member, api_as):
    response = api_as(team_member).get(
        "/api/v1/token-flow/tasks/?team=nlp&since=2026-12-01&until=2026-12-01&page_size=10"
    )

    assert response.status_code == 200
    got = [(t["task_id"], t["cost"]) for t in response.json()["results"]]
    assert got == [("R", "2.00"), ("S", "2.00"), ("Q", "2.00"), ("P", "2.00"), ("U", None)]
