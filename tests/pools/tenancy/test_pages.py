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


RESERVATION_SENTENCE = (
    "Its Slurm reservation portal-alloc-{pk} ends too, and Slurm then ends the jobs still "
    "running in it (slurm.conf ResvOverRun: 0 minutes by default)."
)


@pytest.mark.parametrize(
    ("binding", "says_so"),
    [({"reservation": "portal-alloc-{pk}"}, True), ({"reservation": None}, False), ({}, False)],
)
def test_the_release_confirmation_says_slurm_ends_jobs_in_the_reservation(people, binding, says_so):
    """Releasing ends the allocation's reservation; slurmctld ends a job still running in an
    ended reservation after ResvOverRun (slurm.conf(5), default 0 minutes). An allocation
    without a reservation (a part-node placement, Kubernetes) keeps only the first sentences."""
    team, users = people
    allocation = AllocationFactory(team=team, status="active")
    allocation.scheduler_binding = {k: v and v.format(pk=allocation.pk) for k, v in binding.items()}
    allocation.save(update_fields=["scheduler_binding"])

    page = _page(users["manager"], f"/requests/{allocation.request_id}/")

    confirm = (
        f"Release allocation #{allocation.pk}? Its cards go back to the pool now, and its "
        "extensions, granted or waiting, are cancelled."
    )
    sentence = RESERVATION_SENTENCE.format(pk=allocation.pk)
    expected = f'data-confirm="{confirm} {sentence}"' if says_so else f'data-confirm="{confirm}"'
    assert expected in page


def test_the_api_release_description_says_slurm_ends_jobs_in_the_reservation(people):
    client = Client()
    client.force_login(people[1]["member"])
    schema = client.get("/api/schema/", {"format": "json"}).json()

    description = schema["paths"]["/api/v1/allocations/{id}/release/"]["post"]["description"]
    assert " ".join(description.split()).endswith(
        "An allocation with a Slurm reservation (``scheduler_binding.reservation``) ends it too, "
        "and slurmctld then ends the jobs still running in it (slurm.conf ResvOverRun: 0 "
        "minutes by default)."
    )
