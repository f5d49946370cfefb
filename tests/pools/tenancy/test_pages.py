"""Pages show each role its controls from the tenancy rules, never from ``is_staff`` in a
template: the request page's *Release early* for the team's managers and pool admins, *Approve*
for pool admins; the menu's *Approvals* and *Dashboard* for pool admins."""

from __future__ import annotations

import pytest
from django.test import Client
from factories import (
    AllocationFactory,
    CapacityRequestFactory,
    MembershipFactory,
    TeamFactory,
    UserFactory,
)

from pools.common.choices import TeamRole

pytestmark = pytest.mark.django_db


@pytest.fixture
def people():
    team = TeamFactory(slug="nlp")
    member, manager = UserFactory(username="m1"), UserFactory(username="boss")
    MembershipFactory(team=team, user=member, role=TeamRole.MEMBER)
    MembershipFactory(team=team, user=manager, role=TeamRole.MANAGER)
    return team, {
        "member": member,
        "manager": manager,
        "admin": UserFactory(username="admin", is_staff=True),
    }


def _page(user, url: str) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_release_early_is_offered_to_managers_and_pool_admins(people):
    team, users = people
    allocation = AllocationFactory(team=team)
    url = f"/requests/{allocation.request_id}/"
    shown = {who: "Release early" in _page(user, url) for who, user in users.items()}
    assert shown == {"member": False, "manager": True, "admin": True}


def test_a_submitted_request_is_decided_by_pool_admins_only(people):
    team, users = people

    request = CapacityRequestFactory(team=team, requested_by=users["member"])
    url = f"/requests/{request.pk}/"
    shown = {who: ">Approve<" in _page(user, url) for who, user in users.items()}
    assert shown == {"member": False, "manager": False, "admin": True}


def test_the_menu_shows_pool_admin_links_to_pool_admins(people):
    _, users = people
    for who, user in users.items():
        page = _page(user, "/")
        assert ('href="/requests/queue/"' in page) == (who == "admin"), who
        assert ('href="/dashboard/"' in page) == (who == "admin"), who
