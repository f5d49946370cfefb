"""A team member who posts a decision from the request page is refused with a 403, as the API
refuses it, whatever the body holds; the request stays as it was and nothing is allocated. The
page used to answer with a redirect and a message."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from factories import CapacityRequestFactory

from pools.capacity.models import Allocation, CapacityRequest
from pools.common.choices import RequestStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def submitted(team, team_member, infer_pool, l40s):
    start = timezone.now() + timedelta(days=1)
    return CapacityRequestFactory(
        team=team,
        requested_by=team_member,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=2,
        starts_at=start,
        ends_at=start + timedelta(days=7),
        status=RequestStatus.SUBMITTED,
    )


@pytest.mark.parametrize(
    ("action", "body"),
    [
        ("approve", {}),
        ("approve", {"card_count": 1, "reason": "half"}),
        ("approve", {"card_count": "many"}),  # a bad field: still 403, not a form error
        ("reject", {"reason": "no"}),
        ("accept", {"reason": "ordered"}),
    ],
)
def test_a_member_deciding_from_the_page_gets_403_as_from_the_api(
    submitted, team_member, api_as, action, body
):
    client = Client()
    client.force_login(team_member)

    page = client.post(f"/requests/{submitted.pk}/{action}/", body)
    api = api_as(team_member).post(f"/api/v1/requests/{submitted.pk}/{action}/", body)

    assert (page.status_code, api.status_code) == (403, 403)
    assert "Location" not in page.headers
    assert CapacityRequest.objects.get(pk=submitted.pk).status == RequestStatus.SUBMITTED
    assert not Allocation.objects.filter(request=submitted).exists()


def test_a_pool_admin_approving_from_the_page_is_redirected(submitted, pool_admin):
    client = Client()
    client.force_login(pool_admin)
    page = client.post(f"/requests/{submitted.pk}/approve/", {"reason": "ok"})
    assert page.status_code == 302
    assert page.headers["Location"] == f"/requests/{submitted.pk}/"
    assert Allocation.objects.get(request=submitted).card_count == 2
