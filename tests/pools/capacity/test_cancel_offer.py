"""The request page offers *Cancel this request…* exactly to whom the cancel would not refuse:
the requester (draft or submitted), the team's managers and pool admins; never once cards were
granted to a plain member, nor to another member of the team."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from factories import CapacityRequestFactory, MembershipFactory

from pools.capacity.services.requests import capacity_request_approve
from pools.common.choices import RequestStatus

pytestmark = pytest.mark.django_db

OFFER = "Cancel this request…"


@pytest.fixture
def submitted(team, team_member, infer_pool, l40s):
    """alice's submitted request for 2 L40S in infer, from tomorrow for a week."""
    start = timezone.now() + timedelta(days=1)
    return CapacityRequestFactory(
        team=team, requested_by=team_member, pool=infer_pool, gpu_model=l40s, card_count=2,
        starts_at=start, ends_at=start + timedelta(days=7), status=RequestStatus.SUBMITTED,
    )  # fmt: skip


def offered(user, request) -> bool:
    client = Client()
    client.force_login(user)
    page = client.get(f"/requests/{request.pk}/")
    assert page.status_code == 200
    return OFFER in page.content.decode()


def cancel(user, request) -> int:
    client = Client()
    client.force_login(user)
    return client.post(f"/requests/{request.pk}/cancel/", {"reason": "x"}).status_code


def test_the_requester_of_an_approved_request_is_not_offered_a_cancel_it_would_refuse(
    submitted, team_member, team_manager, pool_admin
):
    capacity_request_approve(request=submitted, actor=pool_admin, reason="ok")

    assert not offered(team_member, submitted)
    assert offered(team_manager, submitted)
    assert offered(pool_admin, submitted)
    assert cancel(team_member, submitted) == 403
    submitted.refresh_from_db()
    assert submitted.status == RequestStatus.APPROVED


def test_another_plain_member_is_not_offered_anothers_submitted_request(
    submitted, team, team_member
):
    bob = MembershipFactory(team=team, user__username="bob").user

    assert offered(team_member, submitted)
    assert not offered(bob, submitted)
    assert cancel(bob, submitted) == 403


def test_the_requester_cancels_a_submitted_one_and_the_offer_is_gone(submitted, team_member):
    assert cancel(team_member, submitted) == 302

    submitted.refresh_from_db()
    assert submitted.status == RequestStatus.CANCELLED
    assert not offered(team_member, submitted)
