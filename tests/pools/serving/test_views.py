"""The Serving page of an allocation (``/allocations/<id>/serving/``): its empty state."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from factories import AllocationFactory

from pools.common.choices import AllocationStatus
from pools.serving.models import ServingRollup
from pools.serving.services import bucket_floor, serving_coverage_note

# at mid-month noon: the newest bucket, the day's and "this month so far" never straddle an edge
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("mid_month")]


def rolled_up(team):
    """An active allocation of ``team`` with one rollup, the newest bucket before now."""
    now = timezone.now()
    allocation = AllocationFactory(
        team=team,
        status=AllocationStatus.ACTIVE,
        card_count=2,
        starts_at=now - timedelta(days=1),
        ends_at=now + timedelta(days=1),
    )
    row = ServingRollup.objects.create(
        allocation=allocation,
        bucket_start=bucket_floor(now) - timedelta(minutes=5),
        cards_held=2,
        engine="vllm",
        requests_waiting=3.0,
    )
    serving_coverage_note([row])
    return allocation


def test_an_allocation_no_rollup_named_says_so_once(client, team, team_member):
    """Another allocation was rolled up five minutes ago (so the fleet's newest rollup is
    fresh); this one, not started yet, never was: the page says there is nothing stored for
    it, instead of twenty "unknown" values under "The 5 minutes to …" (QA: the demo's training
    allocations, one approved for next week and one ended in June, read that way)."""
    rolled_up(team)
    now = timezone.now()
    later = AllocationFactory(
        team=team,
        status=AllocationStatus.APPROVED,
        starts_at=now + timedelta(days=7),
        ends_at=now + timedelta(days=9),
    )
    client.force_login(team_member)
    html = client.get(f"/allocations/{later.pk}/serving/").content.decode()
    assert (
        "No serving signals stored for this allocation: no engine (vLLM, SGLang) or "
        "dcgm-exporter series has named it — its window has not started. Unknown, not idle."
    ) in html
    assert "The 5 minutes to" not in html and "no series answered" not in html


def test_a_rolled_up_allocation_shows_its_newest_values(client, team, team_member):
    allocation = rolled_up(team)
    client.force_login(team_member)
    html = client.get(f"/allocations/{allocation.pk}/serving/").content.decode()
    assert "The 5 minutes to" in html and 'id="serving-none"' not in html


def test_the_breadcrumb_names_the_request_it_links_to(client, team, team_member):
    """The middle crumb links to the allocation's request page: it says "Request #<its id>",
    not the allocation's id (it read "#8" linking to /requests/12/); the allocation's id is
    the last crumb's."""
    import re

    from factories import CapacityRequestFactory

    CapacityRequestFactory(team=team)  # a request without an allocation: the ids part ways
    allocation = rolled_up(team)
    client.force_login(team_member)
    html = client.get(f"/allocations/{allocation.pk}/serving/").content.decode()
    nav = re.search(r'<nav aria-label="breadcrumb">(.*?)</nav>', html).group(1)
    crumbs = re.findall(r'<a href="/requests/(\d+)/">([^<]*)</a>', nav)
    assert crumbs == [(str(allocation.request_id), f"Request #{allocation.request_id}")]
    assert f"<li>Allocation #{allocation.pk} · serving</li>" in nav


def test_this_month_is_the_billing_month_the_dashboards_count(client, team, team_member, settings):
    """Billing in New York: November starts at 04:00 UTC on 1 Nov (EDT, UTC-4). Two buckets of
    2 cards x 300 s = 600 card-s = 0.167 card-h: 1 Nov 02:00 UTC (31 Oct 22:00 in New York:
    October's) and 10 Nov 12:00 UTC. The panel's month is November in New York: 0.167 held
    card-hours, as the team dashboard and its CSV count them - not 0.333 from 1 Nov 00:00
    UTC."""
    from datetime import UTC, datetime
    from decimal import Decimal

    from billing.dashboards.serving import serving_efficiency

    settings.BILLING_TIME_ZONE = "America/New_York"
    allocation = AllocationFactory(
        team=team,
        status=AllocationStatus.ACTIVE,
        card_count=2,
        starts_at=datetime(2026, 10, 1, tzinfo=UTC),
        ends_at=datetime(2026, 12, 1, tzinfo=UTC),
    )
    rows = [
        ServingRollup.objects.create(
            allocation=allocation, bucket_start=at, cards_held=2, cards_reporting=2, cards_busy=1
        )
        for at in (datetime(2026, 11, 1, 2, tzinfo=UTC), datetime(2026, 11, 10, 12, tzinfo=UTC))
    ]
    serving_coverage_note(rows)
    client.force_login(team_member)

    usage = client.get(f"/allocations/{allocation.pk}/serving/").context["usage"]

    assert usage.held_card_hours == Decimal("0.167")
    month = serving_efficiency(allocations=[allocation], month=datetime(2026, 11, 1).date())
    assert month[allocation.pk].usage.held_card_hours == usage.held_card_hours
