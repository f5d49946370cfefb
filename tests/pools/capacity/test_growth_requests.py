"""Requests for capacity no pool has yet (kind ``growth``, issue #21): created and submitted by
the team, accepted by a pool admin as a plan (no allocation, no card counted) or rejected, every
step audited, on the service, the API and the pages; a refused step changes nothing.

Pools (tests/conftest.py): ``infer`` is Kubernetes with 8 L40S, ``train`` Slurm with 8 A100.
No pool has an H100. Team ``nlp``: alice (member), mia (manager); root-admin is staff.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from factories import next_week_9am

from pools.audit.selectors import object_audit_trail
from pools.capacity.availability import pool_free_cards
from pools.capacity.models import Allocation, CapacityRequest
from pools.capacity.request_fields import RequestFields
from pools.capacity.services.requests import (
    capacity_request_accept,
    capacity_request_approve,
    capacity_request_create,
    capacity_request_reject,
)
from pools.common.choices import RequestKind, RequestStatus
from pools.common.errors import InvalidInput, InvalidTransition, PermissionDenied
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db


@pytest.fixture
def h100(db):
    return GpuModel.objects.get(slug="h100_sxm")


@pytest.fixture
def window():
    start = next_week_9am()
    return start, start + timedelta(days=30)


@pytest.fixture
def ask(team, h100, window, infer_pool):
    """``ask(actor, **fields)``: 16 H100 for inference, in no pool, for 30 days, submitted."""

    def make(actor, **fields):
        values = {
            "team": team,
            "workload_kind": "inference",
            "kind": RequestKind.GROWTH,
            "gpu_model": h100,
            "card_count": 16,
            "starts_at": window[0],
            "ends_at": window[1],
            "justification": "Serve Llama-3.1-70B; sized by the portal: 16 × H100",
        }
        values.update(fields)
        return capacity_request_create(actor=actor, fields=RequestFields(**values))

    return make


def actions(obj) -> list[tuple]:
    return [
        (e.action, e.actor.username if e.actor else None, (e.before or {}).get("status"),
         (e.after or {}).get("status"), e.reason)
        for e in object_audit_trail(obj=obj)
    ]  # fmt: skip


def test_cards_no_pool_has_are_refused_as_cards_and_taken_as_capacity_to_add(
    ask, team_member, request_state
):
    before = request_state()
    with pytest.raises(InvalidInput) as refused:
        ask(team_member, kind=RequestKind.CARDS)
    # the plain request is held to the pools' cards: none has an H100
    assert refused.value.data["errors"]["card_count"] == (
        "No eligible pool has 16 such cards (the most is 0)."
    )
    assert request_state() == before

    growth = ask(team_member)

    assert (growth.kind, growth.status, growth.pool, growth.card_count) == (
        "growth", "submitted", None, 16,
    )  # fmt: skip
    assert actions(growth) == [
        ("request.created", "alice", None, "draft", ""),
        ("request.submitted", "alice", "draft", "submitted", ""),
    ]
    assert object_audit_trail(obj=growth).first().after["kind"] == "growth"


def test_capacity_to_add_names_a_model_and_a_pool_of_the_workloads_scheduler(
    ask, team_member, train_pool, request_state
):
    before = request_state()
    with pytest.raises(InvalidInput) as no_model:
        ask(team_member, gpu_model=None, min_memory_gib=80)
    with pytest.raises(InvalidInput) as wrong_pool:
        ask(team_member, pool=train_pool)  # Slurm, for inference
    with pytest.raises(InvalidInput) as bad_kind:
        ask(team_member, kind="more")

    assert no_model.value.data["errors"] == {"gpu_model": "Name the GPU model the pool should add."}
    assert set(wrong_pool.value.data["errors"]) == {"pool"}
    assert set(bad_kind.value.data["errors"]) == {"kind"}
    assert request_state() == before


def test_a_pool_admin_accepts_it_as_a_plan_no_allocation_no_card_counted(
    ask, team_member, pool_admin, infer_pool, l40s, window
):
    growth = ask(team_member, pool=infer_pool, gpu_model=l40s, card_count=40)  # infer holds 8
    free_before = pool_free_cards(pool=infer_pool, gpu_model=l40s, start=window[0], end=window[1])

    accepted = capacity_request_accept(
        request=growth, actor=pool_admin, reason="  Four L40S nodes ordered for January.  "
    )

    assert (accepted.status, accepted.decided_by, accepted.decision_reason) == (
        RequestStatus.ACCEPTED, pool_admin, "Four L40S nodes ordered for January.",
    )  # fmt: skip
    assert not Allocation.objects.exists()
    assert free_before == 8
    assert pool_free_cards(pool=infer_pool, gpu_model=l40s, start=window[0], end=window[1]) == 8
    assert actions(accepted)[-1] == (
        "request.accepted", "root-admin", "submitted", "accepted",
        "Four L40S nodes ordered for January.",
    )  # fmt: skip
    # again with the same note (a retry): the same request, no second event
    again = capacity_request_accept(
        request=growth, actor=pool_admin, reason="Four L40S nodes ordered for January."
    )
    assert again.pk == growth.pk
    assert len(actions(accepted)) == 3


def test_accepting_again_with_another_note_is_409_and_keeps_the_first(
    ask, team_member, pool_admin, request_state
):
    growth = ask(team_member)
    capacity_request_accept(request=growth, actor=pool_admin, reason="Ordered for January.")
    before = request_state()

    with pytest.raises(InvalidTransition) as second:
        capacity_request_accept(request=growth, actor=pool_admin, reason="Ordered for March.")

    assert second.value.data == {
        "status": "accepted",
        "action": "accept",
        "decision_reason": "Ordered for January.",
    }
    assert request_state() == before


def test_refused_decisions_change_nothing(
    ask, team_member, pool_admin, create_cards, request_state
):
    growth = ask(team_member)
    cards = create_cards(team_member)
    before = request_state()

    with pytest.raises(PermissionDenied):
        capacity_request_accept(request=growth, actor=team_member, reason="ordered")
    with pytest.raises(InvalidInput) as no_note:
        capacity_request_accept(request=growth, actor=pool_admin, reason="  ")
    with pytest.raises(InvalidTransition) as approve:
        capacity_request_approve(request=growth, actor=pool_admin)
    with pytest.raises(InvalidTransition) as accept_cards:
        capacity_request_accept(request=cards, actor=pool_admin, reason="ordered")

    assert no_note.value.data["errors"] == {"reason": "Required."}
    assert approve.value.data == {"status": "submitted", "action": "approve"}
    assert accept_cards.value.data == {"status": "submitted", "action": "accept"}
    assert request_state() == before


def test_a_pool_admin_may_decline_it_and_a_declined_one_is_not_accepted(
    ask, team_member, pool_admin, request_state
):
    growth = ask(team_member)
    declined = capacity_request_reject(
        request=growth, actor=pool_admin, reason="No budget for H100 this year."
    )
    before = request_state()

    with pytest.raises(InvalidTransition):
        capacity_request_accept(request=declined, actor=pool_admin, reason="ordered")

    assert declined.status == RequestStatus.REJECTED
    assert request_state() == before


def test_the_database_refuses_an_accepted_request_for_cards(team_member, ask):
    from django.db import IntegrityError, transaction

    growth = ask(team_member)
    with pytest.raises(IntegrityError), transaction.atomic():
        CapacityRequest.objects.filter(pk=growth.pk).update(
            kind=RequestKind.CARDS, status=RequestStatus.ACCEPTED
        )


@pytest.fixture
def create_cards(team, infer_pool, l40s, window):
    def make(actor):
        return capacity_request_create(actor=actor, fields=RequestFields(
            team=team, workload_kind="inference", pool=infer_pool, gpu_model=l40s,
            card_count=3, starts_at=window[0], ends_at=window[1], justification="serve",
        ))  # fmt: skip

    return make


# --- API ---------------------------------------------------------------------------------------


def test_api_creates_accepts_and_refuses_capacity_to_add(
    api_as, team_member, pool_admin, team, window, infer_pool, request_state
):
    body = {
        "team": team.slug, "workload_kind": "inference", "kind": "growth",
        "gpu_model": "h100_sxm", "card_count": 16, "starts_at": window[0].isoformat(),
        "ends_at": window[1].isoformat(), "justification": "Llama-3.1-70B",
    }  # fmt: skip
    created = api_as(team_member).post("/api/v1/requests/", body, format="json")
    assert created.status_code == 201, created.json()
    assert (created.json()["kind"], created.json()["status"], created.json()["pool"]) == (
        "growth", "submitted", None,
    )  # fmt: skip
    pk = created.json()["id"]
    before = request_state()

    as_member = api_as(team_member).post(f"/api/v1/requests/{pk}/accept/", {"reason": "x"})
    approve = api_as(pool_admin).post(f"/api/v1/requests/{pk}/approve/", {}, format="json")
    no_note = api_as(pool_admin).post(f"/api/v1/requests/{pk}/accept/", {}, format="json")
    assert (as_member.status_code, as_member.json()["code"]) == (403, "permission_denied")
    assert (approve.status_code, approve.json()["code"]) == (409, "invalid_transition")
    assert (no_note.status_code, no_note.json()["code"]) == (400, "invalid_input")
    assert no_note.json()["errors"] == {"reason": ["Required."]}
    assert request_state() == before

    accepted = api_as(pool_admin).post(
        f"/api/v1/requests/{pk}/accept/", {"reason": "Two HGX H100 nodes ordered."}, format="json"
    )
    assert accepted.status_code == 200
    assert (accepted.json()["status"], accepted.json()["decision_reason"]) == (
        "accepted", "Two HGX H100 nodes ordered.",
    )  # fmt: skip
    assert accepted.json()["allocation"] is None
    retry = api_as(pool_admin).post(
        f"/api/v1/requests/{pk}/accept/", {"reason": "Two HGX H100 nodes ordered."}, format="json"
    )
    assert (retry.status_code, retry.json()["decision_reason"]) == (
        200, "Two HGX H100 nodes ordered.",
    )  # fmt: skip
    accepted_state = request_state()
    other = api_as(pool_admin).post(
        f"/api/v1/requests/{pk}/accept/", {"reason": "One node, in March."}, format="json"
    )
    assert other.status_code == 409
    assert other.json()["code"] == "invalid_transition"
    assert other.json()["data"] == {
        "status": "accepted",
        "action": "accept",
        "decision_reason": "Two HGX H100 nodes ordered.",
    }
    assert request_state() == accepted_state
    listed = api_as(team_member).get("/api/v1/requests/?kind=growth").json()
    assert [r["id"] for r in listed["results"]] == [pk]
    assert api_as(team_member).get("/api/v1/requests/?kind=cards").json()["results"] == []


# --- pages -------------------------------------------------------------------------------------


def test_pages_submit_queue_and_accept_capacity_to_add(
    client, team_member, pool_admin, team, infer_pool
):
    client.force_login(team_member)
    start = next_week_9am()
    response = client.post(
        "/requests/new/",
        {
            "team": team.slug, "kind": "growth", "workload_kind": "inference",
            "gpu_model": "h100_sxm", "card_count": 16,
            "starts_at": start.strftime("%Y-%m-%dT%H:%M"),
            "ends_at": (start + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M"),
            "justification": "Llama-3.1-70B", "submit_request": "1",
        },
    )  # fmt: skip
    growth = CapacityRequest.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/requests/{growth.pk}/"
    assert (growth.kind, growth.status, growth.pool_id) == ("growth", "submitted", None)

    client.force_login(pool_admin)
    queue = client.get("/requests/queue/").content.decode()
    assert "capacity to add" in queue and "Accept / decline…" in queue
    detail = client.get(f"/requests/{growth.pk}/").content.decode()
    assert "Accept as planned capacity" in detail and ">Approve<" not in detail

    client.post(f"/requests/{growth.pk}/accept/", {"reason": "Two HGX H100 nodes ordered."})
    growth.refresh_from_db()
    assert (growth.status, growth.decision_reason) == ("accepted", "Two HGX H100 nodes ordered.")
    client.force_login(team_member)
    page = client.get(f"/requests/{growth.pk}/").content.decode()
    assert "Accepted as planned capacity: Two HGX H100 nodes ordered." in page
