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
    """4 × 2 h + 1 × 8 h = 16.00 card-hours (the latest count over the whole window read
    10.00); an allocation never shrunk: 2 × 10 h = 20.00."""
    shrunk = _allocation(team)
    _shrink_at_noon(shrunk)
    kept = _allocation(team, cards=2)
    client = api_as(team_member)

    listed = {
        a["id"]: a["card_hours"] for a in client.get("/api/v1/allocations/").json()["results"]
    }
    assert listed == {shrunk.pk: "16.00", kept.pk: "20.00"}
    assert client.get(f"/api/v1/allocations/{shrunk.pk}/").json()["card_hours"] == "16.00"
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
