"""The admin dashboard's plan of the next 8 weeks counts what the timeline counts, on the
timeline's days: local days of the portal's zone (``TIME_ZONE``; the portal has no zone per
user), each drawn at its busiest instant inside that local day, and besides the allocations the
cards recurring reservations hold and planned maintenance windows take away, as the approval,
the explainer and ``/timeline/`` count them. It drew days from UTC midnight and left both out,
so a day with a recurring slot or a node in maintenance looked freer than an approval finds it.

Fleet: pool ``infer`` (2 nodes × 4 L40S, over-commit 1: 8 usable). The portal runs in
Europe/Berlin (UTC+1 in December); the dashboard's ``now`` is 09:00 Berlin on Monday 7 Dec 2026.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, time, timedelta
from unittest import mock
from zoneinfo import ZoneInfo

import pytest
from django.test import override_settings
from factories import (
    AllocationFactory,
    MaintenanceWindowFactory,
    RecurringReservationFactory,
    TeamFactory,
)

from pools.dashboards.capacity import DashboardFilters, allocation_plan, plan_days
from pools.inventory.models import Node
from pools.maintenance.models import MaintenanceScope
from pools.recurring.models import Recurrence

pytestmark = pytest.mark.django_db

BERLIN = ZoneInfo("Europe/Berlin")
D0 = datetime(2026, 12, 7, tzinfo=BERLIN)  # local midnight of the plan's first day
NOW = (D0 + timedelta(hours=9)).astimezone(UTC)  # as timezone.now() gives it


def local(day: int, hour: int = 0, minute: int = 0) -> datetime:
    return D0 + timedelta(days=day, hours=hour, minutes=minute)


@pytest.fixture(autouse=True)
def berlin():
    with override_settings(TIME_ZONE="Europe/Berlin"):
        yield


def test_the_plans_days_are_local_days():
    """56 local midnights from 7 Dec 2026 00:00 Berlin (6 Dec 23:00 UTC), not UTC ones."""
    days = plan_days(NOW)
    assert days[0] == datetime(2026, 12, 6, 23, tzinfo=UTC)
    assert days[1] == datetime(2026, 12, 7, 23, tzinfo=UTC)
    assert [d.date() for d in days[:2]] == [D0.date(), (D0 + timedelta(days=1)).date()]
    assert len(days) == 56


def test_an_allocation_just_after_local_midnight_counts_on_that_local_day(infer_pool, l40s):
    """3 cards from 23:15 UTC on 7 Dec to 00:45 UTC on 8 Dec: in Berlin 00:15-01:45 on 8 Dec,
    so local day 1 holds 3 from 00:15 and day 0 none (a plan of UTC days put 3 on day 0)."""
    AllocationFactory(team=TeamFactory(slug="nlp"), pool=infer_pool, gpu_model=l40s,
                      card_count=3, starts_at=datetime(2026, 12, 7, 23, 15, tzinfo=UTC),
                      ends_at=datetime(2026, 12, 8, 0, 45, tzinfo=UTC))  # fmt: skip
    series = allocation_plan(filters=DashboardFilters(), now=NOW)[("infer", "l40s")]
    assert series.held[:3] == [0, 3, 0]
    assert series.held_at[1] == local(1, 0, 15)


@pytest.fixture
def blocked(infer_pool, l40s):
    """nlp holds 2 cards from day 0 to day 10; vision's course holds 4 cards 09:00-18:00 Berlin
    every day of days 2-4; inf-01 (4 of the 8 cards) is in maintenance on day 5 06:00-12:00."""
    nlp, vision = TeamFactory(slug="nlp"), TeamFactory(slug="vision")
    AllocationFactory(team=nlp, pool=infer_pool, gpu_model=l40s, card_count=2,
                      starts_at=local(0), ends_at=local(10), status="active")  # fmt: skip
    RecurringReservationFactory(
        team=vision, pool=infer_pool, gpu_model=l40s, card_count=4,
        recurrence=Recurrence.DAILY, time_zone="Europe/Berlin",
        first_date=local(2).date(), last_date=local(4).date(),
        start_time=time(9), end_time=time(18),
    )  # fmt: skip
    window = MaintenanceWindowFactory(pool=infer_pool, scope=MaintenanceScope.NODES,
                                      starts_at=local(5, 6), ends_at=local(5, 12))  # fmt: skip
    window.nodes.set(Node.objects.filter(hostname="inf-01"))


@pytest.mark.usefixtures("blocked")
def test_recurring_reservations_and_maintenance_are_held_on_their_days():
    """Held at each day's busiest instant: 2 on days 0-1; 2 + 4 = 6 on days 2-4 at 09:00 (the
    course); 2 + 4 = 6 on day 5 at 06:00 (inf-01's 4 cards away); 2 on days 6-9; 0 after.
    Of them, the course's 4 on days 2-4 and maintenance's 4 on day 5; the rest allocations."""
    series = allocation_plan(filters=DashboardFilters(), now=NOW)[("infer", "l40s")]
    assert series.held[:11] == [2, 2, 6, 6, 6, 6, 2, 2, 2, 2, 0]
    assert sum(series.held[11:]) == 0
    assert series.held_at[2:6] == [local(2, 9), local(3, 9), local(4, 9), local(5, 6)]
    assert series.recurring[:7] == [0, 0, 4, 4, 4, 0, 0]
    assert series.maintenance[:7] == [0, 0, 0, 0, 0, 4, 0]
    assert sum(series.recurring[7:]) == sum(series.maintenance[7:]) == 0
    assert (series.held_now, series.blocked_now) == (2, 0)


@pytest.mark.usefixtures("blocked")
def test_the_plan_agrees_with_the_timeline(team_member):
    """The timeline's bars of a day (teams, recurring reservations, maintenance) sum to the
    plan's held cards of that day, at the same instant."""
    from django.test import Client

    client = Client()
    client.force_login(team_member)
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        chart = client.get("/timeline/").context["charts"][0]
        series = allocation_plan(filters=DashboardFilters(), now=NOW)[("infer", "l40s")]
    bars = [d["data"] for d in chart["data"]["datasets"] if d["type"] == "bar"]
    assert [sum(day) for day in zip(*bars, strict=True)] == series.held


@pytest.mark.usefixtures("blocked")
def test_a_team_filter_counts_that_teams_reservations_and_no_maintenance():
    """vision holds no allocation but the course: 4 on days 2-4, nothing else (a maintenance
    window is no team's); nlp: its 2 cards on days 0-9, not the course."""
    vision = allocation_plan(filters=DashboardFilters(team="vision"), now=NOW)[("infer", "l40s")]
    assert vision.held[:7] == [0, 0, 4, 4, 4, 0, 0]
    nlp = allocation_plan(filters=DashboardFilters(team="nlp"), now=NOW)[("infer", "l40s")]
    assert nlp.held[:11] == [2] * 10 + [0]


def test_a_maintenance_window_in_force_now_is_not_free_now(infer_pool, l40s, admin_page):
    """inf-01 out from 08:00 to 12:00 today and nothing allocated: at 09:00 8 usable, 0
    allocated, 4 free (was 8)."""
    window = MaintenanceWindowFactory(pool=infer_pool, scope=MaintenanceScope.NODES,
                                      starts_at=local(0, 8), ends_at=local(0, 12))  # fmt: skip
    window.nodes.set(Node.objects.filter(hostname="inf-01"))
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        page = admin_page.get("/dashboard/")
    [row] = [r for r in page.context["rows"] if r.pool_slug == "infer"]
    assert (row.usable, row.allocated, row.free) == (8, 0, 4)


@pytest.mark.usefixtures("blocked")
def test_the_plan_csv_has_local_days_and_the_blocked_cards(admin_page):
    """Day 2 (9 Dec, Berlin): 6 held at 09:00 Berlin: 2 allocated, 4 recurring, 0 maintenance;
    day 5 (12 Dec): 2 allocated and 4 in maintenance at 06:00. Times in the portal's zone."""
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        response = admin_page.get("/dashboard/?export=plan")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    infer = [r for r in rows if r["pool"] == "infer"]
    assert [r["day"] for r in infer[:2]] == ["2026-12-07", "2026-12-08"]
    day2, day5 = infer[2], infer[5]
    assert (day2["day"], day2["allocated_cards_at_peak"], day2["recurring_cards_at_peak"],
            day2["maintenance_cards_at_peak"], day2["allocated_peak_at"]) == (
        "2026-12-09", "2", "4", "0", "2026-12-09T09:00:00+01:00")  # fmt: skip
    assert (day5["day"], day5["allocated_cards_at_peak"], day5["recurring_cards_at_peak"],
            day5["maintenance_cards_at_peak"], day5["allocated_peak_at"]) == (
        "2026-12-12", "2", "0", "4", "2026-12-12T06:00:00+01:00")  # fmt: skip


def _plan_chart_label(admin_page) -> str:
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        page = admin_page.get("/dashboard/").content.decode()
    canvas = page[page.index('<canvas id="plan-chart"') :]
    return canvas[canvas.index('aria-label="') + len('aria-label="') : canvas.index('"></canvas>')]


@pytest.mark.usefixtures("blocked")
def test_the_plan_charts_label_names_the_bars_it_draws(admin_page):
    """With the course's recurring reservation and inf-01's maintenance window the chart
    draws four bars (allocated, recurring, maintenance, pending) and a line; its text for
    screen readers names them all, as the chart's legend does."""
    assert _plan_chart_label(admin_page) == (
        "Cards held per day by allocated (approved and later), recurring reservations and "
        "maintenance, with pending (submitted) requests stacked on top, against usable cards"
    )


def test_without_reservations_or_maintenance_the_plan_charts_label_names_allocations(
    admin_page, infer_pool, l40s
):
    """No recurring reservation, no maintenance window: neither bar is drawn nor named."""
    assert _plan_chart_label(admin_page) == (
        "Cards held per day by allocated (approved and later), with pending (submitted) "
        "requests stacked on top, against usable cards"
    )
