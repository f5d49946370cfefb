"""The plan's held cards per day (each day's peak) are kept per allocations' generation
(:mod:`pools.capacity.generation`): a committed write of an allocation, by ``save`` or by the
approval's own INSERT, is on the next dashboard; cards held now are always read live."""

from __future__ import annotations

from datetime import timedelta

import pytest
from factories import AllocationFactory, CapacityRequestFactory, TeamFactory

from pools.capacity.services.requests import capacity_request_approve
from pools.common.choices import AllocationStatus
from pools.dashboards import capacity as dashboard

pytestmark = pytest.mark.django_db


def _held(now):
    """(held at the peak of each of the first three days, held now) of infer × L40S."""
    series = dashboard.allocation_plan(filters=dashboard.DashboardFilters(), now=now)[
        ("infer", "l40s")
    ]
    return series.held[:3], series.held_now


def test_a_committed_allocation_write_is_on_the_next_plan(
    infer_pool, l40s, pool_admin, django_capture_on_commit_callbacks
):
    from django.utils import timezone

    now = timezone.now().replace(hour=9, minute=0, second=0, microsecond=0)
    today = now.replace(hour=0)
    team = TeamFactory(slug="nlp")
    with django_capture_on_commit_callbacks(execute=True):
        first = AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=2,
                                  status=AllocationStatus.ACTIVE, starts_at=today,
                                  ends_at=today + timedelta(days=2))  # fmt: skip
    # 2 cards from midnight today to midnight in two days: held on days 0 and 1, and now
    assert _held(now) == ([2, 2, 0], 2)

    with django_capture_on_commit_callbacks(execute=True):  # saved: post_save
        first.ends_at = today + timedelta(days=3)
        first.save(update_fields=["ends_at"])
    assert _held(now) == ([2, 2, 2], 2)

    request = CapacityRequestFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=3,
                                     starts_at=today + timedelta(days=1, hours=6),
                                     ends_at=today + timedelta(days=1, hours=18))  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):  # the approval's INSERT
        capacity_request_approve(request=request, actor=pool_admin)
    # 06:00-18:00 tomorrow adds 3 to tomorrow only, and not now
    assert _held(now) == ([2, 5, 2], 2)


def test_cards_held_now_are_read_live(infer_pool, l40s):
    from django.utils import timezone

    now = timezone.now().replace(hour=9, minute=0, second=0, microsecond=0)
    today = now.replace(hour=0)
    AllocationFactory(team=TeamFactory(slug="nlp"), pool=infer_pool, gpu_model=l40s, card_count=1,
                      status=AllocationStatus.ACTIVE, starts_at=today,
                      ends_at=today + timedelta(hours=13))  # fmt: skip
    assert _held(now) == ([1, 0, 0], 1)
    # at 14:00 the allocation has ended: held now says so, the day's peaks are the same
    assert _held(now + timedelta(hours=5)) == ([1, 0, 0], 0)
