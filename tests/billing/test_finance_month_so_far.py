"""The month in progress on the finance page: no statement until the month closes, so the page
shows every team's cost so far (the statement each team's page previews), labelled as not
drafted yet, with CSVs of the same numbers and the 12-month chart's last bar so far; charts with
nothing to draw say so instead of empty axes."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import UTC, date, datetime
from decimal import Decimal
from unittest import mock

import pytest
from factories import AllocationFactory, RateCardEntryFactory, RateCardFactory, TeamFactory

from billing.models import Statement, StatementLine
from billing.services.usage_import import usage_import_reservations
from pools.common.choices import AllocationStatus
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 10, 12, 0, tzinfo=UTC)
DEC_1 = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture
def two_teams(team):
    """L40S at 1.25 EUR a card-hour from 1 Dec; the reservation import run up to now (10 Dec
    12:00):

    - NLP (CC-…): 2 cards 1 Dec 00:00 -> 21 Dec: 2 x 228 h = 456 card-h -> 570.00 EUR.
    - Vision: 1 card 5 Dec 12:00 -> 20 Dec: 1 x 120 h = 120 card-h -> 150.00 EUR.

    Together 720.00 EUR, two teams, two lines."""
    card = RateCardFactory(effective_from=date(2026, 12, 1))
    RateCardEntryFactory(rate_card=card, price=Decimal("1.25"))
    l40s = GpuModel.objects.get(slug="l40s")
    vision = TeamFactory(slug="vision", name="Vision")
    AllocationFactory(
        team=team, card_count=2, gpu_model=l40s, status=AllocationStatus.ACTIVE,
        starts_at=DEC_1, ends_at=datetime(2026, 12, 21, tzinfo=UTC),
    )  # fmt: skip
    AllocationFactory(
        team=vision, card_count=1, gpu_model=l40s, status=AllocationStatus.ACTIVE,
        starts_at=datetime(2026, 12, 5, 12, tzinfo=UTC), ends_at=datetime(2026, 12, 20, tzinfo=UTC),
    )  # fmt: skip
    usage_import_reservations(start=DEC_1, end=NOW, now=NOW)
    return team, vision


def _get(client, path: str):
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        return client.get(path)


def _plain(page: bytes) -> str:
    text = page.decode().replace("\u00a0", " ").replace("\u202f", " ")
    return re.sub(r"\s+", " ", text)


def _chart(page: str, name: str) -> dict:
    found = re.search(rf'<script id="{name}-data" type="application/json">(.*?)</script>', page)
    return json.loads(found.group(1))


def test_the_finance_month_in_progress_shows_each_teams_cost_so_far(admin_page, two_teams):
    """570.00 + 150.00 = 720.00 EUR so far from two teams, each row not drafted yet, its own
    page's total; nothing written."""
    page = _plain(_get(admin_page, "/costs/finance/2026-12/").content)

    assert "720.00 EUR" in page and "so far, December to date, 2 teams" in page
    assert "total of 0 statements" not in page and "No statements yet" in page
    rows = re.findall(r'<tr><td><a href="/costs/(\w+)/2026-12/">.*?</tr>', page)
    assert rows == ["nlp", "vision"]
    assert page.count('<span class="badge in-progress">not drafted yet</span>') == 3  # card too
    assert "?export=pdf" not in page and "?export=focus" not in page
    for slug, amount in (("nlp", "570.00 EUR"), ("vision", "150.00 EUR")):
        row = page.split(f'<a href="/costs/{slug}/2026-12/">', 1)[1].split("</tr>", 1)[0]
        assert row.count(amount) == 2  # usage and total
        team_page = _plain(_get(admin_page, f"/costs/{slug}/2026-12/").content)
        assert f'{amount}</div><div class="label">total so far' in team_page
    assert (Statement.objects.count(), StatementLine.objects.count()) == (0, 0)


def test_the_charts_draw_the_month_so_far(admin_page, two_teams):
    """The 12-month chart ends with "2026-12 so far" at 720.0 (paler than the statements'
    bars); by team 570.0 and 150.0; by model one L40S bar of 720.0."""
    page = _plain(_get(admin_page, "/costs/finance/2026-12/").content)
    trend = _chart(page, "trend-chart")
    assert trend["labels"][-2:] == ["2026-11", "2026-12 so far"]
    assert trend["datasets"][0]["data"][-2:] == [0.0, 720.0]
    fills = trend["datasets"][0]["backgroundColor"]
    assert len(set(fills[:-1])) == 1 and fills[-1] != fills[0]
    team_chart = _chart(page, "team-chart")
    assert (team_chart["labels"], team_chart["datasets"][0]["data"]) == (
        ["NLP", "Vision"], [570.0, 150.0],
    )  # fmt: skip
    model_chart = _chart(page, "model-chart")
    assert (model_chart["labels"], model_chart["datasets"][0]["data"]) == (["L40S"], [720.0])
    assert "data-chart-empty" not in page

    team_page = _plain(_get(admin_page, "/costs/nlp/2026-12/").content)
    trend = _chart(team_page, "trend-chart")
    assert (trend["labels"][-1], trend["datasets"][0]["data"][-1]) == ("2026-12 so far", 570.0)


def test_the_csvs_hold_the_same_numbers(admin_page, two_teams):
    """Statements CSV: one row per team, status in-progress, totals 570.00 and 150.00. All
    lines: NLP's 456.000 card-h for 570.00, Vision's 120.000 for 150.00."""
    response = _get(admin_page, "/costs/finance/2026-12/?export=statements")
    assert 'filename="so-far-statements-2026-12.csv"' in response["Content-Disposition"]
    body = b"".join(response.streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    assert [(r["team"], r["status"], r["total_amount"]) for r in rows] == [
        ("nlp", "in-progress", "570.00"), ("vision", "in-progress", "150.00"),
    ]  # fmt: skip

    response = _get(admin_page, "/costs/finance/2026-12/?export=csv")
    assert 'filename="so-far-statements-2026-12.csv"' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(r["team"], r["status"], r["basis"], r["quantity"], r["amount"]) for r in rows] == [
        ("nlp", "in-progress", "reserved", "456.000", "570.00"),
        ("vision", "in-progress", "reserved", "120.000", "150.00"),
    ]
    assert Statement.objects.count() == 0


def test_a_month_in_progress_with_nothing_says_so(admin_page, db):
    """No usage and no statements anywhere: 0 teams, and each chart a sentence, not axes."""
    page = _plain(_get(admin_page, "/costs/finance/2026-12/").content)
    assert "so far, December to date, 0 teams" in page
    assert page.count("data-chart-empty") == 3
    assert 'id="trend-chart"' not in page and 'id="team-chart"' not in page


def test_a_closed_month_keeps_its_statements_view(admin_page, two_teams):
    """November (closed, no statement in this test) is not previewed: 0 statements, as stored."""
    page = _plain(_get(admin_page, "/costs/finance/2026-11/").content)
    assert "total of 0 statements" in page and "not drafted yet" not in page
    assert "so far" not in _chart(page, "trend-chart")["labels"][-1]
