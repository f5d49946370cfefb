"""My teams counts an allocation's card-hours, held so far and in its whole window, with the
cards it held at each moment when reclamation shrank it (what the reservation import charges):
4 cards 10 Dec 10:00 -> 20:00 UTC, reclaimed down to 1 card at 12:00, seen at 14:00."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from unittest import mock

import pytest
from factories import AllocationFactory, IdleFindingFactory, MembershipFactory, TeamFactory

from pools.common.choices import AllocationStatus
from pools.reclamation.services.scan import allocation_reclaim

pytestmark = pytest.mark.django_db

DAY = datetime(2026, 12, 10, tzinfo=UTC)


@pytest.fixture
def shrunk(member):
    team = TeamFactory(slug="nlp", name="NLP")
    MembershipFactory(team=team, user=member)
    allocation = AllocationFactory(
        team=team, card_count=4, status=AllocationStatus.ACTIVE,
        starts_at=DAY.replace(hour=10), ends_at=DAY.replace(hour=20),
    )  # fmt: skip
    finding = IdleFindingFactory(allocation=allocation, first_seen_at=DAY.replace(hour=11))
    assert allocation_reclaim(
        finding, allocation, keep=1, why="idle", now=DAY.replace(hour=12), actor=None
    )
    allocation.refresh_from_db()
    assert allocation.card_count == 1
    return allocation


def test_held_and_window_card_hours_follow_the_cards_over_time(member_page, shrunk):
    """Held so far 4 × 2 h + 1 × 2 h = 10 card-h; window 4 × 2 h + 1 × 8 h = 16 card-h (the
    latest count over the whole window read 10: less than what was held)."""
    with mock.patch("django.utils.timezone.now", return_value=DAY.replace(hour=14)):
        page = member_page.get("/teams/mine/").content.decode()
        export = member_page.get("/teams/mine/?export=allocations")
    text = " ".join(page.split())
    assert "10.000 / 16.000" in text
    rows = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    assert [(r["allocation"], r["cards"], r["held_card_hours"], r["window_card_hours"])
            for r in rows] == [(str(shrunk.pk), "1", "10.000", "16.000")]  # fmt: skip
