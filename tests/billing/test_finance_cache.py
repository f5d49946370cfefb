"""The finance month's sums are kept per statements' generation (:mod:`billing.generation`)
outside a transaction: a second read runs no query over statements or lines, and every
committed write the sums show -- a statement saved, a line saved, a team renamed, the month
close's bulk writes -- is on the next read. Amounts worked out by hand in each test."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from factories import StatementFactory, StatementLineFactory, TeamFactory
from kit import utc

from billing import selectors

pytestmark = pytest.mark.django_db
OCT = date(2026, 10, 1)


@pytest.fixture(autouse=True)
def _outside(outside_a_transaction):
    """Read as the page reads, outside a transaction, so the sums are kept."""


def _sums():
    """(statements, lines, total, [(team label, amount)], [(model label, amount)]) of October,
    and how many queries read statements or their lines."""
    with CaptureQueriesContext(connection) as ctx:
        data = selectors.finance_month(month=OCT)
    read = sum("billing_statement" in q["sql"] for q in ctx.captured_queries)
    summed = (
        data["statement_count"],
        data["line_count"],
        data["total"],
        [(t["label"], t["amount"]) for t in data["by_team"]],
        [(m["label"], m["amount"]) for m in data["by_gpu_model"]],
    )
    return summed, read


def test_kept_sums_and_each_committed_write_shows_at_once(a100, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        nlp = TeamFactory(slug="nlp", name="NLP")
        statement = StatementFactory(team=nlp, month=OCT, usage_amount=Decimal("12.50"),
                                     total_amount=Decimal("12.50"))  # fmt: skip
        StatementLineFactory(statement=statement, position=1, gpu_model=a100)
    a100_name = a100.name
    first, read = _sums()
    # one line of 10 card-hours × 1.25 = 12.50 EUR (the factory's)
    assert first == (1, 1, Decimal("12.50"), [("NLP", Decimal("12.50"))],
                     [(a100_name, Decimal("12.50"))])  # fmt: skip
    assert read == 6  # the sums, counts, top teams, currency, by model: one query each

    again, read = _sums()
    assert again == first and read == 0  # kept

    with django_capture_on_commit_callbacks(execute=True):  # a rename: the chart's label
        nlp.name = "Language"
        nlp.save()
    assert _sums()[0][3] == [("Language", Decimal("12.50"))]

    with django_capture_on_commit_callbacks(execute=True):  # the admin's inline: a line saved
        StatementLineFactory(statement=statement, position=2, gpu_model=None,
                             served_model="qwen", amount=Decimal("7.50"))  # fmt: skip
    # by model: A100 12.50, qwen 7.50 (dearest first); the statement's total is its own
    assert _sums()[0][1] == 2
    assert _sums()[0][4] == [(a100_name, Decimal("12.50")), ("qwen", Decimal("7.50"))]

    with django_capture_on_commit_callbacks(execute=True):  # a statement saved
        statement.adjustment_amount = Decimal("-2.50")
        statement.total_amount = Decimal("10.00")
        statement.save()
    assert _sums()[0][2] == Decimal("10.00")


def test_the_month_close_bulk_writes_show_at_once(
    rates, train_pool, team, a100, django_capture_on_commit_callbacks
):
    """The close writes statements by ``bulk_create`` and lines by ``COPY``: no signal, so it
    replaces the generation itself. nlp held 2 A100 cards for 48 h of October at the reserved
    2.00 EUR per card-hour: 2 × 48 × 2.00 = 192.00 EUR."""
    from factories import AllocationFactory

    from billing.models import UsageRecord
    from billing.services.statements import statements_close_month

    alloc = AllocationFactory(team=team, pool=train_pool, gpu_model=a100, card_count=2,
                              starts_at=utc(2026, 10, 1), ends_at=utc(2026, 10, 3),
                              status="active")  # fmt: skip
    UsageRecord.objects.create(
        team=team, gpu_model=a100, allocation=alloc, quantity=2 * 48 * 3600,
        unit="card-seconds", basis="reserved", month=OCT, period_start=utc(2026, 10, 1),
        period_end=utc(2026, 10, 3), source="reservation", source_id=f"allocation-{alloc.pk}",
        created_at=utc(2026, 10, 1), updated_at=utc(2026, 10, 1),
    )  # fmt: skip
    assert _sums()[0][:3] == (0, 0, Decimal(0))  # no statement yet (kept so)

    with django_capture_on_commit_callbacks(execute=True):
        statements_close_month(month=OCT, now=utc(2026, 11, 2))
    count, _lines, total, by_team, _models = _sums()[0]
    assert (count, total, by_team) == (1, Decimal("192.00"), [(team.name, Decimal("192.00"))])
