"""A capacity calendar's past days count the cards an allocation held then: a reclamation's
shrink does not lower the free cards of the hours before it (the card timeline,
:mod:`pools.reclamation.card_timeline`, as ``/timeline/`` and billing count them)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from django.urls import reverse
from factories import AllocationFactory, IdleFindingFactory, TeamFactory

from pools.calendar.month import month_days
from pools.common.choices import IdleFindingState

pytestmark = pytest.mark.django_db


def at(day: int, hour: int) -> datetime:
    return datetime(2027, 1, day, hour, tzinfo=UTC)


@pytest.fixture
def shrunk(settings, infer_pool, l40s):
    """Week 2027-W03 (Mon 18 January), UTC, on infer (2 nodes × 4 L40S = 8 usable): nlp's 4
    cards from Mon 01:00 to Wed 00:00, shrunk to 1 at Mon 06:00 (its ``card_count`` now 1);
    vision's 2 cards Mon 04:00-08:00."""
    settings.TIME_ZONE = "UTC"
    nlp, vision = TeamFactory(slug="nlp", name="nlp"), TeamFactory(slug="vision", name="vision")
    kept = AllocationFactory(team=nlp, pool=infer_pool, gpu_model=l40s,
                             card_count=1, starts_at=at(18, 1), ends_at=at(20, 0))  # fmt: skip
    IdleFindingFactory(allocation=kept, first_seen_at=at(18, 5), last_seen_at=at(18, 6),
                       reclaimed_at=at(18, 6), closed_at=at(18, 6), card_count=4,
                       cards_in_use=1, state=IdleFindingState.RECLAIMED)  # fmt: skip
    AllocationFactory(team=vision, pool=infer_pool, gpu_model=l40s,
                      card_count=2, starts_at=at(18, 4), ends_at=at(18, 8))  # fmt: skip
    return infer_pool, l40s


def test_the_week_counts_the_cards_held_before_the_shrink(client, pool_admin, shrunk):
    """Monday: 4 + 2 = 6 held at 04:00-06:00 → 8 − 6 = 2 free (today's ``card_count`` over the
    whole window said 1 + 2 = 3, 5 free); Tuesday: nlp's 1 → 7; Wednesday on: 8."""
    client.force_login(pool_admin)
    url = reverse("pools:pool-calendar", args=["infer", "l40s"])
    response = client.get(url, {"week": "2027-W03"})
    assert [d.free for d in response.context["days"]] == [2, 7, 8, 8, 8, 8, 8]


def test_the_month_counts_the_cards_held_before_the_shrink(shrunk):
    """January 2027: the 18th 2 free, the 19th 7, the 17th and the 20th 8."""
    pool, l40s = shrunk
    days = month_days(pool=pool, gpu_model=l40s, first=date(2027, 1, 1))
    assert [d.free for d in days[16:20]] == [8, 2, 7, 8]


def test_the_week_lists_the_cards_held_before_and_after_the_shrink(client, pool_admin, shrunk):
    """The holds agree with the free cards: nlp's 4 cards Mon 01:00-06:00 and 1 card Mon
    06:00-Wed 00:00, vision's 2 Mon 04:00-08:00; Monday's peak 4 + 2 = 6 (04:00-06:00) is
    8 - 2 free. With its ``card_count`` now, nlp read 1 card from Mon 01:00 and Monday's holds
    added up to 3. Tuesday lists nlp's 1 alone (7 free)."""
    client.force_login(pool_admin)
    url = reverse("pools:pool-calendar", args=["infer", "l40s"])
    response = client.get(url, {"week": "2027-W03"})
    listed = [(h.team, h.cards, h.starts_at, h.ends_at) for h in response.context["holds"]]
    assert listed == [
        ("nlp", 4, at(18, 1), at(18, 6)),
        ("vision", 2, at(18, 4), at(18, 8)),
        ("nlp", 1, at(18, 6), at(20, 0)),
    ]
    monday, tuesday = response.context["days"][:2]
    assert [(h.team, h.cards) for h in tuesday.holds] == [("nlp", 1)]
    assert (monday.free, tuesday.free) == (2, 7)


def test_the_month_counts_the_shrunk_allocation_once(shrunk):
    """The 18th: nlp (two holds: 4 cards, then 1) and vision, 2 allocations; the 19th: nlp, 1."""
    pool, l40s = shrunk
    days = month_days(pool=pool, gpu_model=l40s, first=date(2027, 1, 1))
    assert [d.allocations for d in days[17:19]] == [2, 1]
