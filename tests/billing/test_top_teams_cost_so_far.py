"""The admin dashboard's *Top teams by cost* for the current month ranks by cost so far, the
figure each team's own dashboard shows, not by the statements built so far (a draft statement
of one team hid every other team)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from unittest import mock

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from factories import AllocationFactory, RateCardEntryFactory, RateCardFactory, TeamFactory

from billing.dashboards.costs import teams_cost_so_far, top_teams_by_cost_so_far
from billing.models import Statement
from billing.services.usage_import import usage_import_reservations
from pools.common.choices import AllocationStatus
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 10, 12, 0, tzinfo=UTC)
DEC_1 = datetime(2026, 12, 1, tzinfo=UTC)
DEC_21 = datetime(2026, 12, 21, tzinfo=UTC)


def _reserve(team, cards: int, pool=None):
    extra = {"pool": pool} if pool is not None else {}
    return AllocationFactory(
        team=team, card_count=cards, gpu_model=GpuModel.objects.get(slug="l40s"),
        status=AllocationStatus.ACTIVE, starts_at=DEC_1, ends_at=DEC_21, **extra,
    )  # fmt: skip


@pytest.fixture
def teams(team):
    """L40S at 1.25 EUR a card-hour from 1 Dec. NLP reserves 2 cards, Vision 1, both 1 Dec ->
    21 Dec; the reservation import run to 10 Dec 12:00 (228 h). Vision also has a draft
    December statement of 569.31 EUR (built earlier, say), NLP none."""
    card = RateCardFactory(effective_from=date(2026, 12, 1))
    RateCardEntryFactory(rate_card=card, price=Decimal("1.25"))
    vision = TeamFactory(slug="vision", name="Vision")
    pool = _reserve(team, 2).pool
    _reserve(vision, 1, pool)
    usage_import_reservations(start=DEC_1, end=NOW, now=NOW)
    Statement.objects.create(team=vision, month=date(2026, 12, 1), currency="EUR",
                             usage_amount=Decimal("569.31"), total_amount=Decimal("569.31"),
                             built_at=NOW)  # fmt: skip
    return team, vision


def _csv(response) -> list[str]:
    return b"".join(response.streaming_content).decode().strip().splitlines()


def test_ranked_by_cost_so_far_by_hand(teams):
    """NLP 2 cards x 228 h x 1.25 = 570.00 EUR; Vision 1 x 228 x 1.25 = 285.00 EUR (its draft
    statement's 569.31 is not the ranking's figure). Same as each team's own dashboard."""
    nlp, vision = teams
    top = top_teams_by_cost_so_far(now=NOW)
    assert [(t.slug, t.amount, t.currency) for t in top] == [
        ("nlp", Decimal("570.00"), "EUR"),
        ("vision", Decimal("285.00"), "EUR"),
    ]
    own = teams_cost_so_far(team_ids=[nlp.pk, vision.pk], now=NOW)
    assert [t.amount for t in top] == [own[nlp.pk].to_date, own[vision.pk].to_date]
    assert [t.slug for t in top_teams_by_cost_so_far(now=NOW, team="vision")] == ["vision"]
    assert top_teams_by_cost_so_far(now=NOW, team="nobody") == []


def test_the_admin_dashboard_and_its_csv(teams, admin_page):
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        page = admin_page.get("/dashboard/").content.decode()
        rows = _csv(admin_page.get("/dashboard/?export=teams-cost"))
    assert "Top teams by cost, December 2026 so far" in page
    assert rows == ["team,amount,currency", "nlp,570.00,EUR", "vision,285.00,EUR"]


def test_without_usage_this_month_last_months_statements_are_shown(team, admin_page):
    Statement.objects.create(team=team, month=date(2026, 11, 1), currency="EUR",
                             usage_amount=Decimal("12.30"), total_amount=Decimal("12.30"),
                             built_at=NOW)  # fmt: skip
    RateCardFactory(effective_from=date(2026, 12, 1))
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        page = admin_page.get("/dashboard/").content.decode()
        rows = _csv(admin_page.get("/dashboard/?export=teams-cost"))
    assert "Top teams by cost, November 2026<" in page
    assert rows == ["team,amount,currency", "nlp,12.30,EUR"]


def _queries(client) -> int:
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        _csv(client.get("/dashboard/?export=teams-cost"))  # warm the kept rate periods
        with CaptureQueriesContext(connection) as ctx:
            assert len(_csv(client.get("/dashboard/?export=teams-cost"))) > 1
    return len(ctx.captured_queries)


def test_queries_do_not_grow_with_teams_and_allocations(teams, admin_page):
    """Five more teams with two allocations each in the same pool (the over-commit alerts read
    once per over-committed pool and model, so new pools would grow the count for them)."""
    before = _queries(admin_page)
    pool = teams[0].allocations.first().pool
    for i in range(5):
        other = TeamFactory(slug=f"grow-{i}")
        _reserve(other, 1, pool)
        _reserve(other, 2, pool)
    usage_import_reservations(start=DEC_1, end=NOW, now=NOW)
    assert _queries(admin_page) == before
