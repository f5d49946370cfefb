"""Who may act is decided before the body is read: a member cannot tell another team's objects
from missing ones (same status and body whatever they send), and an action they may not take is
403 whether or not its body would have been valid. Refused probes change nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from factories import AllocationFactory, next_week_9am

from pools.common.choices import AllocationStatus

pytestmark = pytest.mark.django_db

MISSING_ID = 987_654


@pytest.fixture
def nlp_allocation(team, infer_pool, l40s):
    return AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=2)


BODIES = [
    {},
    {"card_count": "many", "ends_at": "not a time", "reason": ["x"]},
    {"card_count": 1, "reason": "ok", "justification": "more", "ends_at": "2031-01-01T00:00:00Z"},
]


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/requests/{request}/approve/",
        "/api/v1/requests/{request}/reject/",
        "/api/v1/requests/{request}/cancel/",
        "/api/v1/requests/{request}/submit/",
        "/api/v1/allocations/{allocation}/release/",
        "/api/v1/allocations/{allocation}/extend/",
    ],
)
@pytest.mark.parametrize("body", BODIES)
def test_another_teams_object_answers_like_a_missing_one(
    api_as, other_member, nlp_allocation, request_state, path, body
):
    api = api_as(other_member)
    before = request_state()
    ids = {"request": nlp_allocation.request_id, "allocation": nlp_allocation.pk}

    foreign = api.post(path.format(**ids), body, format="json")
    missing = api.post(path.format(request=MISSING_ID, allocation=MISSING_ID), body, format="json")

    assert foreign.status_code == missing.status_code == 404
    assert foreign.json() == missing.json()
    assert foreign.json()["code"] == "not_found"
    assert request_state() == before


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/requests/{request}/approve/", {"card_count": "many"}),
        ("/api/v1/requests/{request}/approve/", {"card_count": 1}),
        ("/api/v1/requests/{request}/reject/", {"reason": ["not", "a", "string"]}),
        ("/api/v1/requests/{request}/reject/", {"reason": "no"}),
        ("/api/v1/allocations/{allocation}/release/", {"reason": ["x"]}),
        ("/api/v1/allocations/{allocation}/release/", {"reason": "done"}),
    ],
)
def test_an_action_a_member_may_not_take_is_403_whatever_the_body(
    api_as, team_member, nlp_allocation, request_state, path, body
):
    before = request_state()
    ids = {"request": nlp_allocation.request_id, "allocation": nlp_allocation.pk}

    response = api_as(team_member).post(path.format(**ids), body, format="json")

    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
    assert request_state() == before
    nlp_allocation.refresh_from_db()
    assert nlp_allocation.status == AllocationStatus.APPROVED


def new_request(team_slug: str) -> dict:
    starts = next_week_9am()
    return {
        "team": team_slug,
        "workload_kind": "inference",
        "pool": "infer",
        "gpu_model": "l40s",
        "card_count": 1,
        "starts_at": starts.isoformat(),
        "ends_at": (starts + timedelta(hours=9)).isoformat(),
        "justification": "probe",
    }


def test_a_request_for_another_team_answers_like_one_for_a_missing_team(
    api_as, other_member, team, infer_pool, request_state
):
    api = api_as(other_member)
    before = request_state()

    foreign = api.post("/api/v1/requests/", new_request("nlp"), format="json")
    missing = api.post("/api/v1/requests/", new_request("no-such-team"), format="json")

    assert foreign.status_code == missing.status_code == 400
    assert foreign.json()["code"] == missing.json()["code"] == "invalid_input"
    assert list(foreign.json()["errors"]) == list(missing.json()["errors"]) == ["team"]
    assert foreign.json()["errors"]["team"] == [
        m.replace("no-such-team", "nlp") for m in missing.json()["errors"]["team"]
    ]
    assert request_state() == before
    # Their own team is accepted with the same body.
    own = api.post("/api/v1/requests/", new_request("vision"), format="json")
    assert own.status_code == 201, own.content


@pytest.mark.parametrize(
    "path",
    ["/api/v1/exemptions/", "/api/v1/reclamation-policies/"],
)
@pytest.mark.parametrize("body", [{}, {"team": "nlp", "reason": "x", "expires_at": "garbage"}])
def test_a_member_granting_exemptions_or_policies_is_403_before_validation(
    api_as, team_member, path, body
):
    response = api_as(team_member).post(path, body, format="json")

    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
