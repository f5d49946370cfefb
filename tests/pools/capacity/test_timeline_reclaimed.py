"""``/timeline/`` counts the hours before a reclamation's shrink or undo with the cards the
allocation held then (the card timeline, :mod:`pools.reclamation.card_timeline`), in its peaks
and in each team's summed bars, as the admin dashboard's plan does; an elastic allocation's
borrowed burst cards are not held capacity, so a scale-up leaves its floor on the timeline."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from factories import (
    AllocationFactory,
    ElasticPolicyFactory,
    IdleFindingFactory,
    ScaleEventFactory,
)

from pools.common.choices import IdleFindingState
from pools.dashboards.capacity import DashboardFilters, allocation_plan

pytestmark = pytest.mark.django_db


def at(day: int, hour: int):
    """``hour`` o'clock of the timeline's ``day`` (0: today), local."""
    midnight = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight + timedelta(days=day, hours=hour)


def _reclaimed(allocation, *, held: int, kept: int, at_, undone_at=None):
    """``allocation`` (its ``card_count`` already the cards it holds now) reclaimed at ``at_``
    from ``held`` cards to ``kept``, and undone at ``undone_at`` when given."""
    IdleFindingFactory(
        allocation=allocation, first_seen_at=at_, last_seen_at=at_, reclaimed_at=at_,
        card_count=held, cards_in_use=kept, closed_at=undone_at or at_,
        state=IdleFindingState.UNDONE if undone_at else IdleFindingState.RECLAIMED,
    )  # fmt: skip


@pytest.fixture
def shrunk(team, other_member, infer_pool, l40s):
    """nlp's 4 cards from 01:00 today to day 2, shrunk to 1 card at 06:00 today (its
    ``card_count`` now 1); vision's 2 cards from 04:00 to 08:00 today. Returns a function that
    makes the reclamation (so a test can count the page's queries before it)."""
    vision = other_member.memberships.get().team
    kept = AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=1,
                             starts_at=at(0, 1), ends_at=at(2, 0))  # fmt: skip
    AllocationFactory(team=vision, pool=infer_pool, gpu_model=l40s, card_count=2,
                      starts_at=at(0, 4), ends_at=at(0, 8))  # fmt: skip
    return lambda: _reclaimed(kept, held=4, kept=1, at_=at(0, 6))


def _charts(client) -> dict:
    (chart,) = client.get("/timeline/").context["charts"]
    return chart


def test_the_hours_before_a_shrink_count_the_cards_then_held(shrunk, admin_page):
    """Today: 01:00-04:00 nlp's 4; 04:00-06:00 4 + vision's 2 = 6; 06:00-08:00 1 + 2 = 3; then
    1 → the peak is 6 at 04:00, nlp's bar 4 and vision's 2 (today's ``card_count`` over the
    whole window said 1 + 2 = 3 at 04:00), 8 − 6 = 2 free. Day 1: nlp's 1 from 00:00, 7 free.
    Day 2 on: nothing held (nlp's window ends at day 2's 00:00), 8 free."""
    shrunk()
    chart = _charts(admin_page)
    sets = {d["label"]: d["data"] for d in chart["data"]["datasets"]}
    assert sets["NLP"][:3] == [4, 1, 0]
    assert sets["Vision"][:3] == [2, 0, 0]
    assert chart["data"]["peaks"][:2] == ["04:00", "00:00"]
    assert chart["free"][:3] == [2, 7, 8]
    assert chart["fewest_free"] == 2


def test_a_member_sees_the_cards_then_held_and_other_teams_summed(shrunk, team_member):
    """nlp's member: NLP 4 and "other teams" 2 at today's 04:00, as the admin's bars."""
    shrunk()
    client = Client()
    client.force_login(team_member)
    sets = {d["label"]: d["data"] for d in _charts(client)["data"]["datasets"]}
    assert sets["NLP"][:2] == [4, 1]
    assert sets["other teams"][:2] == [2, 0]


def test_the_csv_counts_the_cards_then_held(shrunk, admin_page):
    """The CSV's rows of today and tomorrow: nlp 4 and vision 2 at today's 04:00; nlp 1 and
    vision 0 at tomorrow's 00:00; 8 usable (2 nodes × 4 L40S)."""
    shrunk()
    response = admin_page.get("/timeline/?export=csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    got = [
        (r["day"], r["team"], r["cards_held_at_peak"], r["peak_at"], r["usable_cards"])
        for r in rows
        if r["day"] in (at(0, 0).date().isoformat(), at(1, 0).date().isoformat())
    ]
    d0, d1 = at(0, 0).date().isoformat(), at(1, 0).date().isoformat()
    assert got == [
        (d0, "nlp", "4", at(0, 4).isoformat(), "8"),
        (d0, "vision", "2", at(0, 4).isoformat(), "8"),
        (d1, "nlp", "1", at(1, 0).isoformat(), "8"),
        (d1, "vision", "0", at(1, 0).isoformat(), "8"),
    ]


def test_the_timeline_and_the_plan_agree_on_the_cards_then_held(shrunk):
    """The admin dashboard's plan of the same day: 6 held at 04:00, tomorrow 1."""
    shrunk()
    series = allocation_plan(filters=DashboardFilters(), now=at(0, 9))[("infer", "l40s")]
    assert series.held[:2] == [6, 1]
    assert series.held_at[:2] == [at(0, 4), at(1, 0)]


def test_an_undone_end_held_no_card_between_its_reclamation_and_the_undo(
    team, other_member, infer_pool, l40s, admin_page
):
    """nlp's 3 cards from 00:00 today to day 3, ended at 02:00 and undone at 05:00 (its
    ``card_count`` 3 again); vision's 2 cards from 02:00 to 05:00, in the cards nlp gave back.
    Today: 00:00-02:00 3; 02:00-05:00 0 + 2 = 2; from 05:00 3 → the peak 3 at 00:00, nlp 3 and
    vision 0 there (3 + 2 = 5 at 02:00 were never held at once); 5 free."""
    nlp = AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=3,
                            starts_at=at(0, 0), ends_at=at(3, 0))  # fmt: skip
    _reclaimed(nlp, held=3, kept=0, at_=at(0, 2), undone_at=at(0, 5))
    vision = other_member.memberships.get().team
    AllocationFactory(team=vision, pool=infer_pool, gpu_model=l40s, card_count=2,
                      starts_at=at(0, 2), ends_at=at(0, 5))  # fmt: skip
    chart = _charts(admin_page)
    sets = {d["label"]: d["data"] for d in chart["data"]["datasets"]}
    assert (sets["NLP"][0], sets["Vision"][0]) == (3, 0)
    assert chart["data"]["peaks"][0] == "00:00"
    assert chart["free"][:2] == [5, 5]


def test_an_elastic_scale_up_leaves_the_floor_on_the_timeline(team, infer_pool, l40s, admin_page):
    """nlp's elastic allocation: floor 2 from 00:00 today to day 2, scaled up to 4 from 03:00 to
    05:00 today (borrowed burst cards, handed back when an approval needs them, so not counted
    by the approval): the timeline draws its floor, 2 held and 8 − 2 = 6 free on days 0 and 1."""
    policy = ElasticPolicyFactory(
        allocation=AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=2,
                                     starts_at=at(0, 0), ends_at=at(2, 0)),
        ceiling_cards=4, cards_held=2,
    )  # fmt: skip
    ScaleEventFactory(policy=policy, decided_at=at(0, 3), cards_from=2, cards_to=4)
    ScaleEventFactory(policy=policy, decided_at=at(0, 5), action="down", reason="scale_down",
                      cards_from=4, cards_to=2)  # fmt: skip
    chart = _charts(admin_page)
    sets = {d["label"]: d["data"] for d in chart["data"]["datasets"]}
    assert sets["NLP"][:3] == [2, 2, 0]
    assert chart["free"][:3] == [6, 6, 8]


def test_a_shrink_today_costs_at_most_three_queries_more(
    shrunk, admin_page, django_assert_max_num_queries
):
    """Inside a test's transaction nothing is kept, so every read is counted: the page reads one
    query each for the peaks' and the bars' changed allocations on any day; on a day with a
    shrink, the peaks read the changed rows and their pool × model's allocations (two), the bars
    the changed rows (one)."""
    admin_page.get("/timeline/")  # the inventory's census, kept per inventory generation
    with CaptureQueriesContext(connection) as before:
        admin_page.get("/timeline/")
    shrunk()
    with django_assert_max_num_queries(len(before) + 3):
        response = admin_page.get("/timeline/")
    assert response.status_code == 200
