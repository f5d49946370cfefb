"""``/timeline/`` and the admin dashboard's plan count the hours an allocation held cards
before it ended early: reclaimed (ended by a reclamation) or released, each ``ends_at`` moved to
that moment by its service. Its cards count from its start to its end, in its team's bars, the
CSV and the plan's peaks, and not after; one that ended yesterday is not on today at all.

The day, by hand (``infer`` has 2 nodes × 4 L40S: 8 usable), all from the services' writes:

- nlp: 4 cards from 00:00 today to day 2, active, ended by a reclamation at 06:00;
- vision: 2 cards from 01:00 today to day 3, active, released at 05:00;
- vision: 3 cards from 05:30 today to day 1's 12:00, approved (still holding);
- nlp: 5 cards from yesterday's 00:00 to day 1, released yesterday at 12:00.

Today: 00:00-01:00 4; 01:00-05:00 4 + 2 = 6; 05:00-05:30 4; 05:30-06:00 4 + 3 = 7; from 06:00
3 → the peak 7 at 05:30, nlp 4 and vision 3 there (the released 2 ended at 05:00), 8 − 7 = 1
free. Counted by status alone (holding only) the day was vision's 3: 5 free. Day 1: vision's 3
from 00:00 → 5 free. Day 2 on: nothing, 8 free. Yesterday's 5 cards end before today."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from factories import AllocationFactory, IdleFindingFactory

from pools.capacity.services.allocations import allocation_release
from pools.common.choices import AllocationStatus, IdleFindingState
from pools.dashboards.capacity import DashboardFilters, allocation_plan
from pools.reclamation.services.scan import allocation_reclaim

pytestmark = pytest.mark.django_db


def at(day: int, hour: float):
    """``hour`` o'clock (fractions: minutes) of the timeline's ``day`` (0: today), local."""
    midnight = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight + timedelta(days=day, hours=hour)


def _released(allocation, actor, when):
    """``allocation`` released by ``actor`` with the clock at ``when``."""
    with mock.patch("django.utils.timezone.now", return_value=when):
        return allocation_release(allocation=allocation, actor=actor)


@pytest.fixture
def day(team, other_member, infer_pool, l40s, pool_admin):
    """The day of the module's docstring; returns the allocations by name."""
    vision = other_member.memberships.get().team

    def allocate(owner, cards, start, end, status=AllocationStatus.ACTIVE):
        return AllocationFactory(team=owner, pool=infer_pool, gpu_model=l40s, card_count=cards,
                                 starts_at=start, ends_at=end, status=status)  # fmt: skip

    reclaimed = allocate(team, 4, at(0, 0), at(2, 0))
    finding = IdleFindingFactory(allocation=reclaimed, state=IdleFindingState.OPEN,
                                 first_seen_at=at(0, 2), last_seen_at=at(0, 5))  # fmt: skip
    assert allocation_reclaim(finding, reclaimed, keep=0, why="idle", now=at(0, 6),
                              actor=pool_admin) is not None  # fmt: skip
    released = _released(allocate(vision, 2, at(0, 1), at(3, 0)), pool_admin, at(0, 5))
    holding = allocate(vision, 3, at(0, 5.5), at(1, 12), status=AllocationStatus.APPROVED)
    yesterday = _released(allocate(team, 5, at(-1, 0), at(1, 0)), pool_admin, at(-1, 12))
    reclaimed.refresh_from_db()
    # what the services wrote: each end moved to when it ended
    assert (reclaimed.status, reclaimed.ends_at) == (AllocationStatus.RECLAIMED, at(0, 6))
    assert (released.status, released.ends_at) == (AllocationStatus.ENDED, at(0, 5))
    assert (yesterday.status, yesterday.ends_at) == (AllocationStatus.ENDED, at(-1, 12))
    return {"reclaimed": reclaimed, "released": released, "holding": holding,
            "yesterday": yesterday}  # fmt: skip


def _chart(client) -> dict:
    (chart,) = client.get("/timeline/").context["charts"]
    return chart


def test_the_hours_before_an_early_end_count_on_today(day, admin_page):
    chart = _chart(admin_page)
    sets = {d["label"]: d["data"] for d in chart["data"]["datasets"]}
    assert sets["NLP"][:3] == [4, 0, 0]
    assert sets["Vision"][:3] == [3, 3, 0]
    assert chart["data"]["peaks"][:2] == ["05:30", "00:00"]
    assert chart["free"][:3] == [1, 5, 8]
    assert chart["fewest_free"] == 1


def test_the_chart_lists_the_allocations_that_held_cards_today(day, admin_page):
    """The reclaimed, the released and the holding one; not yesterday's."""
    chart = _chart(admin_page)
    listed = [a.pk for a in chart["allocations"]]
    assert listed == [day["reclaimed"].pk, day["released"].pk, day["holding"].pk]
    assert chart["allocation_count"] == 3


def test_a_member_sees_their_ended_hours_and_other_teams_summed(day, team_member):
    """nlp's member at today's 05:30: NLP 4, "other teams" (vision) 3."""
    client = Client()
    client.force_login(team_member)
    sets = {d["label"]: d["data"] for d in _chart(client)["data"]["datasets"]}
    assert sets["NLP"][:2] == [4, 0]
    assert sets["other teams"][:2] == [3, 3]


def test_the_csv_counts_the_hours_before_the_end(day, admin_page):
    """Today's and tomorrow's rows: nlp 4 and vision 3 at 05:30; nlp 0 and vision 3 at day 1's
    00:00."""
    response = admin_page.get("/timeline/?export=csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    d0, d1 = at(0, 0).date().isoformat(), at(1, 0).date().isoformat()
    got = [
        (r["day"], r["team"], r["cards_held_at_peak"], r["peak_at"], r["usable_cards"])
        for r in rows
        if r["day"] in (d0, d1)
    ]
    assert got == [
        (d0, "nlp", "4", at(0, 5.5).isoformat(), "8"),
        (d0, "vision", "3", at(0, 5.5).isoformat(), "8"),
        (d1, "nlp", "0", at(1, 0).isoformat(), "8"),
        (d1, "vision", "3", at(1, 0).isoformat(), "8"),
    ]


def test_the_plan_counts_the_hours_before_the_end(day):
    """The plan at 09:00: 7 held at 05:30, 3 tomorrow at 00:00, then none; nothing held now
    but vision's 3."""
    series = allocation_plan(filters=DashboardFilters(), now=at(0, 9))[("infer", "l40s")]
    assert series.held[:3] == [7, 3, 0]
    assert series.held_at[:2] == [at(0, 5.5), at(1, 0)]


def test_the_plan_narrowed_to_a_team_counts_its_ended_hours(day):
    """nlp alone: its reclaimed 4 from 00:00 (yesterday's 5 ended yesterday), then nothing.
    vision alone: 2 from 01:00 to 05:00 and 3 from 05:30 → 3 at 05:30; 3 tomorrow."""
    nlp = allocation_plan(filters=DashboardFilters(team="nlp"), now=at(0, 9))[("infer", "l40s")]
    assert nlp.held[:2] == [4, 0]
    assert nlp.held_at[0] == at(0, 0)
    vision = allocation_plan(filters=DashboardFilters(team="vision"), now=at(0, 9))
    assert vision[("infer", "l40s")].held[:2] == [3, 3]
    assert vision[("infer", "l40s")].held_at[0] == at(0, 5.5)


def test_an_allocation_ended_yesterday_is_not_on_today(
    team, infer_pool, l40s, pool_admin, admin_page
):
    """nlp's 5 cards from yesterday's 00:00 to day 1, released yesterday at 12:00, alone: no
    chart (nothing held in the 8 weeks), no plan."""
    allocation = AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=5,
                                   starts_at=at(-1, 0), ends_at=at(1, 0),
                                   status=AllocationStatus.ACTIVE)  # fmt: skip
    _released(allocation, pool_admin, at(-1, 12))
    assert admin_page.get("/timeline/").context["charts"] == []
    assert ("infer", "l40s") not in allocation_plan(filters=DashboardFilters(), now=at(0, 9))


def test_an_early_end_today_costs_at_most_two_queries_more(
    team, other_member, infer_pool, l40s, admin_page, django_assert_max_num_queries
):
    """Inside a test's transaction nothing is kept, so every read is counted. A reclamation's
    end today is found among the peaks' and the bars' changed allocations; its rows are read
    (one query each) and nothing moves: it held its ``card_count`` until its end."""
    allocation = AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=4,
                                   starts_at=at(0, 0), ends_at=at(2, 0),
                                   status=AllocationStatus.ACTIVE)  # fmt: skip
    admin_page.get("/timeline/")  # the inventory's census, kept per inventory generation
    with CaptureQueriesContext(connection) as before:
        admin_page.get("/timeline/")
    finding = IdleFindingFactory(allocation=allocation, state=IdleFindingState.OPEN,
                                 first_seen_at=at(0, 2), last_seen_at=at(0, 5))  # fmt: skip
    allocation_reclaim(finding, allocation, keep=0, why="idle", now=at(0, 6), actor=None)
    with django_assert_max_num_queries(len(before) + 2):
        response = admin_page.get("/timeline/")
    assert response.status_code == 200
    assert response.context["charts"][0]["data"]["datasets"][0]["data"][0] == 4
