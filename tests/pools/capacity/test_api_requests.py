"""/api/v1/ teams, requests, allocations and audit-events: the permission matrix over every
endpoint and action, idempotent actions, 409 bodies, pagination, filters and query counts.

Roles: anonymous; alice, a member of team ``nlp`` (and the requester); mia, its manager; victor,
a member of team ``vision`` only; root-admin, a pool admin. An object of a team the caller cannot
see is 404, exactly as an object that does not exist; 403 is for what a visible object or the
caller's own team does not allow.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from factories import (
    AllocationFactory,
    CapacityRequestFactory,
    MembershipFactory,
    TeamFactory,
    next_week_9am,
)

from pools.audit.models import AuditEvent
from pools.capacity.models import Allocation, CapacityRequest
from pools.capacity.request_fields import RequestFields
from pools.capacity.services.requests import capacity_request_approve, capacity_request_create
from pools.common.choices import AllocationStatus, RequestStatus

pytestmark = pytest.mark.django_db

ROLES = ["anonymous", "member", "manager", "other", "admin"]


@pytest.fixture
def users(team_member, team_manager, other_member, pool_admin):
    return {
        "anonymous": None,
        "member": team_member,
        "manager": team_manager,
        "other": other_member,
        "admin": pool_admin,
    }


@pytest.fixture
def world(users, team, infer_pool, l40s):
    """nlp's submitted request (alice's), a draft, an active allocation, and vision's request."""
    vision = TeamFactory(slug="vision")
    now = timezone.now()
    return {
        "request": CapacityRequestFactory(
            team=team, requested_by=users["member"], pool=infer_pool, card_count=2
        ),
        "draft": CapacityRequestFactory(
            team=team, requested_by=users["member"], pool=infer_pool, status=RequestStatus.DRAFT
        ),
        "allocation": AllocationFactory(
            team=team,
            pool=infer_pool,
            gpu_model=l40s,
            card_count=2,
            status=AllocationStatus.ACTIVE,
            starts_at=now - timedelta(days=1),
            ends_at=now + timedelta(days=5),
        ),
        "vision_request": CapacityRequestFactory(
            team=vision, requested_by=users["other"], pool=infer_pool
        ),
    }


def new_request_body() -> dict:
    start = next_week_9am()
    return {
        "team": "nlp",
        "workload_kind": "inference",
        "pool": "infer",
        "gpu_model": "l40s",
        "card_count": 1,
        "starts_at": start.isoformat(),
        "ends_at": (start + timedelta(days=2)).isoformat(),
        "justification": "smoke test",
    }


def extend_body(world) -> dict:
    new_end = world["allocation"].ends_at + timedelta(days=2)
    return {"ends_at": new_end.isoformat(), "justification": "more evals"}


# endpoint: (method, url(world), body(world), {role: status}); anonymous is always 401/403.
MATRIX = {
    "teams list": ("get", lambda w: "/api/v1/teams/", None, dict.fromkeys(ROLES[1:], 200)),
    "team detail": (
        "get",
        lambda w: "/api/v1/teams/nlp/",
        None,
        {"member": 200, "manager": 200, "other": 404, "admin": 200},
    ),
    "requests list": ("get", lambda w: "/api/v1/requests/", None, dict.fromkeys(ROLES[1:], 200)),
    "request detail": (
        "get",
        lambda w: f"/api/v1/requests/{w['request'].pk}/",
        None,
        {"member": 200, "manager": 200, "other": 404, "admin": 200},
    ),
    "request create": (
        "post",
        lambda w: "/api/v1/requests/",
        lambda w: new_request_body(),
        # Another team's slug is "does not exist" (400), like a missing team: no existence leak.
        {"member": 201, "manager": 201, "other": 400, "admin": 201},
    ),
    "request submit": (
        "post",
        lambda w: f"/api/v1/requests/{w['draft'].pk}/submit/",
        None,
        {"member": 200, "manager": 200, "other": 404, "admin": 200},
    ),
    "request approve": (
        "post",
        lambda w: f"/api/v1/requests/{w['request'].pk}/approve/",
        None,
        {"member": 403, "manager": 403, "other": 404, "admin": 200},
    ),
    "request reject": (
        "post",
        lambda w: f"/api/v1/requests/{w['request'].pk}/reject/",
        lambda w: {"reason": "no budget"},
        {"member": 403, "manager": 403, "other": 404, "admin": 200},
    ),
    "request cancel": (
        "post",
        lambda w: f"/api/v1/requests/{w['request'].pk}/cancel/",
        None,
        {"member": 200, "manager": 200, "other": 404, "admin": 200},
    ),
    "allocations list": (
        "get",
        lambda w: "/api/v1/allocations/",
        None,
        dict.fromkeys(ROLES[1:], 200),
    ),
    "allocation detail": (
        "get",
        lambda w: f"/api/v1/allocations/{w['allocation'].pk}/",
        None,
        {"member": 200, "manager": 200, "other": 404, "admin": 200},
    ),
    "allocation release": (
        "post",
        lambda w: f"/api/v1/allocations/{w['allocation'].pk}/release/",
        None,
        {"member": 403, "manager": 200, "other": 404, "admin": 200},
    ),
    "allocation extend": (
        "post",
        lambda w: f"/api/v1/allocations/{w['allocation'].pk}/extend/",
        extend_body,
        {"member": 201, "manager": 201, "other": 404, "admin": 201},
    ),
    "audit events list": (
        "get",
        lambda w: "/api/v1/audit-events/",
        None,
        dict.fromkeys(ROLES[1:], 200),
    ),
    "audit event detail": (
        "get",
        lambda w: f"/api/v1/audit-events/{w['event'].pk}/",
        None,
        {"member": 200, "manager": 200, "other": 404, "admin": 200},
    ),
}


@pytest.fixture
def world_with_event(world, users):
    from pools.audit.services import audit_event_record

    world["event"] = audit_event_record(
        actor=users["member"], action="request.created", obj=world["request"]
    )
    return world


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("endpoint", list(MATRIX))
def test_permission_matrix(api_as, users, world_with_event, request_state, endpoint, role):
    method, url, body, expected = MATRIX[endpoint]
    client = api_as(users[role])
    before = request_state()

    response = getattr(client, method)(
        url(world_with_event), body(world_with_event) if body else None, format="json"
    )

    if role == "anonymous":
        assert response.status_code == 401
        assert response["Content-Type"] == "application/json"
        assert response.json()["code"] == "not_authenticated"
    else:
        assert response.status_code == expected[role], response.content
    if response.status_code >= 400:
        assert request_state() == before
    if response.status_code == 404:
        assert response.json()["code"] == "not_found"
    if response.status_code == 403 and role != "anonymous":
        assert response.json()["code"] == "permission_denied"


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/teams/{team}/",
        "/api/v1/requests/{request}/",
        "/api/v1/allocations/{allocation}/",
        "/api/v1/requests/{request}/approve/",
        "/api/v1/allocations/{allocation}/release/",
    ],
)
def test_another_teams_object_looks_exactly_like_a_missing_one(api_as, users, world, url):
    victor = api_as(users["other"])
    method = victor.post if url.endswith("/approve/") or url.endswith("/release/") else victor.get
    real = url.format(team="nlp", request=world["request"].pk, allocation=world["allocation"].pk)
    missing = url.format(team="no-such-team", request=999_999, allocation=999_999)

    seen, unseen = method(real, format="json"), method(missing, format="json")

    assert seen.status_code == unseen.status_code == 404
    assert seen.json() == unseen.json()


def test_another_plain_member_of_the_team_cannot_cancel(api_as, team, world, request_state):
    bob = MembershipFactory(team=team, user__username="bob").user
    before = request_state()

    response = api_as(bob).post(f"/api/v1/requests/{world['request'].pk}/cancel/")

    assert response.status_code == 403
    assert request_state() == before


def test_lists_show_only_the_callers_teams(api_as, users, world):
    def ids(role, path):
        return sorted(row["id"] for row in api_as(users[role]).get(path).json()["results"])

    nlp = sorted([world["request"].pk, world["draft"].pk, world["allocation"].request_id])
    assert ids("member", "/api/v1/requests/") == nlp
    assert ids("manager", "/api/v1/requests/") == nlp
    assert ids("other", "/api/v1/requests/") == [world["vision_request"].pk]
    assert ids("admin", "/api/v1/requests/") == sorted([*nlp, world["vision_request"].pk])
    assert ids("member", "/api/v1/allocations/") == [world["allocation"].pk]
    assert ids("other", "/api/v1/allocations/") == []
    teams = api_as(users["other"]).get("/api/v1/teams/").json()["results"]
    assert [t["slug"] for t in teams] == ["vision"]
    admin_teams = api_as(users["admin"]).get("/api/v1/teams/").json()["results"]
    assert sorted(t["slug"] for t in admin_teams) == ["nlp", "vision"]


# --- actions -------------------------------------------------------------------------------------


def test_approve_answers_the_allocation_and_again_the_same_one(api_as, users, world):
    admin = api_as(users["admin"])
    url = f"/api/v1/requests/{world['request'].pk}/approve/"

    first = admin.post(url, {"reason": "ok"}, format="json")
    second = admin.post(url, {"reason": "ok"}, format="json")

    assert first.status_code == second.status_code == 200
    body = first.json()
    assert second.json()["id"] == body["id"]
    assert Allocation.objects.filter(request=world["request"]).count() == 1
    request = world["request"]
    assert {k: body[k] for k in ("request", "team", "pool", "gpu_model", "card_count")} == {
        "request": request.pk,
        "team": "nlp",
        "pool": "infer",
        "gpu_model": "l40s",
        "card_count": 2,
    }
    assert body["status"] == "approved"
    assert body["card_hours"] == "336.000"  # 2 cards x 7 days x 24 h


def test_approve_fewer_cards_through_the_api(api_as, users, world):
    response = api_as(users["admin"]).post(
        f"/api/v1/requests/{world['request'].pk}/approve/", {"card_count": 1}, format="json"
    )

    assert response.status_code == 200
    assert response.json()["card_count"] == 1


def test_approving_a_rejected_request_is_a_409_invalid_transition(
    api_as, users, world, request_state
):
    admin = api_as(users["admin"])
    admin.post(f"/api/v1/requests/{world['request'].pk}/reject/", {"reason": "no"}, format="json")
    before = request_state()

    response = admin.post(f"/api/v1/requests/{world['request'].pk}/approve/")

    assert response.status_code == 409
    assert response.json() == {
        "code": "invalid_transition",
        "detail": "A request that is rejected cannot be approved.",
        "data": {"status": "rejected", "action": "approve"},
    }
    assert request_state() == before


def test_approving_beyond_capacity_is_a_409_with_free_and_requested(
    api_as, users, world, team, infer_pool, l40s, request_state
):
    request = world["request"]  # 2 cards next week
    AllocationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=7,
        starts_at=request.starts_at,
        ends_at=request.ends_at,
    )
    before = request_state()

    response = api_as(users["admin"]).post(f"/api/v1/requests/{request.pk}/approve/")

    assert response.status_code == 409
    assert response.json() == {
        "code": "insufficient_capacity",
        "detail": "Insufficient capacity: 1 L40S card(s) free in Inference for that window, "
        "2 requested.",
        "data": {"free": 1, "requested": 2, "pool": "infer", "gpu_model": "l40s"},
    }
    assert request_state() == before


def test_reject_without_a_reason_is_400(api_as, users, world, request_state):
    before = request_state()

    response = api_as(users["admin"]).post(f"/api/v1/requests/{world['request'].pk}/reject/")

    assert response.status_code == 400
    assert response.json()["errors"] == {"reason": ["Required."]}
    assert request_state() == before


def test_approve_with_a_naive_end_is_400(api_as, users, world, request_state):
    before = request_state()
    naive = world["request"].ends_at.replace(tzinfo=None).isoformat()

    response = api_as(users["admin"]).post(
        f"/api/v1/requests/{world['request'].pk}/approve/", {"ends_at": naive}, format="json"
    )

    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["ends_at"]
    assert request_state() == before


def test_release_and_extend_answer_the_new_state(api_as, users, world):
    allocation = world["allocation"]
    extended = api_as(users["member"]).post(
        f"/api/v1/allocations/{allocation.pk}/extend/", extend_body(world), format="json"
    )

    assert extended.status_code == 201
    body = extended.json()
    assert (body["status"], body["extends"], body["card_count"]) == ("submitted", allocation.pk, 2)
    assert body["starts_at"] == allocation.ends_at.isoformat().replace("+00:00", "Z")

    released = api_as(users["manager"]).post(f"/api/v1/allocations/{allocation.pk}/release/")

    assert released.status_code == 200
    assert released.json()["status"] == "ended"


def test_a_created_request_answers_its_fields(api_as, users, world):
    response = api_as(users["member"]).post("/api/v1/requests/", new_request_body(), format="json")

    assert response.status_code == 201
    body = response.json()
    assert {k: body[k] for k in ("team", "pool", "gpu_model", "card_count", "status")} == {
        "team": "nlp",
        "pool": "infer",
        "gpu_model": "l40s",
        "card_count": 1,
        "status": "submitted",
    }
    assert (body["requested_by"], body["allocation"]) == ("alice", None)


# --- pagination and filters ----------------------------------------------------------------------


def test_requests_are_paginated(api_as, users, team, infer_pool):
    CapacityRequestFactory.create_batch(
        60, team=team, requested_by=users["member"], pool=infer_pool
    )
    admin = api_as(users["admin"])

    first = admin.get("/api/v1/requests/").json()
    second = admin.get("/api/v1/requests/?page=2").json()
    small = admin.get("/api/v1/requests/?page_size=5").json()

    assert (first["count"], len(first["results"])) == (60, 50)
    assert first["next"].endswith("/api/v1/requests/?page=2")
    assert (len(second["results"]), second["next"]) == (10, None)
    assert len(small["results"]) == 5
    assert {r["id"] for r in first["results"]}.isdisjoint(r["id"] for r in second["results"])


def test_request_filters(api_as, users, team, infer_pool, train_pool):
    vision = TeamFactory(slug="vision")
    alice = users["member"]
    CapacityRequestFactory.create_batch(3, team=team, requested_by=alice, pool=infer_pool)
    CapacityRequestFactory.create_batch(
        2, team=team, requested_by=alice, pool=infer_pool, status=RequestStatus.REJECTED
    )
    CapacityRequestFactory(team=team, requested_by=alice, pool=infer_pool, status="draft")
    CapacityRequestFactory(team=team, requested_by=alice, pool=train_pool)
    CapacityRequestFactory(team=vision, requested_by=users["other"], pool=infer_pool)

    def count(role, query):
        return api_as(users[role]).get(f"/api/v1/requests/?{query}").json()["count"]

    assert count("admin", "status=submitted") == 5  # 3 + train + vision
    assert count("admin", "status=submitted&status=draft") == 6
    assert count("admin", "team=vision") == 1
    assert count("admin", "pool=train") == 1
    assert count("admin", "pool=infer&team=nlp&status=rejected") == 2
    assert count("member", "status=submitted") == 4  # not vision's
    # filtering never widens what one sees: another team's slug is refused like an unknown one
    for query in ("team=vision", "team=no-such-team"):
        foreign = api_as(users["member"]).get(f"/api/v1/requests/?{query}")
        assert foreign.status_code == 400
        assert foreign.json()["errors"] == {"team": ["No team you can see has this slug."]}
    assert api_as(users["admin"]).get("/api/v1/requests/?pool=nope").status_code == 400
    bad = api_as(users["admin"]).get("/api/v1/requests/?status=bogus")
    assert bad.status_code == 400


def test_allocation_filters(api_as, users, team, infer_pool, train_pool, l40s):
    vision = TeamFactory(slug="vision")
    AllocationFactory.create_batch(2, team=team, pool=infer_pool, gpu_model=l40s)
    AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, status="active")
    AllocationFactory(team=vision, pool=train_pool, gpu_model=l40s, status="active")

    def count(role, query):
        return api_as(users[role]).get(f"/api/v1/allocations/?{query}").json()["count"]

    assert count("admin", "status=active") == 2
    assert count("admin", "status=approved") == 2
    assert count("admin", "team=vision") == 1
    assert count("admin", "pool=infer") == 3
    assert count("member", "status=active") == 1


# --- audit events --------------------------------------------------------------------------------


def test_audit_events_filter_by_object_and_are_scoped(api_as, users, team, infer_pool, l40s):
    start = next_week_9am()
    request = capacity_request_create(
        actor=users["member"],
        fields=RequestFields(
            team=team,
            workload_kind="inference",
            pool=infer_pool,
            gpu_model=l40s,
            card_count=2,
            starts_at=start,
            ends_at=start + timedelta(days=2),
            justification="eval",
        ),
    )
    allocation = capacity_request_approve(request=request, actor=users["admin"], reason="ok")
    vision = TeamFactory(slug="vision")
    MembershipFactory(team=vision, user=users["admin"])  # so the admin may create for vision
    capacity_request_create(
        actor=users["admin"],
        fields=RequestFields(
            team=vision,
            workload_kind="inference",
            pool=infer_pool,
            gpu_model=l40s,
            card_count=1,
            starts_at=start,
            ends_at=start + timedelta(days=1),
            justification="vision",
        ),
    )

    def actions(role, query=""):
        rows = api_as(users[role]).get(f"/api/v1/audit-events/?{query}").json()["results"]
        return [(r["action"], r["object_id"]) for r in rows]

    by_request = f"object_type=pools.capacityrequest&object_id={request.pk}"
    assert actions("member", by_request) == [
        ("request.approved", str(request.pk)),
        ("request.submitted", str(request.pk)),
        ("request.created", str(request.pk)),
    ]
    assert actions("member", f"object_type=pools.allocation&object_id={allocation.pk}") == [
        ("allocation.approved", str(allocation.pk))
    ]
    assert actions("member", "action=request.created") == [("request.created", str(request.pk))]
    assert len(actions("member")) == 4  # nlp's only
    assert actions("other", by_request) == []
    assert len(actions("other")) == 2  # vision's created + submitted
    assert len(actions("admin")) == AuditEvent.objects.count() == 6
    event = api_as(users["member"]).get(f"/api/v1/audit-events/?{by_request}").json()
    first = event["results"][0]
    assert (first["actor"], first["reason"], first["before"]["status"]) == (
        "root-admin",
        "ok",
        "submitted",
    )


# --- query counts --------------------------------------------------------------------------------


def queries(client, url) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200
    return len(ctx.captured_queries)


def fill(team, pool, model, user, n):
    """``n`` requests, every other one approved with its allocation."""
    for i in range(n):
        if i % 2:
            AllocationFactory(team=team, pool=pool, gpu_model=model, request__requested_by=user)
        else:
            CapacityRequestFactory(team=team, pool=pool, gpu_model=model, requested_by=user)


@pytest.mark.parametrize("role", ["member", "admin"])
@pytest.mark.parametrize(
    "url", ["/api/v1/requests/", "/api/v1/allocations/", "/api/v1/audit-events/"]
)
def test_list_query_count_does_not_grow_with_rows(api_as, users, team, infer_pool, l40s, role, url):
    client = api_as(users[role])

    def with_events(n):
        fill(team, infer_pool, l40s, users["member"], n)
        for obj in [*CapacityRequest.objects.all(), *Allocation.objects.all()]:
            AuditEvent.objects.create(
                actor=users["member"],
                action="x",
                object_type=obj._meta.label_lower,
                object_id=str(obj.pk),
            )

    with_events(5)
    few = queries(client, url)
    with_events(45)
    many = queries(client, url)

    assert few == many


def test_audit_events_page_by_cursor_newest_first_without_a_count(api_as, users, world):
    """Five events of the member's request, two a page: newest first, each once, by following
    ``next``; no ``count`` (no COUNT(*) over the trail); a cursor the list did not give is a
    400 naming ``cursor``, a page size outside 1-500 one naming ``page_size``."""
    from pools.audit.services import audit_event_record

    made = [
        audit_event_record(actor=users["member"], action=f"request.step{i}", obj=world["request"])
        for i in range(5)
    ]
    client = api_as(users["member"])
    url = (
        "/api/v1/audit-events/?object_type=pools.capacityrequest"
        f"&object_id={world['request'].pk}&page_size=2"
    )
    seen, pages = [], 0
    while url:
        body = client.get(url).json()
        assert "count" not in body and len(body["results"]) <= 2
        seen += [row["id"] for row in body["results"]]
        url, pages = body["next"], pages + 1
    assert seen == [e.pk for e in reversed(made)] and pages == 3

    bad = client.get("/api/v1/audit-events/?cursor=bogus")
    assert bad.status_code == 400 and "cursor" in bad.json()["errors"]
    too_big = client.get("/api/v1/audit-events/?page_size=501")
    assert too_big.status_code == 400 and "page_size" in too_big.json()["errors"]
