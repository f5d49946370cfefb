"""A capacity calendar's day counts the hours an allocation held cards before it ended early
(released, or ended by a reclamation), with the cards it held then, as ``/timeline/`` does; the
approval, which asks about the future, still leaves an ended allocation's cards free.

The day, by hand (``infer`` has 2 nodes × 4 L40S: 8 usable), from the services' writes:

- nlp: 4 cards from 00:00 today to day 2, active, shrunk to 1 by a reclamation at 06:00, then
  released at 10:00 (ended, its ``ends_at`` 10:00, its ``card_count`` 1);
- vision: 3 cards from 05:00 today to day 1's 12:00, active (still holding).

Today: 00:00-05:00 4; 05:00-06:00 4 + 3 = 7; 06:00-10:00 1 + 3 = 4; from 10:00 3 → the peak 7,
8 − 7 = 1 free. Counted by status alone (holding only: the old count) the day was vision's 3,
5 free; with the status but today's ``card_count`` 1 it would be 1 + 3 = 4, 4 free. Day 1:
vision's 3 until 12:00 → 5 free. Day 2: 8. From 10:00 today on, an approval sees vision's 3
alone: 5 free.
"""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from factories import AllocationFactory, IdleFindingFactory

from pools.calendar.month import month_days
from pools.calendar.week import free_per_day, week_name
from pools.capacity.availability import holding_intervals, pool_free_cards
from pools.capacity.services.allocations import allocation_release
from pools.common.choices import AllocationStatus, IdleFindingState
from pools.reclamation.services.scan import allocation_reclaim

pytestmark = pytest.mark.django_db


def at(day: int, hour: float):
    """``hour`` o'clock of ``day`` (0: today), local."""
    midnight = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight + timedelta(days=day, hours=hour)


@pytest.fixture
def day(team, other_member, infer_pool, l40s, pool_admin):
    """The day of the module's docstring; returns the allocations by name."""
    vision = other_member.memberships.get().team

    def allocate(owner, cards, start, end):
        return AllocationFactory(team=owner, pool=infer_pool, gpu_model=l40s, card_count=cards,
                                 starts_at=start, ends_at=end,
                                 status=AllocationStatus.ACTIVE)  # fmt: skip

    nlp = allocate(team, 4, at(0, 0), at(2, 0))
    finding = IdleFindingFactory(allocation=nlp, state=IdleFindingState.OPEN,
                                 first_seen_at=at(0, 2), last_seen_at=at(0, 5))  # fmt: skip
    assert allocation_reclaim(finding, nlp, keep=1, why="idle", now=at(0, 6),
                              actor=pool_admin) is not None  # fmt: skip
    nlp.refresh_from_db()
    with mock.patch("django.utils.timezone.now", return_value=at(0, 10)):
        allocation_release(allocation=nlp, actor=pool_admin)
    holding = allocate(vision, 3, at(0, 5), at(1, 12))
    nlp.refresh_from_db()
    # what the services wrote: shrunk to 1, then ended at 10:00
    assert (nlp.status, nlp.card_count, nlp.ends_at) == (AllocationStatus.ENDED, 1, at(0, 10))
    return {"nlp": nlp, "holding": holding, "pool": infer_pool, "model": l40s}


def test_free_per_day_counts_the_hours_before_the_end_with_the_cards_held(day):
    bounds = [at(i, 0) for i in range(4)]
    assert free_per_day(pool=day["pool"], gpu_model=day["model"], bounds=bounds) == [1, 5, 8]


def test_the_week_page_counts_and_lists_the_ended_allocation(day, admin_page):
    """Today's row: 1 free, and the holds that make it: nlp's 4 cards 00:00-06:00, vision's 3
    from 05:00, nlp's 1 card 06:00-10:00 (4 + 3 = 7 held at 05:00-06:00, 8 - 7 = 1). Listed
    with its ``card_count`` now, nlp read "1" for the hours it held 4, and the holds added up to
    1 + 3 = 4 beside a day with 1 free. The week's hold table lists the same two pieces."""
    today = at(0, 0).date()
    url = reverse("pools:pool-calendar", args=["infer", "l40s"])
    response = admin_page.get(url, {"week": week_name(today - timedelta(days=today.weekday()))})
    (row,) = [d for d in response.context["days"] if d.day == today]
    assert row.free == 1
    nlp, vision = day["nlp"].pk, day["holding"].pk
    assert [(h.ref, h.cards, h.starts_at, h.ends_at) for h in row.holds] == [
        (nlp, 4, at(0, 0), at(0, 6)),
        (vision, 3, at(0, 5), at(1, 12)),
        (nlp, 1, at(0, 6), at(0, 10)),
    ]
    listed = [(h.ref, h.cards) for h in response.context["holds"] if h.kind == "allocation"]
    assert listed == [(nlp, 4), (vision, 3), (nlp, 1)]


def test_the_month_counts_the_ended_allocation(day):
    """Today: 1 free, two allocations (nlp once, though its cards make two holds)."""
    first = at(0, 0).date().replace(day=1)
    days = {d.day: d for d in month_days(pool=day["pool"], gpu_model=day["model"], first=first)}
    today = days[at(0, 0).date()]
    assert (today.free, today.allocations) == (1, 2)


def test_the_approval_still_leaves_the_ended_cards_free(day):
    """From 10:00 today to day 1: vision's 3 held, nlp's ended → 8 − 3 = 5 free; today's whole
    day as the approval reads it: vision's 3 only (its intervals unchanged)."""
    pool, model = day["pool"], day["model"]
    assert pool_free_cards(pool=pool, gpu_model=model, start=at(0, 10), end=at(1, 0)) == 5
    intervals = holding_intervals(pool=pool, gpu_model=model, start=at(0, 0), end=at(1, 0))
    assert intervals == [(at(0, 5), at(1, 12), 3)]


def test_the_week_costs_no_more_queries(day, admin_page):
    """16: the 15 of ``test_queries_do_not_grow_with_the_week`` (the held allocations are read
    where the holding ones were) and the rows of the allocation a reclamation changed today,
    now that the ended one is counted (:func:`pools.capacity.selectors.intervals_as_held`;
    counting only holding ones, it was never read: 15)."""
    today = at(0, 0).date()
    url = reverse("pools:pool-calendar", args=["infer", "l40s"])
    query = {"week": week_name(today - timedelta(days=today.weekday()))}
    admin_page.get(url, query)  # the pool's node read is cached from here on
    with CaptureQueriesContext(connection) as counted:
        admin_page.get(url, query)
    assert len(counted) == 16
