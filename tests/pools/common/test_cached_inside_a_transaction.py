"""Inside a transaction the pools' generation-keyed sums are read afresh and kept nowhere
(:func:`pools.common.generation.cached`): a transaction that wrote an allocation or a request
sees it counted though the page kept sums under the same token (the token is replaced only when
the transaction commits), and once it rolls back the page reads what it kept before. Each test
reads as the page once (kept), writes inside ``transaction.atomic()``, reads again there, then
rolls back. Window: 7-9 December 2026; numbers by hand in each test."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from factories import AllocationFactory, CapacityRequestFactory, PoolFactory, TeamFactory

from pools.capacity.selectors import timeline_allocations, timeline_holdings
from pools.dashboards.capacity import DashboardFilters, allocation_plan, demand_forecasts
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db


class RolledBack(Exception):
    pass


def at(day: int, hour: int = 0) -> datetime:
    return datetime(2026, 12, day, hour, tzinfo=UTC)


@pytest.fixture
def nlp_holds_two():
    """Pool ``p``: NLP holds 2 L40S cards from 7 December 00:00 to 9 December 00:00."""
    pool, l40s = PoolFactory(slug="p"), GpuModel.objects.get(slug="l40s")
    nlp = TeamFactory(slug="nlp", name="NLP")
    AllocationFactory(team=nlp, pool=pool, gpu_model=l40s, card_count=2,
                      starts_at=at(7), ends_at=at(9), status="active")  # fmt: skip
    return pool, l40s


def _vision_holds_three(pool, l40s):
    """Vision: 3 cards from 8 December 00:00 to 9 December 00:00."""
    vision = TeamFactory(slug="vision", name="Vision")
    AllocationFactory(team=vision, pool=pool, gpu_model=l40s, card_count=3,
                      starts_at=at(8), ends_at=at(9), status="approved")  # fmt: skip


def _kept(read, read_as_a_page):
    """``read()`` as the page reads it, then again: the second runs fewer queries (its sums
    kept) and reads the same."""
    with read_as_a_page():
        with CaptureQueriesContext(connection) as first:
            kept = read()
        with CaptureQueriesContext(connection) as second:
            assert read() == kept
    assert len(second.captured_queries) < len(first.captured_queries)
    return kept


def test_the_timeline_counts_the_transactions_own_allocation(
    pool_admin, nlp_holds_two, read_as_a_page
):
    """Noon of 7 and 8 December: NLP 2 and 2; with Vision's 3 from the 8th, Vision 0 and 3."""

    def read():
        series = timeline_holdings(
            user=pool_admin, start=at(7), end=at(9), instants=[at(7, 12), at(8, 12)]
        )
        return {(s.team, s.team_slug): s.cards for s in series}

    assert _kept(read, read_as_a_page) == {("NLP", "nlp"): [2, 2]}
    with pytest.raises(RolledBack), transaction.atomic():
        _vision_holds_three(*nlp_holds_two)
        assert read() == {("NLP", "nlp"): [2, 2], ("Vision", "vision"): [0, 3]}
        raise RolledBack
    with read_as_a_page():
        assert read() == {("NLP", "nlp"): [2, 2]}  # nothing of the rolled-back one was kept


def test_the_timeline_ranking_counts_the_transactions_own_allocation(
    pool_admin, nlp_holds_two, read_as_a_page
):
    """One allocation in the window's chart, then two."""
    pool, l40s = nlp_holds_two

    def read():
        counts, listed = timeline_allocations(user=pool_admin, start=at(7), end=at(9), first=5)
        return counts, {k: len(rows) for k, rows in listed.items()}

    assert _kept(read, read_as_a_page) == ({(pool.pk, l40s.pk): 1}, {(pool.pk, l40s.pk): 1})
    with pytest.raises(RolledBack), transaction.atomic():
        _vision_holds_three(pool, l40s)
        assert read() == ({(pool.pk, l40s.pk): 2}, {(pool.pk, l40s.pk): 2})
        raise RolledBack
    with read_as_a_page():
        assert read() == ({(pool.pk, l40s.pk): 1}, {(pool.pk, l40s.pk): 1})


def test_the_capacity_plan_counts_the_transactions_own_allocation(nlp_holds_two, read_as_a_page):
    """The plan from 7 December, each day's peak: 2, 2, then 0 (NLP's ends on the 9th at
    00:00); with Vision's 3 on the 8th: 2, 5, 0."""

    def read():
        plan = allocation_plan(filters=DashboardFilters(), now=at(7, 6))
        return plan[("p", "l40s")].held[:3]

    assert _kept(read, read_as_a_page) == [2, 2, 0]
    with pytest.raises(RolledBack), transaction.atomic():
        _vision_holds_three(*nlp_holds_two)
        assert read() == [2, 5, 0]
        raise RolledBack
    with read_as_a_page():
        assert read() == [2, 2, 0]


def test_the_forecast_counts_the_transactions_own_request(read_as_a_page):
    """Now 7 December 12:30; the forecast's 13 weeks start 91 days before, at 12:30. A request
    for 2 cards × 1 day submitted 3 days ago is 2 card-days in the last week (index 12); one
    for 1 card × 3 days submitted 10 days and 5 hours ago (no week starts in that hour: it is
    summed from the hourly cache) is 3 card-days in week 11."""
    now = at(7, 12) + timedelta(minutes=30)
    pool, l40s = PoolFactory(slug="p"), GpuModel.objects.get(slug="l40s")

    def ask(cards, days, ago):
        start = now + timedelta(days=7)
        end = start + timedelta(days=days)
        CapacityRequestFactory(pool=pool, gpu_model=l40s, card_count=cards, starts_at=start,
                               ends_at=end, submitted_at=now - ago)  # fmt: skip

    def read():
        [forecast] = demand_forecasts(filters=DashboardFilters(), now=now, usable={})
        return forecast.weekly

    ask(2, 1, timedelta(days=3))
    assert _kept(read, read_as_a_page) == [0.0] * 12 + [2.0]
    with pytest.raises(RolledBack), transaction.atomic():
        ask(1, 3, timedelta(days=10, hours=5))
        assert read() == [0.0] * 11 + [3.0, 2.0]
        raise RolledBack
    with read_as_a_page():
        assert read() == [0.0] * 12 + [2.0]
