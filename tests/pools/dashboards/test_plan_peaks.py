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
