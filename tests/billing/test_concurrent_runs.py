"""Two runs of a month's close, or of a usage import of one source, at the same time on real
PostgreSQL: the second waits for the first and finds its work done (QA round 2, item 10: one
run crashed with an IntegrityError on the unique keys; the data stayed intact).

The first run is held open for a second inside its transaction, after its inserts, and the
second starts meanwhile: without a lock the second reads no rows, inserts the same keys, waits
on the first's uncommitted index entries and fails when it commits.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from broker_support import catalogue_loaded
from django.db import connection, transaction
from factories import TeamFactory, UsageRecordFactory

from billing.models import Statement, UsageRecord
from billing.services import statements as statement_services
from billing.services.usage_import import ImportReport, usage_records_upsert

pytestmark = pytest.mark.django_db(transaction=True)

NOVEMBER = date(2026, 11, 1)
HOLD_S = 1.0


def _run_both(first, second) -> list:
    """Run ``first`` then, 0.2 s later, ``second``, each in a thread with its own connection;
    returns their results (or the exception each raised)."""
    results: list = [None, None]

    def run(index, call):
        try:
            results[index] = call()
        except Exception as exc:  # the test asserts there is none
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate((first, second))]
    threads[0].start()
    time.sleep(0.2)
    threads[1].start()
    for thread in threads:
        thread.join(timeout=30)
    return results


@pytest.fixture
def november_usage():
    if connection.vendor != "postgresql":
        pytest.fail("the concurrency test needs PostgreSQL")
    catalogue_loaded()
    teams = [TeamFactory(slug=slug) for slug in ("nlp", "vision")]
    start = datetime(2026, 11, 10, 9, tzinfo=UTC)
    for team in teams:
        UsageRecordFactory(team=team, period_start=start, period_end=start.replace(hour=10))
    return teams


def test_two_closes_of_one_month_give_one_final_statement_per_team(november_usage, monkeypatch):
    original = statement_services._lines_insert
    first_thread: list[threading.Thread] = []

    def held(statements):
        original(statements)
        if threading.current_thread() is first_thread[0]:
            time.sleep(HOLD_S)

    monkeypatch.setattr(statement_services, "_lines_insert", held)

    def first():
        first_thread.append(threading.current_thread())
        return [s.pk for s in statement_services.statements_close_month(month=NOVEMBER)]

    def second():
        return [s.pk for s in statement_services.statements_close_month(month=NOVEMBER)]

    results = _run_both(first, second)

    assert not any(isinstance(r, Exception) for r in results), results
    final = Statement.objects.filter(month=NOVEMBER, status="final")
    assert final.count() == 2
    # The second close answers with the statements the first one finalized, unchanged.
    assert sorted(results[1]) == sorted(results[0]) == sorted(final.values_list("pk", flat=True))


def test_two_imports_of_one_source_write_each_record_once(november_usage):
    def records():
        team = november_usage[0]
        start = datetime(2026, 11, 11, 9, tzinfo=UTC)
        return [
            UsageRecordFactory.build(
                team=team,
                period_start=start,
                period_end=start.replace(hour=10),
                quantity=Decimal(3600),
                source="reservation",
                source_id=f"race-{n}",
            )
            for n in range(3)
        ]

    def first():
        report = ImportReport()
        with transaction.atomic():
            usage_records_upsert(records(), report, datetime.now(UTC))
            time.sleep(HOLD_S)
        return report

    def second():
        report = ImportReport()
        with transaction.atomic():
            usage_records_upsert(records(), report, datetime.now(UTC))
        return report

    results = _run_both(first, second)

    assert not any(isinstance(r, Exception) for r in results), results
    assert (results[0].created, results[0].unchanged) == (3, 0)
    assert (results[1].created, results[1].unchanged) == (0, 3)
    assert UsageRecord.objects.filter(source_id__startswith="race-").count() == 3


def test_two_identical_token_batches_at_once_accept_each_record_once(november_usage, monkeypatch):
    """A gateway retrying a batch while the first post still runs: the records are stored once
    (the unique key always ensured that) and now only one answer says ``accepted``; the other
    counts them as duplicates. The first batch is held between its look-up of known keys and
    its insert, where the second used to find nothing known too and both answered 3 accepted."""
    from billing.services import tokens

    original = UsageRecord.objects.bulk_create
    first_thread: list[threading.Thread] = []

    def held(rows, **kwargs):
        if threading.current_thread() is first_thread[0]:
            time.sleep(HOLD_S)
        return original(rows, **kwargs)

    monkeypatch.setattr(UsageRecord.objects, "bulk_create", held)
    batch = [
        {
            "idempotency_key": f"gw-race-{n}",
            "team": "nlp",
            "served_model": "llama-3-70b",
            "timestamp": "2026-11-12T09:00:00+00:00",
            "prompt_tokens": 100,
            "completion_tokens": 20,
        }
        for n in range(3)
    ]

    def first():
        first_thread.append(threading.current_thread())
        return tokens.usage_tokens_ingest(records=batch)

    results = _run_both(first, lambda: tokens.usage_tokens_ingest(records=batch))

    assert not any(isinstance(r, Exception) for r in results), results
    assert [(r.accepted, r.duplicates) for r in results] == [(3, 0), (0, 3)]
    # input and output tokens per record (no cached tokens): 2 rows each
    assert UsageRecord.objects.filter(source_id__startswith="gw-race-").count() == 6


def test_a_draft_rebuilt_while_the_month_closes_leaves_one_final_statement(
    november_usage, monkeypatch
):
    """``statement_build`` (a rebuild of one team's draft) held open after writing its lines
    while ``statements_close_month`` runs: the close waits for the month's lock and then
    finalizes that draft, instead of writing the same line positions and failing."""
    original = statement_services._statement_fill
    first_thread: list[threading.Thread] = []

    def held(*args, **kwargs):
        original(*args, **kwargs)
        if threading.current_thread() is first_thread[0]:
            time.sleep(HOLD_S)

    monkeypatch.setattr(statement_services, "_statement_fill", held)
    team = november_usage[0]

    def first():
        first_thread.append(threading.current_thread())
        return statement_services.statement_build(team=team, month=NOVEMBER).pk

    def second():
        return [s.pk for s in statement_services.statements_close_month(month=NOVEMBER)]

    results = _run_both(first, second)

    assert not any(isinstance(r, Exception) for r in results), results
    final = Statement.objects.filter(month=NOVEMBER, status="final")
    assert final.count() == 2
    assert results[0] in results[1]  # the rebuilt draft is the one the close finalized
    rebuilt = final.get(team=team)
    positions = list(rebuilt.lines.values_list("position", flat=True))
    assert positions == list(range(1, len(positions) + 1))
