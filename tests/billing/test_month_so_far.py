"""The month in progress on the team's cost page: no statement until the month closes, so the
page shows the lines it would hold now (``statement_preview``), with the same total as *cost
so far* on the team dashboard, writes nothing, and exports them as CSV."""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime
from decimal import Decimal
from unittest import mock

import pytest
from factories import AllocationFactory, RateCardEntryFactory, RateCardFactory

from billing.models import Statement, StatementLine
from billing.services.statements import statement_build
from billing.services.usage_import import usage_import_reservations
from pools.common.choices import AllocationStatus
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 10, 12, 0, tzinfo=UTC)
DEC_1 = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture
def reserved(team):
    """2 L40S reserved for the team 1 Dec 00:00 -> 21 Dec 00:00 at 1.25 EUR a card-hour, the
    reservation import run up to now (10 Dec 12:00): 2 cards x 228 h = 456 card-hours so far."""
    card = RateCardFactory(effective_from=date(2026, 12, 1))
    RateCardEntryFactory(rate_card=card, price=Decimal("1.25"))
    AllocationFactory(
        team=team, card_count=2, gpu_model=GpuModel.objects.get(slug="l40s"),
        status=AllocationStatus.ACTIVE, starts_at=DEC_1, ends_at=datetime(2026, 12, 21, tzinfo=UTC),
    )  # fmt: skip
    usage_import_reservations(start=DEC_1, end=NOW, now=NOW)


def _plain(page: bytes) -> str:
    return page.decode().replace("\u00a0", " ").replace("\u202f", " ")


def test_the_month_in_progress_shows_its_lines_so_far_and_writes_nothing(
    client, team, team_member, reserved
):
    """456 card-hours x 1.25 EUR = 570.00 EUR, the dashboard's cost so far; no statement row."""
    client.force_login(team_member)
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        page = _plain(client.get(f"/costs/{team.slug}/2026-12/").content)
        dashboard = _plain(client.get(f"/teams/{team.slug}/dashboard/").content)

    assert "not drafted yet" in page and "No statement yet" in page
    assert '<span class="badge in-progress" data-so-far>not drafted yet</span>' in page
    assert "570.00 EUR" in page and "456" in page
    assert "No statement for December 2026 yet" not in page
    assert (Statement.objects.count(), StatementLine.objects.count()) == (0, 0)
    assert 'id="cost-so-far"' in dashboard and "570.00 EUR" in dashboard
    assert f'href="/costs/{team.slug}/2026-12/" data-so-far-link' in dashboard


def test_the_lines_so_far_are_the_draft_the_month_close_would_write(
    client, team, team_member, reserved
):
    """The CSV so far holds the same lines as the draft ``statement_build`` writes (built after
    the download, in the test): kind, basis, quantity and amount, line by line. Its status is
    the month in progress's, as the page's badge says, not "draft": nothing is drafted yet."""
    client.force_login(team_member)
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        response = client.get(f"/costs/{team.slug}/2026-12/?export=csv")
    assert response.status_code == 200
    assert 'filename="so-far-' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(r["basis"], r["quantity"], r["amount"], r["status"]) for r in rows] == [
        ("reserved", "456.000", "570.00", "in-progress")  # card-hours to 3 places
    ]
    assert Statement.objects.count() == 0

    draft = statement_build(team=team, month=date(2026, 12, 1), now=NOW)
    assert [(x.basis, x.quantity, x.amount) for x in draft.lines.order_by("position")] == [
        ("reserved", Decimal("456"), Decimal("570.00"))
    ]


def test_a_past_month_without_a_statement_still_says_so(client, team, team_member, reserved):
    client.force_login(team_member)
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        page = client.get(f"/costs/{team.slug}/2026-10/").content.decode()
    assert "No statement for October 2026 yet" in page and "not drafted yet" not in page


def test_the_month_with_a_draft_shows_the_draft(client, team, team_member, reserved):
    statement_build(team=team, month=date(2026, 12, 1), now=NOW)
    client.force_login(team_member)
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        page = client.get(f"/costs/{team.slug}/2026-12/").content.decode()
    assert "not drafted yet" not in page and "FOCUS CSV" in page
    assert '<span class="badge draft">Draft</span>' in page
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        rows = list(csv.DictReader(io.StringIO(
            client.get(f"/costs/{team.slug}/2026-12/?export=csv").content.decode()
        )))  # fmt: skip
    assert [r["status"] for r in rows] == ["draft"]


def test_the_dashboard_spend_card_shows_the_month_so_far_not_no_cost_data(
    client, team, team_member, reserved
):
    """December has no statement yet: the Spend card's December row says 570.00 EUR so far
    (456 card-hours x 1.25 EUR, the cost-so-far tile's number), linking to the lines; November,
    with no statement and no month in progress, still says "no cost data"."""
    client.force_login(team_member)
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        dashboard = _plain(client.get(f"/teams/{team.slug}/dashboard/").content)
    december = dashboard.split("<td>December 2026</td>", 1)[1].split("</tr>", 1)[0]
    november = dashboard.split("<td>November 2026</td>", 1)[1].split("</tr>", 1)[0]
    assert f'href="/costs/{team.slug}/2026-12/" data-spend-so-far>570.00 EUR so far' in december
    assert "not drafted yet" in december and "no cost data" not in december
    assert "no cost data" in november and "so far" not in november


def test_the_spend_csv_carries_the_month_so_far_as_the_spend_card_does(
    client, team, team_member, reserved
):
    """The Spend card's December row says 570.00 EUR so far (456 card-hours x 1.25 EUR); its
    CSV carries the same figure, marked ``so_far`` and not final. November: no statement, not
    the month in progress: no cost data, an empty amount."""
    client.force_login(team_member)
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        response = client.get(f"/teams/{team.slug}/dashboard/?export=spend")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [(r["month"], r["amount"], r["currency"], r["final"], r["so_far"]) for r in rows] == [
        ("2026-11", "", "", "False", "False"),
        ("2026-12", "570.00", "EUR", "False", "True"),
    ]
