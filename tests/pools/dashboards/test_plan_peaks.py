"""The admin dashboard's plan draws each day at its busiest instant, as the timeline does
(:func:`pools.capacity.arithmetic.peaks_per_span`): an allocation of a few hours away from noon
counts on its day, two that never hold cards at one instant are not added, two that do are."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from factories import AllocationFactory, CapacityRequestFactory, TeamFactory

from pools.dashboards.capacity import DashboardFilters, allocation_plan

pytestmark = pytest.mark.django_db

D0 = datetime(2026, 12, 7, tzinfo=UTC)  # the plan's first day; now is 09:00 on it


def at(day: int, hour: int) -> datetime:
    return D0 + timedelta(days=day, hours=hour)


@pytest.fixture
def booked(infer_pool, l40s):
    """Allocations and submitted requests of infer × L40S on the plan's first four days."""
    nlp, vision = TeamFactory(slug="nlp"), TeamFactory(slug="vision")

    def allocate(team, cards, start, end):
        AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=cards,
                          starts_at=start, ends_at=end)  # fmt: skip

    def ask(team, cards, start, end):
        CapacityRequestFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=cards,
                               starts_at=start, ends_at=end)  # fmt: skip

    allocate(nlp, 2, at(0, 13), at(0, 23))  # day 0: after noon only
    allocate(nlp, 3, at(1, 1), at(1, 5))  # day 1: 3 cards, then ...
    allocate(vision, 4, at(1, 5), at(1, 9))  # ... 4 from the instant the 3 end
    allocate(nlp, 3, at(2, 1), at(2, 10))  # day 2: 3 cards, and from 08:00 ...
    allocate(vision, 4, at(2, 8), at(2, 20))  # ... 4 more at once
    ask(nlp, 5, at(3, 14), at(3, 16))  # day 3: pending 5 in the afternoon, ...
    ask(nlp, 2, at(3, 20), at(3, 22))  # ... then 2 in the evening


def test_each_day_is_drawn_at_its_busiest_instant(booked):
    """Worked by hand (half-open windows, days from 00:00 UTC):

    - day 0: 2 cards from 13:00 to 23:00 hold nothing at noon but 2 at 13:00 → 2 at 13:00;
    - day 1: 3 cards 01:00-05:00, then 4 cards 05:00-09:00: at 05:00 the 3 end as the 4 start,
      never 7 at once → 4 at 05:00 (3 before);
    - day 2: 3 cards 01:00-10:00 and 4 cards 08:00-20:00 overlap from 08:00 to 10:00 → 3 + 4
      = 7 at 08:00 (a noon sample saw 4);
    - day 3: nothing held → 0, from the day's start; pending requests 5 cards 14:00-16:00 and
      2 cards 20:00-22:00 never overlap → 5 at 14:00 (a noon sample saw 0).
    """
    plan = allocation_plan(filters=DashboardFilters(), now=at(0, 9))
    series = plan[("infer", "l40s")]
    assert series.held[:4] == [2, 4, 7, 0]
    assert series.held_at[:4] == [at(0, 13), at(1, 5), at(2, 8), at(3, 0)]
    assert series.pending[:4] == [0, 0, 0, 5]
    assert series.pending_at[3] == at(3, 14)
    assert sum(series.held[4:]) == sum(series.pending[4:]) == 0
    assert series.held_now == 0  # at 09:00 on day 0 nothing has started


def test_a_team_filter_peaks_that_teams_allocations_alone(booked):
    """vision alone: day 1 its 4 cards at 05:00, day 2 its 4 cards from 08:00 (nlp's 3 left
    out), nothing on day 0; the pending requests are nlp's → none."""
    plan = allocation_plan(filters=DashboardFilters(team="vision"), now=at(0, 9))
    series = plan[("infer", "l40s")]
    assert series.held[:4] == [0, 4, 4, 0]
    assert series.held_at[1:3] == [at(1, 5), at(2, 8)]
    assert series.pending[:4] == [0, 0, 0, 0]


def test_the_plan_csv_says_each_days_peak_and_when(infer_pool, l40s, admin_page):
    """2 cards from 13:00 to 23:00 tomorrow (UTC): tomorrow's row says 2 allocated at 13:00,
    none pending (so from the day's start), of 8 usable (2 nodes × 4 L40S, over-commit 1)."""
    from django.utils import timezone

    tomorrow = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    AllocationFactory(team=TeamFactory(slug="nlp"), pool=infer_pool, gpu_model=l40s,
                      card_count=2, starts_at=tomorrow + timedelta(hours=13),
                      ends_at=tomorrow + timedelta(hours=23))  # fmt: skip
    response = admin_page.get("/dashboard/?export=plan")
    lines = b"".join(response.streaming_content).decode().strip().splitlines()
    assert lines[0] == (
        "pool,gpu_model,day,allocated_cards_at_peak,allocated_peak_at,pending_cards_at_peak,"
        "pending_peak_at,usable_cards,recurring_cards_at_peak,maintenance_cards_at_peak"
    )
    day = tomorrow.date().isoformat()
    assert lines[2] == (f"infer,l40s,{day},2,{day}T13:00:00+00:00,0,{day}T00:00:00+00:00,8,0,0")


def _reclaimed(allocation, *, held: int, kept: int, at_, undone_at=None):
    """``allocation`` (its ``card_count`` already the cards it holds now) reclaimed at ``at_``
    from ``held`` cards to ``kept``, and undone at ``undone_at`` when given."""
    from factories import IdleFindingFactory

    from pools.common.choices import IdleFindingState

    IdleFindingFactory(
        allocation=allocation, first_seen_at=at_, last_seen_at=at_, reclaimed_at=at_,
        card_count=held, cards_in_use=kept, closed_at=undone_at or at_,
        state=IdleFindingState.UNDONE if undone_at else IdleFindingState.RECLAIMED,
    )  # fmt: skip


@pytest.fixture
def shrunk(infer_pool, l40s):
    """nlp's 4 cards from 01:00 on day 0 to day 2, shrunk to 1 card at 06:00 on day 0 (its
    ``card_count`` now 1); vision's 2 cards from 04:00 to 08:00 on day 0."""
    nlp, vision = TeamFactory(slug="nlp"), TeamFactory(slug="vision")
    kept = AllocationFactory(team=nlp, pool=infer_pool, gpu_model=l40s, card_count=1,
                             starts_at=at(0, 1), ends_at=at(2, 0))  # fmt: skip
    _reclaimed(kept, held=4, kept=1, at_=at(0, 6))
    AllocationFactory(team=vision, pool=infer_pool, gpu_model=l40s, card_count=2,
                      starts_at=at(0, 4), ends_at=at(0, 8))  # fmt: skip


def test_the_hours_before_a_shrink_count_the_cards_then_held(shrunk):
    """The card timeline's count on day 0: 01:00-04:00 nlp's 4; 04:00-06:00 4 + vision's 2 =
    6; 06:00-08:00 1 + 2 = 3; then 1 → 6 at 04:00 (today's ``card_count`` over the whole
    window said 1 + 2 = 3 at 04:00). Day 1: nlp's 1 card from the day's start. Now (09:00):
    1 held."""
    series = allocation_plan(filters=DashboardFilters(), now=at(0, 9))[("infer", "l40s")]
    assert series.held[:3] == [6, 1, 0]
    assert series.held_at[:2] == [at(0, 4), at(1, 0)]
    assert series.allocated[:2] == [6, 1]
    assert series.held_now == 1


def test_a_team_filtered_plan_counts_the_cards_before_a_shrink_too(shrunk):
    """nlp alone: 4 cards from 01:00 to 06:00, then 1 → 4 at 01:00 on day 0, 1 on day 1."""
    series = allocation_plan(filters=DashboardFilters(team="nlp"), now=at(0, 9))[("infer", "l40s")]
    assert series.held[:2] == [4, 1]
    assert series.held_at[:2] == [at(0, 1), at(1, 0)]


def test_an_undone_end_held_no_card_between_its_reclamation_and_the_undo(infer_pool, l40s):
    """nlp's 3 cards from 00:00 on day 0 to day 3, ended at 02:00 and undone at 05:00 (its
    ``card_count`` 3 again); vision's 2 cards from 02:00 to 05:00, in the cards nlp gave back.
    Day 0: 00:00-02:00 3; 02:00-05:00 0 + 2 = 2; from 05:00 3 → 3 at 00:00 (3 + 2 = 5 at
    02:00 were never held at once). Day 1: 3 from the day's start."""
    nlp = AllocationFactory(team=TeamFactory(slug="nlp"), pool=infer_pool, gpu_model=l40s,
                            card_count=3, starts_at=at(0, 0), ends_at=at(3, 0))  # fmt: skip
    _reclaimed(nlp, held=3, kept=0, at_=at(0, 2), undone_at=at(0, 5))
    AllocationFactory(team=TeamFactory(slug="vision"), pool=infer_pool, gpu_model=l40s,
                      card_count=2, starts_at=at(0, 2), ends_at=at(0, 5))  # fmt: skip
    series = allocation_plan(filters=DashboardFilters(), now=at(0, 9))[("infer", "l40s")]
    assert series.held[:3] == [3, 3, 3]
    assert series.held_at[:2] == [at(0, 0), at(1, 0)]


def test_the_plan_csv_counts_todays_hours_before_a_shrink(infer_pool, l40s, admin_page):
    """Today (UTC): nlp's 4 cards from 01:00 to tomorrow's end, shrunk to 1 at 06:00; vision's
    2 cards 04:00-08:00 → today's row: 4 + 2 = 6 allocated at 04:00, none pending, of 8 usable
    (2 nodes × 4 L40S); tomorrow's: 1 from its start."""
    from django.utils import timezone

    today = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    kept = AllocationFactory(team=TeamFactory(slug="nlp"), pool=infer_pool, gpu_model=l40s,
                             card_count=1, starts_at=today + timedelta(hours=1),
                             ends_at=today + timedelta(days=2))  # fmt: skip
    _reclaimed(kept, held=4, kept=1, at_=today + timedelta(hours=6))
    AllocationFactory(team=TeamFactory(slug="vision"), pool=infer_pool, gpu_model=l40s,
                      card_count=2, starts_at=today + timedelta(hours=4),
                      ends_at=today + timedelta(hours=8))  # fmt: skip
    response = admin_page.get("/dashboard/?export=plan")
    lines = b"".join(response.streaming_content).decode().strip().splitlines()
    day, next_day = today.date().isoformat(), (today + timedelta(days=1)).date().isoformat()
    assert lines[1] == f"infer,l40s,{day},6,{day}T04:00:00+00:00,0,{day}T00:00:00+00:00,8,0,0"
    assert lines[2] == (
        f"infer,l40s,{next_day},1,{next_day}T00:00:00+00:00,0,{next_day}T00:00:00+00:00,8,0,0"
    )
