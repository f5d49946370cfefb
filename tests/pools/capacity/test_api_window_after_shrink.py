"""The API's ``card_hours`` of an allocation (its whole window) counts the cards it held at each
moment when reclamation shrank it, as the reservation import charges them, in the allocations'
list and detail and in the requests' list: 4 L40S 10 Dec 10:00 -> 20:00 UTC, reclaimed down to
1 card at 12:00."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from factories import AllocationFactory, IdleFindingFactory

from pools.common.choices import AllocationStatus
from pools.inventory.models import GpuModel
from pools.reclamation.services.scan import allocation_reclaim

pytestmark = pytest.mark.django_db

DAY = datetime(2026, 12, 10, tzinfo=UTC)


def _allocation(team, cards=4, **kw):
    return AllocationFactory(
        team=team, card_count=cards, gpu_model=GpuModel.objects.get(slug="l40s"),
        status=AllocationStatus.ACTIVE, starts_at=DAY.replace(hour=10),
        ends_at=DAY.replace(hour=20), **kw,
    )  # fmt: skip


def _shrink_at_noon(allocation):
    finding = IdleFindingFactory(allocation=allocation, first_seen_at=DAY.replace(hour=11))
    assert allocation_reclaim(
        finding, allocation, keep=1, why="idle", now=DAY.replace(hour=12), actor=None
    )
    allocation.refresh_from_db()
    assert allocation.card_count == 1


def test_window_card_hours_follow_the_cards_over_time(api_as, team, team_member):
    """4 × 2 h + 1 × 8 h = 16.000 card-hours (the latest count over the whole window read
    10.000); an allocation never shrunk: 2 × 10 h = 20.000."""
    shrunk = _allocation(team)
    _shrink_at_noon(shrunk)
    kept = _allocation(team, cards=2)
    client = api_as(team_member)

    listed = {
        a["id"]: a["card_hours"] for a in client.get("/api/v1/allocations/").json()["results"]
    }
    assert listed == {shrunk.pk: "16.000", kept.pk: "20.000"}
    assert client.get(f"/api/v1/allocations/{shrunk.pk}/").json()["card_hours"] == "16.000"
    requests = client.get("/api/v1/requests/").json()["results"]
    assert {r["allocation"]["id"]: r["allocation"]["card_hours"] for r in requests} == listed


def test_the_lists_read_the_card_changes_once(api_as, team, team_member):
    """One more allocation, shrunk too, adds no query to either list."""
    _shrink_at_noon(_allocation(team))
    client = api_as(team_member)
    counts = []
    for _ in range(2):
        with CaptureQueriesContext(connection) as allocations:
            assert client.get("/api/v1/allocations/").status_code == 200
        with CaptureQueriesContext(connection) as requests:
            assert client.get("/api/v1/requests/").status_code == 200
        counts.append((len(allocations), len(requests)))
        _shrink_at_noon(_allocation(team))
    assert counts[0] == counts[1]


def test_card_hours_read_to_3_places_rounded_half_up(api_as, team, team_member):
    """2 cards from 10:00:00 to 11:00:45: 2 × 3,645 s / 3,600 = 2.025 card-hours exactly (to 2
    places half-even it read "2.02", a page "2.025"); 3 cards from 10:00:00 to 10:00:01 are
    3 / 3,600 = 0.000833… → "0.001" (half-up from the 4th place)."""
    exact = _allocation(team, cards=2)
    exact.ends_at = DAY.replace(hour=11, minute=0, second=45)
    exact.save()
    tiny = _allocation(team, cards=3)
    tiny.ends_at = DAY.replace(hour=10, second=1)
    tiny.save()
    client = api_as(team_member)

    listed = {
        a["id"]: a["card_hours"] for a in client.get("/api/v1/allocations/").json()["results"]
    }
    assert listed == {exact.pk: "2.025", tiny.pk: "0.001"}
    assert client.get(f"/api/v1/allocations/{exact.pk}/").json()["card_hours"] == "2.025"
    requests = client.get("/api/v1/requests/").json()["results"]
    assert {r["allocation"]["id"]: r["allocation"]["card_hours"] for r in requests} == listed


def test_the_schema_says_card_hours_have_3_decimals(client):
    """The OpenAPI document describes the allocation's ``card_hours`` as the API gives them."""
    schema = client.get("/api/schema/?format=json").json()["components"]["schemas"]
    described = schema["Allocation"]["properties"]["card_hours"]["description"]
    assert "3 decimals rounded half-up" in described and "2.025" in described
