"""The token-flow page and API: figures, prices, order, pages, CSV, who sees what.

Tasks A (12 calls, 7 retries) and B (4 calls) as in ``tests/pools/tokenflow/test_services.py``
(A: input 88,800 of which 24,000 cached, output 1,800; wasted input 49,000 of which 14,000
cached, wasted output 1,050. B: input 16,800 of which 8,000 cached, output 600, nothing
wasted). Prices of the ``rates`` card for ``qwen``, per million tokens: input 2.00, cached 0.50,
output 8.00 EUR. Cost = ((input − cached) × 2.00 + cached × 0.50 + output × 8.00) ÷ 10⁶:

* A: (64,800 × 2 + 24,000 × 0.5 + 1,800 × 8) ÷ 10⁶ = (129,600 + 12,000 + 14,400) ÷ 10⁶
  = 0.156 → 0.16 EUR; wasted (35,000 × 2 + 14,000 × 0.5 + 1,050 × 8) ÷ 10⁶
  = (70,000 + 7,000 + 8,400) ÷ 10⁶ = 0.0854 → 0.09 EUR;
* B: (8,800 × 2 + 8,000 × 0.5 + 600 × 8) ÷ 10⁶ = (17,600 + 4,000 + 4,800) ÷ 10⁶ = 0.0264
  → 0.03 EUR; wasted 0;
* together 0.1824 → 0.18 EUR, wasted 0.0854 → 0.09 EUR (each total rounded once).
"""

from __future__ import annotations

import csv
import io

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from tokenflow_support import task_a, task_b, task_records

from billing.services.tokens import usage_tokens_ingest
from pools.tokenflow.models import AgentTask

DAY = "since=2026-12-01&until=2026-12-01"
URL = "/costs/token-flow/nlp/"
API = "/api/v1/token-flow/tasks/"


@pytest.fixture
def flow(team, rates):
    usage_tokens_ingest(records=task_a() + task_b())
    return team


def test_page_shows_the_figures(flow, team_member, client):
    client.force_login(team_member)

    response = client.get(f"{URL}?{DAY}")

    assert response.status_code == 200
    summary, money = response.context["summary"], response.context["money"]
    assert (summary.tasks, summary.calls, summary.calls_per_task_mean) == (2, 16, 8.0)
    assert summary.bars == [(str(n), 1 if n == 4 else 0) for n in range(1, 12)] + [("12", 1)]
    assert (summary.wasted_calls, summary.retry_share) == (7, 7 / 16)
    assert summary.input_tokens_per_call == 105_600 / 16
    assert summary.latency_mean_s == (12 * 2.0 + 4 * 1.0) / 16
    assert (str(money.cost), str(money.wasted_cost), money.currency) == ("0.18", "0.09", "EUR")
    tasks = response.context["page"].object_list
    assert [(t.task_id, str(t.cost_rounded), str(t.wasted_rounded)) for t in tasks] == [
        ("A", "0.16", "0.09"), ("B", "0.03", "0.00")]  # fmt: skip
    body = response.content.decode()
    assert "0.09\xa0EUR" in body and "7 retries, 0 errors" in body
    assert 'id="token-flow-chart-data"' in body


def test_page_sorts_and_pages(flow, team_member, client):
    client.force_login(team_member)

    oldest = client.get(f"{URL}?{DAY}&ordering=first_call_at", HTTP_HX_REQUEST="true")
    assert [t.task_id for t in oldest.context["page"].object_list] == ["A", "B"]  # same time: pk
    usage_tokens_ingest(records=[task_records(f"T{n}", 1, key=f"t{n}")[0] for n in range(60)])
    second = client.get(f"{URL}?{DAY}&ordering=-calls&page=2&page_size=25")
    page = second.context["page"]
    assert (page.paginator.count, page.number, len(page.object_list)) == (62, 2, 25)


def test_csv_lists_every_task_with_money(flow, team_member, client):
    client.force_login(team_member)

    response = client.get(f"{URL}?{DAY}&export=csv")

    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [(r["task_id"], r["calls"], r["retries"], r["cost"], r["wasted_cost"], r["currency"])
            for r in rows] == [("A", "12", "7", "0.16", "0.09", "EUR"),
                               ("B", "4", "0", "0.03", "0.00", "EUR")]  # fmt: skip
    assert rows[0]["mean_latency_s"] == "2.000"


def test_a_model_without_a_token_price_is_unknown_not_free(team, rates, team_member, client):
    records = task_b()
    for r in records:
        r["served_model"] = "no-price"
    usage_tokens_ingest(records=records)
    client.force_login(team_member)

    response = client.get(f"{URL}?{DAY}")

    money = response.context["money"]
    assert (money.cost, money.wasted_cost, money.unpriced_tasks) == (None, None, 1)
    assert response.context["page"].object_list[0].cost_rounded is None
    assert "without a token price" in response.content.decode()


def test_other_teams_and_anonymous_see_nothing(flow, other_member, client):
    client.force_login(other_member)
    assert client.get(URL).status_code == 404
    assert client.get("/costs/token-flow/no-such-team/").status_code == 404
    client.logout()
    assert client.get(URL).status_code == 302  # to the sign-in page


def test_bad_filters_are_field_errors_over_no_rows(flow, team_member, client):
    client.force_login(team_member)

    response = client.get(f"{URL}?since=2026-12-02&until=2026-12-01")

    assert response.status_code == 400
    message = "Must be on or after the “First call from” day."
    assert response.context["form"].errors == {"until": [message]}
    # The refusal names the field by the label the page shows next to it.
    assert response.context["refusal"] == f'First call until "2026-12-01": {message}'
    assert "<label>First call until <input" in response.content.decode()
    assert response.context["page"].paginator.count == 0


def test_a_csv_of_bad_filters_says_why_not_a_header_only_csv(flow, team_member, client):
    client.force_login(team_member)

    response = client.get(f"{URL}?since=2026-12-02&until=2026-12-01&export=csv")

    assert response.status_code == 400
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content.decode() == (
        'The filters are invalid: First call until "2026-12-01": '
        "Must be on or after the “First call from” day.\n"
    )


def test_api_lists_tasks_costliest_first(flow, team_member, api_as):
    response = api_as(team_member).get(f"{API}?team=nlp&{DAY}")

    assert response.status_code == 200
    got = [(t["task_id"], t["calls"], t["retries"], t["cost"], t["wasted_cost"], t["currency"])
           for t in response.json()["results"]]  # fmt: skip
    assert got == [("A", 12, 7, "0.16", "0.09", "EUR"), ("B", 4, 0, "0.03", "0.00", "EUR")]
    first = response.json()["results"][0]
    assert (first["first_call_input_tokens"], first["last_call_input_tokens"]) == (3000, 11800)
    assert first["mean_latency_s"] == 2.0


def test_api_summary_and_calls(flow, team_member, api_as):
    client = api_as(team_member)

    summary = client.get(f"{API}summary/?team=nlp&{DAY}").json()
    assert (summary["tasks"], summary["calls"], summary["wasted_calls"]) == (2, 16, 7)
    assert summary["calls_per_task"] == {"4": 1, "12": 1}
    assert (summary["cost"], summary["wasted_cost"], summary["currency"]) == ("0.18", "0.09", "EUR")
    assert summary["cached_share"] == pytest.approx(32_000 / 105_600)

    task = client.get(f"{API}?team=nlp&{DAY}").json()["results"][0]
    calls = client.get(f"{API}{task['id']}/calls/").json()["results"]
    assert [(c["call_index"], c["input_tokens"], c["outcome"]) for c in calls[:4]] == [
        (1, 3000, "ok"), (2, 3800, "ok"), (3, 4600, "retry"), (4, 5400, "retry")]  # fmt: skip
    detail = client.get(f"{API}{task['id']}/").json()
    assert (detail["task_id"], detail["cost"]) == ("A", "0.16")


def test_api_hides_other_teams(flow, other_member, api_as):
    client = api_as(other_member)

    assert client.get(f"{API}?{DAY}").json()["results"] == []
    assert client.get(f"{API}?team=nlp").status_code == 400
    task = AgentTask.objects.first()
    assert client.get(f"{API}{task.pk}/").status_code == 404
    assert client.get(f"{API}{task.pk}/calls/").status_code == 404


def test_api_bad_filter_is_invalid_input(flow, team_member, api_as):
    response = api_as(team_member).get(f"{API}?since=2026-13-01")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    assert "since" in response.json()["errors"]


def test_summary_counts_whole_days_of_first_calls(flow, team_member, api_as):
    """C (four calls, like B but tool returns of 800 and 2 s steps) first called on 12-02:
    cost (8,800 × 2 + 8,000 × 0.5 + 600 × 8) ÷ 10⁶ = 0.0264 EUR. 12-02 alone: C, 0.03 EUR;
    12-01 alone: A and B as before, 0.18 EUR; both days: 0.1824 + 0.0264 = 0.2088 → 0.21 EUR."""
    records = task_records("C", 4, key="c")
    for record in records:
        record["timestamp"] = record["timestamp"].replace("2026-12-01", "2026-12-02")
    usage_tokens_ingest(records=records)
    client = api_as(team_member)

    def summary(since: str, until: str) -> tuple:
        body = client.get(f"{API}summary/?team=nlp&since={since}&until={until}").json()
        return body["tasks"], body["calls"], body["calls_per_task"], body["cost"]

    assert summary("2026-12-02", "2026-12-02") == (1, 4, {"4": 1}, "0.03")
    assert summary("2026-12-01", "2026-12-01") == (2, 16, {"4": 1, "12": 1}, "0.18")
    assert summary("2026-12-01", "2026-12-02") == (3, 20, {"4": 2, "12": 1}, "0.21")


def test_page_queries_do_not_grow_with_tasks_or_days(flow, team_member, client):
    """The page reads the per-day rollup for its figures and one page of tasks: as many
    queries with A and B on one day as with ten more four-call tasks over ten more days."""
    client.force_login(team_member)
    url = f"{URL}?since=2026-11-20&until=2026-12-01"
    client.get(url)  # warm the session and caches
    with CaptureQueriesContext(connection) as few:
        assert client.get(url).status_code == 200
    for n in range(1, 11):
        records = task_records(f"T{n}", 4, key=f"t{n}")
        for record in records:
            record["timestamp"] = record["timestamp"].replace("2026-12-01", f"2026-11-{20 + n}")
        usage_tokens_ingest(records=records)

    with CaptureQueriesContext(connection) as many:
        response = client.get(url)

    assert response.context["summary"].tasks == 2 + 10
    assert len(many.captured_queries) == len(few.captured_queries)


@pytest.mark.parametrize("field", ["since", "until"])
@pytest.mark.parametrize(
    "value", ["0001-01-01T00:00:00Z", "9999-12-31", "1999-12-31T23:59:59+01:00"]
)
def test_api_dates_out_of_range_say_the_range(flow, team_member, api_as, field, value):
    """A day before 2000-01-01 or after 2100-12-31 is refused with the range, whether given
    as a day or as an instant (read by the day it names), for either end of the window."""
    response = api_as(team_member).get(f"{API}?{field}={value.replace('+', '%2B')}")

    assert response.status_code == 400
    assert response.json()["errors"] == {field: ["Dates run from 2000-01-01 to 2100-12-31."]}


def test_api_an_instant_filters_by_the_day_it_names(flow, team_member, api_as):
    """Both tasks are first called on 2026-12-01: an instant on that day selects that day."""
    response = api_as(team_member).get(
        f"{API}?team=nlp&since=2026-12-01T23:00:00Z&until=2026-12-01T00:00:00Z"
    )

    assert response.status_code == 200
    assert [t["task_id"] for t in response.json()["results"]] == ["A", "B"]
