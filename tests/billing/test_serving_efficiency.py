"""Serving efficiency in tokens and money: tokens per card-hour, busy share and the cost per
million output tokens priced from the allocation's card-hours at the rate card's reserved
price, worked out by hand; unknown stays unknown; the team dashboard's table and CSV."""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from factories import (
    AllocationFactory,
    RateCardEntryFactory,
    RateCardFactory,
    StatementFactory,
    TeamFactory,
)
from serving_support import StubPrometheus, term

from billing.dashboards.serving import serving_efficiency, serving_groups, serving_rows, sort_rows
from pools.common.choices import AllocationStatus
from pools.serving.models import ServingRollup
from pools.serving.services import bucket_floor, serving_rollup_pass

pytestmark = pytest.mark.django_db
MONTH = date(2026, 11, 1)
HOUR = datetime(2026, 11, 10, 9, 0, tzinfo=UTC)


def serving_allocation(team, *, cards=2):
    """An active allocation of ``team`` through November 2026 (``MID_MONTH`` inside it)."""
    return AllocationFactory(
        team=team,
        card_count=cards,
        status=AllocationStatus.ACTIVE,
        starts_at=datetime(2026, 11, 1, tzinfo=UTC),
        ends_at=datetime(2026, 12, 1, tzinfo=UTC),
    )


def hour_of_rollups(allocation, start, *, output=60_000, prompt=120_000, busy=1, cards=2):
    for i in range(12):
        ServingRollup.objects.create(
            allocation=allocation,
            bucket_start=start + timedelta(minutes=5 * i),
            cards_held=cards,
            generation_tokens=output,
            prompt_tokens=prompt,
            cards_reporting=cards,
            cards_busy=busy,
            requests_waiting=2,
        )


@pytest.fixture
def priced():
    card = RateCardFactory(effective_from=MONTH)
    RateCardEntryFactory(rate_card=card, price=Decimal("1.90"))
    return card


def test_tokens_per_card_hour_busy_share_and_cost_per_million(priced, team):
    """One hour of 2 L40S: held 2 x 12 x 300 s = 2.0 card-h; output 12 x 60,000 = 720,000
    tokens -> 360,000 per card-h; input 1,440,000 -> 720,000 per card-h; 1 of 2 cards busy
    -> 1.0 busy card-h, share 0.5. Cost 2.0 x 1.90 = 3.80 EUR; per million output tokens
    3.80 / 0.72 = 5.2777... -> 5.28 EUR."""
    allocation = serving_allocation(team)
    hour_of_rollups(allocation, HOUR)

    result = serving_efficiency(allocations=[allocation], month=MONTH)[allocation.pk]

    usage = result.usage
    assert usage.held_card_hours == Decimal("2.000")
    assert (usage.output_tokens, usage.input_tokens) == (720_000, 1_440_000)
    assert usage.output_tokens_per_card_hour == Decimal("360000.0")
    assert usage.input_tokens_per_card_hour == Decimal("720000.0")
    assert usage.busy_share == Decimal("0.500")
    assert (result.cost, result.currency) == (Decimal("3.80"), "EUR")
    assert result.cost_per_million_output == Decimal("5.28")


def test_hours_without_token_series_are_not_priced_against_the_tokens(priced, team):
    """A second hour with no token counters (all None): held 4.0 card-h, but tokens and cost
    stand on the 2.0 card-h that reported tokens, so the figures of the first test hold."""
    allocation = serving_allocation(team)
    hour_of_rollups(allocation, HOUR)
    hour_of_rollups(allocation, HOUR + timedelta(hours=1), output=None, prompt=None)

    result = serving_efficiency(allocations=[allocation], month=MONTH)[allocation.pk]

    assert result.usage.held_card_hours == Decimal("4.000")
    assert result.usage.output_tokens_per_card_hour == Decimal("360000.0")
    assert result.cost_per_million_output == Decimal("5.28")
    # holding the cards cost all 4.0 card-h x 1.90 = 7.60, tokens or not; 3.80 served tokens
    assert (result.cost, result.token_cost) == (Decimal("7.60"), Decimal("3.80"))


def test_without_a_price_the_cost_is_unknown_not_zero(team):
    allocation = serving_allocation(team)
    hour_of_rollups(allocation, HOUR)
    result = serving_efficiency(allocations=[allocation], month=MONTH)[allocation.pk]
    assert result.cost is None and result.cost_per_million_output is None
    assert result.token_cost is None
    assert result.usage.output_tokens == 720_000


def test_without_gpu_series_the_busy_share_is_unknown(priced, team):
    allocation = serving_allocation(team)
    ServingRollup.objects.create(
        allocation=allocation, bucket_start=HOUR, cards_held=2, generation_tokens=1000
    )
    usage = serving_efficiency(allocations=[allocation], month=MONTH)[allocation.pk].usage
    assert usage.busy_share is None and usage.gpu_coverage == Decimal("0.000")


def test_groups_add_up_allocations_of_one_pool_model_and_team(priced, team):
    """Two allocations of nlp: 2.0 + 2.0 card-h, 720,000 + 360,000 output tokens;
    3.80 + 3.80 = 7.60 EUR -> 7.60 / 1.08 = 7.037... -> 7.04 EUR per million."""
    a, b = serving_allocation(team), serving_allocation(team)
    hour_of_rollups(a, HOUR)
    hour_of_rollups(b, HOUR, output=30_000)
    b.pool = a.pool
    b.save()
    rows = serving_rows(allocations=[a, b], month=MONTH, now=HOUR + timedelta(hours=1))
    (group,) = serving_groups(rows)
    assert group["allocations"] == 2
    assert group["usage"].output_tokens == 1_080_000
    assert group["cost"] == Decimal("7.60")
    assert group["cost_per_million_output"] == Decimal("7.04")


def test_the_dashboard_csvs_price_held_card_hours_without_tokens(
    admin_page, team, priced, mid_month
):
    """An nlp allocation of 2 L40S whose engine reported no tokens for an hour: held
    2 x 12 x 300 s = 2.0 card-h x 1.90 EUR = 3.80 EUR of cost (it was 0.00: only token-covered
    card-hours were priced), no cost per million output tokens. Both dashboard CSVs, per
    allocation and per pool x model x team, say 3.80; unpriced it would be empty, not 0."""
    allocation = serving_allocation(team)
    start = bucket_floor(mid_month, 3600) - timedelta(hours=1)
    hour_of_rollups(allocation, start, output=None, prompt=None)

    def rows(export):
        answer = admin_page.get(f"/dashboard/?export={export}")
        return list(csv.DictReader(io.StringIO(b"".join(answer.streaming_content).decode())))

    [row] = rows("serving-allocations")
    assert (row["allocation"], row["month_held_card_hours"]) == (str(allocation.pk), "2.000")
    assert (row["cost"], row["cost_per_million_output"], row["currency"]) == ("3.80", "", "EUR")
    [group] = rows("serving")
    assert (group["held_card_hours"], group["cost"], group["cost_per_million_output"]) == (
        "2.000", "3.80", "")  # fmt: skip


def test_sorting_puts_unknown_last_both_ways(priced, team):
    a, b, c = (serving_allocation(team) for _ in range(3))
    hour_of_rollups(a, HOUR, output=10_000)
    hour_of_rollups(b, HOUR, output=50_000)
    ServingRollup.objects.create(allocation=c, bucket_start=HOUR, cards_held=2)
    rows = serving_rows(allocations=[a, b, c], month=MONTH, now=HOUR + timedelta(hours=1))
    up, _ = sort_rows(rows, "per_card_hour")
    down, _ = sort_rows(rows, "-per_card_hour")
    assert [r["allocation"] for r in up] == [a, b, c]
    assert [r["allocation"] for r in down] == [b, a, c]
    assert sort_rows(rows, "nonsense")[1] == "allocation"


def test_the_team_dashboard_lists_serving_and_exports_it(
    client, team, team_member, priced, mid_month
):
    allocation = serving_allocation(TeamFactory(slug="other"))
    mine = serving_allocation(team)
    hour_of_rollups(mine, bucket_floor(mid_month, 3600) - timedelta(hours=1))
    hour_of_rollups(allocation, HOUR)
    client.force_login(team_member)
    page = client.get("/teams/nlp/dashboard/?serving_sort=-waiting")
    assert page.status_code == 200
    assert f'href="/allocations/{mine.pk}/serving/"' in page.content.decode()
    assert f"/allocations/{allocation.pk}/serving/" not in page.content.decode()
    csv = b"".join(client.get("/teams/nlp/dashboard/?export=serving").streaming_content).decode()
    header, line = csv.splitlines()[:2]
    assert header.startswith("allocation,team,pool,gpu_model,cards,engine,requests_waiting")
    assert line.startswith(f"{mine.pk},nlp,")


def test_the_statement_shows_serving_as_showback_on_the_page_csv_and_pdf(
    client, team, team_member, priced
):
    """The first test's hour on the November statement: 2.0 held card-h, busy 0.500,
    720,000 output tokens, 360,000 per card-h, 3.80 EUR, 5.28 EUR per million; the statement's
    own CSV (the charged lines) is unchanged."""
    allocation = serving_allocation(team)
    hour_of_rollups(allocation, HOUR)
    statement = StatementFactory(team=team, month=MONTH)
    client.force_login(team_member)

    page = client.get("/costs/nlp/2026-11/").content.decode()
    assert "Serving showback" in page and "5.28" in page
    # grouped as every page groups (narrow no-break space), never the locale's comma
    assert ">720\u202f000<" in page and ">360\u202f000<" in page and "720,000" not in page

    csv = client.get("/costs/nlp/2026-11/?export=showback").content.decode().splitlines()
    assert csv[0].startswith("statement,team,month,allocation,pool,gpu_model,cards")
    assert csv[1] == (
        f"{statement.pk},nlp,2026-11,{allocation.pk},{allocation.pool.slug},l40s,2,2.000,0.500,"
        "1.000,1440000,720000,720000.0,360000.0,3.80,5.28,EUR"
    )
    lines = client.get("/costs/nlp/2026-11/?export=csv").content.decode().splitlines()
    assert lines[0].startswith("statement_id,team,cost_centre,month") and len(lines) == 1

    pdf = client.get("/costs/nlp/2026-11/?export=pdf")
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF")


def test_the_admin_dashboard_lists_unmatched_series_and_a_failed_pass(admin_page, team, mid_month):
    """A pass whose answers include a namespace no allocation serves in lists it for the
    admin; the next pass times out, and the dashboard says so with the last rollup's age."""
    allocation = serving_allocation(team)
    ghost = term("requests_running", "vllm", "vllm:num_requests_running", 1, namespace="team-x")
    mine = term("requests_running", "vllm", "vllm:num_requests_running", 2)
    serving_rollup_pass(metrics=StubPrometheus([ghost, mine]))
    page = admin_page.get("/dashboard/").content.decode()
    assert "1 serving target matched no allocation in the last pass" in page
    assert "team-x" in page and "no open allocation serves in this namespace" in page
    assert ServingRollup.objects.get(allocation=allocation).requests_running == 2

    serving_rollup_pass(now=mid_month + timedelta(minutes=5), metrics=StubPrometheus(down=True))
    page = admin_page.get("/dashboard/").content.decode()
    assert "Serving rollup: Prometheus could not be read, the last rollup stays" in page


def test_the_serving_table_its_csv_and_the_panel_show_one_number(
    client, team, team_member, mid_month
):
    """The newest bucket of an nlp allocation: 0.25 requests waiting on average over the five
    minutes, KV cache 41.5 % used, TTFT p95 0.2535 s. Worked out by hand, rounding half-up:
    waiting to one decimal 0.3 (a 5-minute mean: a whole number would say 0, no queue); KV to
    whole per cent 42; TTFT to whole ms 0.254 s, on the panel too. The team dashboard's
    Serving table, its CSV and the allocation's Serving panel all read so. The table and the
    panel wrote the waiting requests as 0, the CSV as 0.25 (and KV 41.5, TTFT 0.2535)."""
    allocation = serving_allocation(team)
    ServingRollup.objects.create(
        allocation=allocation,
        bucket_start=bucket_floor(mid_month, 300) - timedelta(minutes=5),
        cards_held=2,
        requests_waiting=0.25,
        kv_cache_usage_pct=41.5,
        ttft_p95_s=0.2535,
    )
    client.force_login(team_member)

    table = client.get("/teams/nlp/dashboard/").content.decode()
    export = client.get("/teams/nlp/dashboard/?export=serving")
    [row] = csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode()))
    panel = client.get(f"/allocations/{allocation.pk}/serving/").content.decode()

    cells = table[table.index(f'href="/allocations/{allocation.pk}/serving/"') :]
    cells = cells[: cells.index("</tr>")]
    assert '<td class="num">0.3</td>' in cells
    assert '<td class="num">42 %</td>' in cells
    assert '<td class="num">0.254 s</td>' in cells
    assert (row["requests_waiting"], row["kv_cache_usage_pct"], row["ttft_p95_s"]) == (
        "0.3",
        "42",
        "0.254",
    )
    assert "<dt>Requests waiting</dt><dd>0.3</dd>" in panel
    assert "<dt>KV cache used</dt><dd>42 <small>%</small></dd>" in panel
    assert "<dt>TTFT p95</dt><dd>0.254 <small>s</small></dd>" in panel
