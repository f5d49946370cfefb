"""Two rate cards of different currencies written at once on real PostgreSQL: without a lock
each is checked against the stored cards without the other (uncommitted) one and both are
kept, leaving March 2026 in two currencies. ``rate_card_check`` takes the rate-card lock, so
the second waits for the first's commit, sees its card and is refused.

The first create is held open inside its transaction until the second is seen waiting on a
lock (``pg_stat_activity``): with the rate-card lock it waits before its check; without it, it
passes its check and waits later on the price-list version row the first has written, then
keeps its card (the test fails on the cards kept)."""

from __future__ import annotations

import threading
import time
from datetime import date

import pytest
from django.db import connection, transaction

from billing.models import RateCard
from billing.services.rates import rate_card_create
from pools.common.errors import InvalidInput

pytestmark = pytest.mark.django_db(transaction=True)


def _someone_waits_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0


def test_a_card_written_while_another_is_uncommitted_is_checked_against_it():
    if connection.vendor != "postgresql":
        pytest.fail("the concurrency test needs PostgreSQL")
    inside, release = threading.Event(), threading.Event()
    results: dict[str, object] = {}

    def first():
        try:
            with transaction.atomic():
                rate_card_create(name="EUR", currency="EUR", effective_from=date(2026, 1, 1))
                inside.set()
                release.wait(timeout=30)
            results["first"] = "kept"
        except Exception as exc:  # the test asserts there is none
            results["first"] = exc
        finally:
            connection.close()

    def second():
        try:
            rate_card_create(name="USD", currency="USD", effective_from=date(2026, 3, 15))
            results["second"] = "kept"
        except Exception as exc:  # the refusal the test expects, or a failure
            results["second"] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    threads[0].start()
    assert inside.wait(timeout=30)
    threads[1].start()
    deadline = time.monotonic() + 10
    while threads[1].is_alive() and not _someone_waits_on_a_lock():
        assert time.monotonic() < deadline, "the second create neither waited nor finished"
        time.sleep(0.05)
    release.set()
    for thread in threads:
        thread.join(timeout=30)

    assert results["first"] == "kept"
    assert isinstance(results["second"], InvalidInput), results["second"]
    assert "2026-03" in results["second"].data["errors"]["currency"][0]
    assert list(RateCard.objects.values_list("name", flat=True)) == ["EUR"]
