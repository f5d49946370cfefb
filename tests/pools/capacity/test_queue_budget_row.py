"""The approval queue gives an over-budget request's explanation a row of its own under the
request, across the whole table; the Team column keeps the short badge. The explanation used
to sit in the Team cell, squeezed to its width."""

from __future__ import annotations

from datetime import UTC, datetime
from html.parser import HTMLParser

import pytest
from factories import CapacityRequestFactory

pytestmark = pytest.mark.django_db

REASON = (
    "Beyond the month budget of NLP (January 2026): 90.00 EUR used + 160.00 requested > "
    "200.00 EUR; a pool admin decides."
)


class Rows(HTMLParser):
    """The rows of the page's tables: ``[(tr class, [(td colspan, text), ...]), ...]``."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str, list[tuple[int, str]]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr":
            self.rows.append((attrs.get("class") or "", []))
        elif tag == "td":
            self._cell = []
            self.rows[-1][1].append((int(attrs.get("colspan") or 1), self._cell))

    def handle_endtag(self, tag):
        if tag == "td":
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _rows(html: str) -> list[tuple[str, list[tuple[int, str]]]]:
    parser = Rows()
    parser.feed(html)
    return [
        (cls, [(span, " ".join("".join(text).split())) for span, text in cells])
        for cls, cells in parser.rows
    ]


def test_the_budget_explanation_has_a_row_under_its_request(admin_page, team, l40s):
    # the reason is what the budgets said when the request was submitted (kept on the request),
    # so the row says when: 09:30 UTC on 1 December shown in the portal's zone (UTC in tests);
    # the team has no budget now, so the row says that too (tests/billing/budgets/
    # test_queue_budget_now.py: a request over a budget in force now)
    over = CapacityRequestFactory(
        team=team, budget_verdict="needs_admin", budget_reason=REASON,
        submitted_at=datetime(2026, 12, 1, 9, 30, tzinfo=UTC),
    )  # fmt: skip
    within = CapacityRequestFactory(team=team)

    rows = [(cls, cells) for cls, cells in _rows(page(admin_page)) if cells]  # th rows: none
    at = next(i for i, (_, cells) in enumerate(rows) if cells[0][1] == f"#{over.pk}")

    request_row, budget_row = rows[at], rows[at + 1]
    team_cell = request_row[1][1][1]
    assert "within budget now" in team_cell
    assert REASON not in team_cell  # not squeezed into the Team column
    assert budget_row == (
        "queue-budget",
        [(11, f"#{over.pk} within budget now; over budget at submission (2026-12-01 09:30): "
              f"{REASON}")],
    )  # fmt: skip
    # The request within its budgets has no such row.
    assert [cls for cls, _ in rows].count("queue-budget") == 1
    assert any(cells[0][1] == f"#{within.pk}" for _, cells in rows)


def page(client) -> str:
    return client.get("/requests/queue/").content.decode()
