"""Attacks by a member of team ``alpha`` on what pool admins and other teams own, each a leak
found in review (issue 29 item 1): the answer must not depend on whether the team named
exists, nothing is written, and the refusal says who may."""

from __future__ import annotations

import pytest
from factories import (
    CapacityRequestFactory,
    MembershipFactory,
    PoolFactory,
    TeamFactory,
    UserFactory,
)
from rest_framework.test import APIClient

from billing.budgets.models import Budget
from pools.capacity.models import CapacityRequest
from pools.overrides.models import TemporaryOverride
from pools.recurring.models import RecurringReservation
from pools.tenancy.models import Team

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice_api():
    alice = UserFactory(username="alice")
    MembershipFactory(team=TeamFactory(slug="alpha"), user=alice)
    TeamFactory(slug="bravo")
    client = APIClient()
    client.force_authenticate(alice)
    return client


def _bodies(pool) -> dict[str, dict]:
    """A valid body per pool-admin endpoint, without its team (the attack fills it in)."""
    return {
        "overrides": {
            "pool": pool.slug,
            "kind": "ceiling",
            "gpu_model": "l40s",
            "cards": 8,
            "until": "2030-01-01T00:00:00Z",
            "reason": "deadline",
        },
        "recurring-reservations": {
            "pool": pool.slug,
            "gpu_model": "l40s",
            "name": "course",
            "card_count": 1,
            "recurrence": "weekday",
            "time_zone": "UTC",
            "first_date": "2030-01-07",
            "last_date": "2030-01-11",
            "start_time": "09:00",
            "end_time": "18:00",
        },
        "budgets": {"card_hours_limit": "10", "period": "month", "starts_on": "2030-01-01"},
    }


@pytest.mark.parametrize(
    "prefix, model, message",
    [
        ("overrides", TemporaryOverride, "Only pool admins may override a team's limits."),
        (
            "recurring-reservations",
            RecurringReservation,
            "Only pool admins may reserve recurring capacity.",
        ),
        ("budgets", Budget, "Only pool admins set budgets."),
    ],
)
def test_a_member_learns_no_team_slug_from_a_pool_admins_endpoint(
    alice_api, prefix, model, message
):
    # Validating the body first answered 400 "Object with slug=nope does not exist." for an
    # unknown slug and a different 400 (or none) for bravo: an oracle of which teams exist.
    body = _bodies(PoolFactory())[prefix]
    url = f"/api/v1/{prefix}/"

    answers = [
        alice_api.post(url, {**body, "team": slug}, format="json") for slug in ("bravo", "nope")
    ]

    assert [(a.status_code, a.json()["detail"]) for a in answers] == [(403, message)] * 2
    assert not model.objects.exists()


@pytest.mark.parametrize(
    "next_url, expected",
    [
        ("https://evil.example/login", None),  # another site: the request's page instead
        ("//evil.example/", None),
        ("/requests/", "/requests/"),  # a page of this site is followed
    ],
)
def test_a_request_action_goes_back_to_this_site_only(next_url, expected):
    # A link that posts a cancel with next=<another site> made the portal an open redirect.
    from django.test import Client
    from factories import CapacityRequestFactory

    alice = UserFactory(username="alice")
    team = TeamFactory(slug="alpha")
    MembershipFactory(team=team, user=alice)
    request = CapacityRequestFactory(team=team, requested_by=alice)
    client = Client()
    client.force_login(alice)

    response = client.post(f"/requests/{request.pk}/cancel/", {"next": next_url, "reason": "x"})

    assert response.status_code == 302
    assert response["Location"] == (expected or f"/requests/{request.pk}/")


@pytest.mark.parametrize(
    "action, body",
    [("approve", {}), ("accept", {"reason": "planned"}), ("reject", {"reason": "no"})],
)
def test_a_member_deciding_its_own_request_is_told_who_decides(alice_api, action, body):
    request = CapacityRequestFactory(team=Team.objects.get(slug="alpha"))

    answer = alice_api.post(f"/api/v1/requests/{request.pk}/{action}/", body, format="json")

    assert (answer.status_code, answer.json()["detail"]) == (
        403,
        "Only pool admins may decide requests.",
    )
    assert CapacityRequest.objects.get(pk=request.pk).status == request.status


@pytest.mark.parametrize("method", ["post", "put"])
def test_a_member_changing_a_reclamation_policy_is_told_what_it_may_not_do(alice_api, method):
    url = "/api/v1/reclamation-policies/" + (f"{PoolFactory().slug}/" if method == "put" else "")

    answer = getattr(alice_api, method)(url, {"idle_hours": 4}, format="json")

    assert (answer.status_code, answer.json()["detail"]) == (
        403,
        "Only pool admins can change a reclamation policy.",
    )
