"""The request and allocation services: every transition, its audit event, idempotency, and that
every refused action leaves the database exactly as it was.

Pools (tests/conftest.py): ``infer`` is Kubernetes with 8 L40S, ``train`` is Slurm with 8 A100.
Team ``nlp``: alice (member), mia (manager); victor is in team ``vision``; root-admin is staff.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core import mail
from django.utils import timezone
from factories import (
    AllocationFactory,
    CapacityRequestFactory,
    MembershipFactory,
    PoolFactory,
    next_week_9am,
    node_with_gpus,
)

from pools.audit.models import AuditEvent
from pools.audit.selectors import object_audit_trail
from pools.capacity.availability import pool_free_cards, request_options
from pools.capacity.models import Allocation, CapacityRequest
from pools.capacity.request_fields import RequestFields
from pools.capacity.services.allocations import (
    allocation_extend,
    allocation_lifecycle_sweep,
    allocation_release,
)
from pools.capacity.services.requests import (
    capacity_request_approve,
    capacity_request_cancel,
    capacity_request_create,
    capacity_request_reject,
    capacity_request_submit,
)
from pools.common.choices import AllocationStatus, RequestStatus, Scheduler
from pools.common.errors import (
    InsufficientCapacity,
    InvalidInput,
    InvalidTransition,
    PermissionDenied,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def window():
    start = next_week_9am()
    return start, start + timedelta(days=7)


@pytest.fixture
def create(team, infer_pool, l40s, window):
    """``create(actor, **fields)``: capacity_request_create with a 2-card L40S week in infer."""

    def make(actor, **fields):
        values = {
            "team": team,
            "workload_kind": "inference",
            "pool": infer_pool,
            "gpu_model": l40s,
            "card_count": 2,
            "starts_at": window[0],
            "ends_at": window[1],
            "justification": "serve llama-3-8b",
        }
        values.update(fields)
        submit = values.pop("submit", True)
        return capacity_request_create(actor=actor, fields=RequestFields(**values), submit=submit)

    return make


@pytest.fixture
def submitted(create, team_member):
    """alice's submitted request for 3 L40S in infer, next week (no auto-approve rule)."""
    return create(team_member, card_count=3)


def trail(obj) -> list[tuple]:
    """(action, actor username, before status, after status, reason) of each event, oldest
    first."""
    return [
        (
            e.action,
            e.actor.username if e.actor else None,
            (e.before or {}).get("status"),
            (e.after or {}).get("status"),
            e.reason,
        )
        for e in object_audit_trail(obj=obj)
    ]


def held(pool, model, start, end):
    return pool_free_cards(pool=pool, gpu_model=model, start=start, end=end)


# --- create and submit -------------------------------------------------------------------------


def test_create_a_draft_then_submit_it(create, team_member, infer_pool, l40s, window):
    draft = create(team_member, submit=False)

    assert (draft.status, draft.submitted_at, draft.requested_by) == ("draft", None, team_member)
    assert (draft.pool, draft.gpu_model, draft.card_count) == (infer_pool, l40s, 2)
    assert (draft.starts_at, draft.ends_at) == window

    submitted = capacity_request_submit(request=draft, actor=team_member)

    assert submitted.status == RequestStatus.SUBMITTED
    assert submitted.submitted_at is not None
    assert trail(submitted) == [
        ("request.created", "alice", None, "draft", ""),
        ("request.submitted", "alice", "draft", "submitted", ""),
    ]
    created = object_audit_trail(obj=submitted).first()
    assert created.after == {
        "status": "draft",
        "kind": "cards",
        "card_count": 2,
        "starts_at": window[0].isoformat(),
        "ends_at": window[1].isoformat(),
        "pool": "infer",
        "gpu_model": "l40s",
    }


def test_submit_twice_changes_nothing_the_second_time(submitted, team_member, request_state):
    before = request_state()

    again = capacity_request_submit(request=submitted, actor=team_member)

    assert again.pk == submitted.pk
    assert again.status == RequestStatus.SUBMITTED
    assert request_state() == before
    assert [a for a, *_ in trail(submitted)] == ["request.created", "request.submitted"]


def test_a_decided_request_cannot_be_submitted_again(
    submitted, team_member, pool_admin, request_state
):
    capacity_request_reject(request=submitted, actor=pool_admin, reason="no budget")
    before = request_state()

    with pytest.raises(InvalidTransition) as excinfo:
        capacity_request_submit(request=submitted, actor=team_member)

    assert excinfo.value.data == {"status": "rejected", "action": "submit"}
    assert excinfo.value.message == "A request that is rejected cannot be submitted."
    assert request_state() == before


def test_someone_outside_the_team_cannot_create_or_submit(
    create, other_member, team_member, request_state
):
    draft = create(team_member, submit=False)
    before = request_state()

    with pytest.raises(PermissionDenied):
        create(other_member)
    with pytest.raises(PermissionDenied):
        capacity_request_submit(request=draft, actor=other_member)

    assert request_state() == before


# --- approve -------------------------------------------------------------------------------------


def test_approve_creates_the_allocation_and_audits_both(
    submitted, pool_admin, infer_pool, l40s, window
):
    allocation = capacity_request_approve(request=submitted, actor=pool_admin, reason="fits")

    submitted.refresh_from_db()
    assert submitted.status == RequestStatus.APPROVED
    assert (submitted.decided_by, submitted.decision_reason) == (pool_admin, "fits")
    assert submitted.decided_at is not None
    assert allocation.request == submitted
    assert (allocation.team.slug, allocation.pool, allocation.gpu_model) == (
        "nlp",
        infer_pool,
        l40s,
    )
    assert (allocation.card_count, allocation.starts_at, allocation.ends_at) == (3, *window)
    assert allocation.status == AllocationStatus.APPROVED  # starts next week: not provisioned
    assert trail(submitted)[-1] == (
        "request.approved",
        "root-admin",
        "submitted",
        "approved",
        "fits",
    )
    assert trail(allocation) == [("allocation.approved", "root-admin", None, "approved", "fits")]
    assert held(infer_pool, l40s, *window) == 5  # 8 - 3


def test_approve_twice_answers_the_same_allocation(submitted, pool_admin, request_state):
    first = capacity_request_approve(request=submitted, actor=pool_admin)
    before = request_state()

    second = capacity_request_approve(request=submitted, actor=pool_admin)

    assert second.pk == first.pk
    assert Allocation.objects.filter(request=submitted).count() == 1
    assert request_state() == before


def test_approve_fewer_cards_for_a_shorter_window(
    create, team_member, pool_admin, infer_pool, l40s, window
):
    request = create(team_member, card_count=4)
    shorter = window[0] + timedelta(days=3)

    allocation = capacity_request_approve(
        request=request, actor=pool_admin, card_count=2, ends_at=shorter, reason="half for now"
    )

    assert (allocation.card_count, allocation.starts_at, allocation.ends_at) == (
        2,
        window[0],
        shorter,
    )
    request.refresh_from_db()
    assert (request.card_count, request.ends_at) == (4, window[1])  # what was asked stays
    event = object_audit_trail(obj=allocation).get()
    assert (event.after["card_count"], event.after["ends_at"]) == (2, shorter.isoformat())
    assert held(infer_pool, l40s, window[0], shorter) == 6  # 8 - 2
    assert held(infer_pool, l40s, shorter, window[1]) == 8  # the cut days are free


@pytest.mark.parametrize(
    ("grant", "field"),
    [
        ({"card_count": 4}, "card_count"),  # more than the 3 requested
        ({"card_count": 0}, "card_count"),
        ({"ends_at_days": 8}, "ends_at"),  # longer than the week requested
        ({"ends_at_days": 0}, "ends_at"),  # not after the start
    ],
)
def test_approve_cannot_grant_more_than_was_asked(
    submitted, pool_admin, request_state, grant, field
):
    if "ends_at_days" in grant:
        grant = {"ends_at": submitted.starts_at + timedelta(days=grant["ends_at_days"])}
    before = request_state()

    with pytest.raises(InvalidInput) as excinfo:
        capacity_request_approve(request=submitted, actor=pool_admin, **grant)

    assert list(excinfo.value.data["errors"]) == [field]
    assert request_state() == before


def test_approve_any_eligible_pool_picks_the_one_with_room(
    team, team_member, pool_admin, infer_pool, l40s, window
):
    # infer: 8 L40S, 7 held in the window -> 1 free. infer-b: 4 L40S, none held -> 4 free.
    # gpu-train: 8 L40S free but Slurm, so not eligible for inference.
    AllocationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=7,
        starts_at=window[0],
        ends_at=window[1],
    )
    infer_b = PoolFactory(
        slug="infer-b", name="Inference B", scheduler=Scheduler.KUBERNETES, slurm_partition=""
    )
    node_with_gpus(4, gpu_model="l40s", pool=infer_b, scheduler=Scheduler.KUBERNETES)
    slurm = PoolFactory(slug="gpu-train", name="A Slurm pool")
    node_with_gpus(8, gpu_model="l40s", pool=slurm)
    request = CapacityRequestFactory(
        team=team,
        requested_by=team_member,
        pool=None,
        workload_kind="inference",
        gpu_model=l40s,
        card_count=3,
    )

    allocation = capacity_request_approve(request=request, actor=pool_admin)

    assert (allocation.pool, allocation.gpu_model, allocation.card_count) == (infer_b, l40s, 3)
    request.refresh_from_db()
    assert request.pool is None  # the request keeps what was asked; the allocation says where
    assert held(infer_b, l40s, *window) == 1


def test_any_eligible_pool_skips_a_burst_pool_the_request_did_not_name(
    team, team_member, pool_admin, infer_pool, l40s, window
):
    # infer: 8 L40S, 4 held -> 4 free. burst: 8 L40S free (more room) but rented capacity for
    # elastic scale-up only: an open request for 3 lands at home, and the burst pool is refused
    # with its reason; naming the burst pool still places it there.
    AllocationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=4,
        starts_at=window[0],
        ends_at=window[1],
    )
    burst = PoolFactory(
        slug="burst",
        name="Burst (rented)",
        scheduler=Scheduler.KUBERNETES,
        slurm_partition="",
        burst=True,
    )
    node_with_gpus(8, gpu_model="l40s", pool=burst, scheduler=Scheduler.KUBERNETES)
    ask = {"workload_kind": "inference", "gpu_model": l40s, "card_count": 3}
    request = CapacityRequestFactory(team=team, requested_by=team_member, pool=None, **ask)

    allocation = capacity_request_approve(request=request, actor=pool_admin)

    assert (allocation.pool, allocation.card_count) == (infer_pool, 3)
    options = {
        o.pool.slug: o.reasons
        for o in request_options(
            card_count=3,
            start=window[0],
            end=window[1],
            **{k: v for k, v in ask.items() if k != "card_count"},
        )
    }
    assert options["burst"] == [
        "Burst (rented) is a burst pool: only elastic scale-up of teams that opted in lands "
        "there unless a request names it"
    ]
    named = CapacityRequestFactory(team=team, requested_by=team_member, pool=burst, **ask)
    assert capacity_request_approve(request=named, actor=pool_admin).pool == burst


def test_approve_fewer_cards_of_an_any_pool_request_looks_for_room_for_the_grant(
    team, team_member, pool_admin, infer_pool, l40s, window
):
    # 6 of 8 held: 2 free. The request asks 4 anywhere; the admin grants the 2 that fit.
    AllocationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=6,
        starts_at=window[0],
        ends_at=window[1],
    )
    request = CapacityRequestFactory(
        team=team, requested_by=team_member, pool=None, gpu_model=l40s, card_count=4
    )

    allocation = capacity_request_approve(request=request, actor=pool_admin, card_count=2)

    assert (allocation.pool, allocation.card_count) == (infer_pool, 2)


def test_approve_any_model_with_enough_memory_picks_an_eligible_model(
    team, team_member, pool_admin, infer_pool, l40s, window
):
    # L40S has 44.99 GiB (< 48): only the L20 (48 GiB) qualifies.
    node_with_gpus(4, gpu_model="l20", pool=infer_pool, scheduler=Scheduler.KUBERNETES)
    request = CapacityRequestFactory(
        team=team,
        requested_by=team_member,
        pool=infer_pool,
        gpu_model=None,
        min_memory_gib=Decimal("48"),
        card_count=2,
    )

    allocation = capacity_request_approve(request=request, actor=pool_admin)

    assert allocation.gpu_model.slug == "l20"
    assert allocation.pool == infer_pool
    assert held(infer_pool, l40s, *window) == 8  # no L40S taken


def test_approve_refuses_a_model_with_less_memory_than_asked(
    team, team_member, pool_admin, infer_pool, l40s, request_state
):
    request = CapacityRequestFactory(
        team=team,
        requested_by=team_member,
        pool=infer_pool,
        gpu_model=None,
        min_memory_gib=Decimal("48"),
        card_count=2,
    )
    before = request_state()

    with pytest.raises(InvalidInput) as excinfo:
        capacity_request_approve(request=request, actor=pool_admin, gpu_model=l40s)

    assert list(excinfo.value.data["errors"]) == ["gpu_model"]
    assert request_state() == before


def test_approve_with_too_few_free_cards_is_insufficient_capacity(
    team, submitted, pool_admin, infer_pool, l40s, window, request_state
):
    # 6 of 8 held for the second half of the window -> 2 free for the whole window.
    AllocationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=6,
        starts_at=window[0] + timedelta(days=3),
        ends_at=window[1] + timedelta(days=1),
    )
    before = request_state()

    with pytest.raises(InsufficientCapacity) as excinfo:
        capacity_request_approve(request=submitted, actor=pool_admin)

    assert excinfo.value.data == {"free": 2, "requested": 3, "pool": "infer", "gpu_model": "l40s"}
    assert request_state() == before
    # Granting the 2 that are free works.
    allocation = capacity_request_approve(request=submitted, actor=pool_admin, card_count=2)
    assert allocation.card_count == 2


def test_an_allocation_that_ended_before_the_window_does_not_count(
    team, submitted, pool_admin, infer_pool, l40s, window
):
    AllocationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=8,
        starts_at=window[0] - timedelta(days=2),
        ends_at=window[0],
    )

    assert capacity_request_approve(request=submitted, actor=pool_admin).card_count == 3


def test_over_commit_lets_a_pool_promise_more_cards(
    team, submitted, pool_admin, infer_pool, l40s, window
):
    infer_pool.overcommit_ratio = Decimal("1.50")
    infer_pool.save()
    AllocationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=8,
        starts_at=window[0],
        ends_at=window[1],
    )

    # floor(8 x 1.5) = 12 usable, 8 held -> 4 free >= 3.
    assert capacity_request_approve(request=submitted, actor=pool_admin).card_count == 3
    assert held(infer_pool, l40s, *window) == 1


@pytest.mark.parametrize("who", ["team_member", "team_manager", "other_member"])
def test_only_pool_admins_approve(submitted, request_state, who, request):
    actor = request.getfixturevalue(who)
    before = request_state()

    with pytest.raises(PermissionDenied):
        capacity_request_approve(request=submitted, actor=actor)

    assert request_state() == before


@pytest.mark.parametrize("status", ["draft", "rejected", "cancelled"])
def test_approve_from_another_state_is_an_invalid_transition(
    team, team_member, pool_admin, infer_pool, request_state, status
):
    request = CapacityRequestFactory(
        team=team, requested_by=team_member, pool=infer_pool, status=status
    )
    before = request_state()

    with pytest.raises(InvalidTransition) as excinfo:
        capacity_request_approve(request=request, actor=pool_admin)

    assert excinfo.value.data == {"status": status, "action": "approve"}
    # no article before the status ("A approved request" read wrong)
    assert excinfo.value.message == f"A request that is {status} cannot be approved."
    assert request_state() == before


def test_approving_an_approved_any_pool_request_answers_its_allocation(
    team, team_member, pool_admin, infer_pool, l40s, request_state
):
    # The request takes all 8 cards; a second approve must not look for room again.
    request = CapacityRequestFactory(
        team=team, requested_by=team_member, pool=None, gpu_model=l40s, card_count=8
    )
    first = capacity_request_approve(request=request, actor=pool_admin)
    before = request_state()

    again = capacity_request_approve(request=request, actor=pool_admin)

    assert again.pk == first.pk
    assert request_state() == before


# --- auto-approve --------------------------------------------------------------------------------


@pytest.fixture
def auto_pool(infer_pool):
    infer_pool.auto_approve_max_cards = 2
    infer_pool.auto_approve_max_days = 7
    infer_pool.save()
    return infer_pool


def test_the_auto_approve_rule_approves_small_short_requests_at_once(
    create, team_member, auto_pool, window
):
    request = create(team_member, card_count=2)  # 2 cards, exactly 7 days

    assert request.status == RequestStatus.APPROVED
    assert request.decided_by is None
    assert request.allocation.card_count == 2
    assert trail(request) == [
        ("request.created", "alice", None, "draft", ""),
        ("request.submitted", "alice", "draft", "submitted", ""),
        ("request.approved", None, "submitted", "approved", "auto-approved by the pool's rule"),
    ]


@pytest.mark.parametrize(
    ("cards", "days"),
    [(3, 7), (2, 8), (1, 30)],
)
def test_requests_beyond_the_rule_stay_submitted(
    create, team_member, auto_pool, window, cards, days
):
    request = create(team_member, card_count=cards, ends_at=window[0] + timedelta(days=days))

    assert request.status == RequestStatus.SUBMITTED
    assert not Allocation.objects.exists()


def test_an_auto_approvable_request_without_room_waits_in_the_queue(
    create, team, team_member, auto_pool, l40s, window
):
    AllocationFactory(
        team=team,
        pool=auto_pool,
        gpu_model=l40s,
        card_count=7,
        starts_at=window[0],
        ends_at=window[1],
    )

    request = create(team_member, card_count=2)  # 1 free

    assert request.status == RequestStatus.SUBMITTED
    assert Allocation.objects.count() == 1


# --- reject --------------------------------------------------------------------------------------


@pytest.mark.parametrize("reason", ["", "   "])
def test_reject_needs_a_reason(submitted, pool_admin, request_state, reason):
    before = request_state()

    with pytest.raises(InvalidInput) as excinfo:
        capacity_request_reject(request=submitted, actor=pool_admin, reason=reason)

    assert excinfo.value.data == {"errors": {"reason": "Required."}}
    assert request_state() == before


def test_reject_with_a_reason_and_again(submitted, pool_admin, request_state):
    rejected = capacity_request_reject(
        request=submitted, actor=pool_admin, reason="  quarter budget spent "
    )

    assert rejected.status == RequestStatus.REJECTED
    assert (rejected.decided_by, rejected.decision_reason) == (pool_admin, "quarter budget spent")
    assert trail(rejected)[-1] == (
        "request.rejected",
        "root-admin",
        "submitted",
        "rejected",
        "quarter budget spent",
    )
    before = request_state()

    again = capacity_request_reject(
        request=submitted, actor=pool_admin, reason="quarter budget spent"
    )

    assert again.decision_reason == "quarter budget spent"
    assert request_state() == before
    with pytest.raises(InvalidTransition) as other:
        capacity_request_reject(request=submitted, actor=pool_admin, reason="other reason")
    assert other.value.data["decision_reason"] == "quarter budget spent"
    assert request_state() == before


def test_an_approved_request_cannot_be_rejected(submitted, pool_admin, request_state):
    capacity_request_approve(request=submitted, actor=pool_admin)
    before = request_state()

    with pytest.raises(InvalidTransition):
        capacity_request_reject(request=submitted, actor=pool_admin, reason="changed my mind")

    assert request_state() == before


@pytest.mark.parametrize("who", ["team_member", "team_manager"])
def test_only_pool_admins_reject(submitted, request_state, who, request):
    before = request_state()

    with pytest.raises(PermissionDenied):
        capacity_request_reject(request=submitted, actor=request.getfixturevalue(who), reason="x")

    assert request_state() == before


# --- cancel --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("who", "username"),
    [("team_member", "alice"), ("team_manager", "mia"), ("pool_admin", "root-admin")],
)
def test_the_requester_a_manager_or_an_admin_cancels(submitted, who, username, request):
    actor = request.getfixturevalue(who)

    cancelled = capacity_request_cancel(request=submitted, actor=actor, reason="not needed")

    assert cancelled.status == RequestStatus.CANCELLED
    assert cancelled.decision_reason == ""  # the why of a cancel is in the audit trail
    assert trail(cancelled)[-1] == (
        "request.cancelled",
        username,
        "submitted",
        "cancelled",
        "not needed",
    )


def test_another_plain_member_cannot_cancel(submitted, team, other_member, request_state):
    bob = MembershipFactory(team=team, user__username="bob").user  # in nlp, not the requester
    before = request_state()

    for actor in (bob, other_member):
        with pytest.raises(PermissionDenied):
            capacity_request_cancel(request=submitted, actor=actor)

    assert request_state() == before


def test_the_requester_cannot_cancel_an_approved_request_a_manager_can(
    submitted, team_member, team_manager, pool_admin, request_state
):
    capacity_request_approve(request=submitted, actor=pool_admin, reason="ok")
    before = request_state()

    with pytest.raises(PermissionDenied):
        capacity_request_cancel(request=submitted, actor=team_member)

    assert request_state() == before
    cancelled = capacity_request_cancel(request=submitted, actor=team_manager, reason="moved")
    assert (cancelled.status, cancelled.decision_reason) == ("cancelled", "ok")


def test_cancel_twice_changes_nothing_the_second_time(submitted, team_member, request_state):
    capacity_request_cancel(request=submitted, actor=team_member)
    before = request_state()

    again = capacity_request_cancel(request=submitted, actor=team_member, reason="again")

    assert again.status == RequestStatus.CANCELLED
    assert request_state() == before


def test_cancelling_an_approved_request_cancels_its_allocation_and_frees_the_cards(
    submitted, team_manager, pool_admin, infer_pool, l40s, window
):
    allocation = capacity_request_approve(request=submitted, actor=pool_admin)
    assert held(infer_pool, l40s, *window) == 5

    capacity_request_cancel(request=submitted, actor=team_manager, reason="project stopped")

    allocation.refresh_from_db()
    assert allocation.status == AllocationStatus.CANCELLED
    assert trail(allocation)[-1] == (
        "allocation.cancelled",
        "mia",
        "approved",
        "cancelled",
        "project stopped",
    )
    assert held(infer_pool, l40s, *window) == 8


@pytest.mark.parametrize("status", ["active", "provisioning"])
def test_an_allocation_past_approved_cannot_be_cancelled_only_released(
    team, team_manager, status, request_state
):
    allocation = AllocationFactory(team=team, status=status)
    before = request_state()

    with pytest.raises(InvalidTransition) as excinfo:
        capacity_request_cancel(request=allocation.request, actor=team_manager)

    assert "release" in excinfo.value.message
    assert request_state() == before


def test_a_rejected_request_cannot_be_cancelled(submitted, team_member, pool_admin, request_state):
    capacity_request_reject(request=submitted, actor=pool_admin, reason="no")
    before = request_state()

    with pytest.raises(InvalidTransition):
        capacity_request_cancel(request=submitted, actor=team_member)

    assert request_state() == before


# --- release -------------------------------------------------------------------------------------


@pytest.fixture
def running(team, infer_pool, l40s):
    """An active 5-card allocation that started yesterday and ends in 6 days, and a 2-card one
    beside it."""
    now = timezone.now()
    AllocationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=2,
        starts_at=now - timedelta(days=2),
        ends_at=now + timedelta(days=10),
        status=AllocationStatus.ACTIVE,
    )
    return AllocationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=5,
        starts_at=now - timedelta(days=1),
        ends_at=now + timedelta(days=6),
        status=AllocationStatus.ACTIVE,
    )


def test_a_manager_releases_an_active_allocation_and_its_cards_return(
    running, team_manager, infer_pool, l40s
):
    soon = timezone.now() + timedelta(hours=1), timezone.now() + timedelta(hours=2)
    assert held(infer_pool, l40s, *soon) == 1  # 8 - 5 - 2

    released = allocation_release(allocation=running, actor=team_manager, reason="done early")

    assert released.status == AllocationStatus.ENDED
    assert running.starts_at < released.ends_at <= timezone.now()
    assert held(infer_pool, l40s, *soon) == 6  # up by exactly the 5 released
    assert trail(released) == [("allocation.released", "mia", "active", "ended", "done early")]


def test_release_twice_changes_nothing_the_second_time(running, team_manager, request_state):
    allocation_release(allocation=running, actor=team_manager)
    before = request_state()

    again = allocation_release(allocation=running, actor=team_manager)

    assert again.status == AllocationStatus.ENDED
    assert request_state() == before


def test_releasing_an_allocation_that_has_not_started_cancels_it(
    team, team_manager, infer_pool, l40s, window, request_state
):
    allocation = AllocationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=4,
        starts_at=window[0],
        ends_at=window[1],
    )
    assert held(infer_pool, l40s, *window) == 4

    released = allocation_release(allocation=allocation, actor=team_manager)

    assert released.status == AllocationStatus.CANCELLED
    assert released.ends_at == window[1]  # the window is kept as it was granted
    assert held(infer_pool, l40s, *window) == 8
    assert trail(released) == [("allocation.cancelled", "mia", "approved", "cancelled", "released")]
    before = request_state()
    assert allocation_release(allocation=allocation, actor=team_manager).status == "cancelled"
    assert request_state() == before


@pytest.mark.parametrize("who", ["team_member", "other_member"])
def test_a_plain_member_cannot_release(running, request_state, who, request):
    before = request_state()

    with pytest.raises(PermissionDenied):
        allocation_release(allocation=running, actor=request.getfixturevalue(who))

    assert request_state() == before


@pytest.mark.parametrize("status", ["failed", "reclaimed"])
def test_a_finished_allocation_cannot_be_released(team, team_manager, status, request_state):
    allocation = AllocationFactory(team=team, status=status)
    before = request_state()

    with pytest.raises(InvalidTransition):
        allocation_release(allocation=allocation, actor=team_manager)

    assert request_state() == before


# --- extend --------------------------------------------------------------------------------------


def test_extend_asks_for_the_extra_window_in_a_new_request(running, team_member, infer_pool, l40s):
    new_end = running.ends_at + timedelta(days=3)

    extension = allocation_extend(
        allocation=running, actor=team_member, ends_at=new_end, justification="eval runs late"
    )

    assert extension.status == RequestStatus.SUBMITTED
    assert extension.extends == running
    assert (extension.starts_at, extension.ends_at) == (running.ends_at, new_end)
    assert (extension.pool, extension.gpu_model, extension.card_count) == (infer_pool, l40s, 5)
    assert (extension.requested_by, extension.justification) == (team_member, "eval runs late")
    assert [a for a, *_ in trail(extension)] == ["request.created", "request.submitted"]
    running.refresh_from_db()
    assert running.status == AllocationStatus.ACTIVE  # unchanged until the extension is approved


def test_an_extension_does_not_compete_with_the_allocation_it_extends(
    team, team_member, pool_admin, infer_pool, l40s
):
    # All 8 cards held until the end; the extension starts exactly then (half-open windows).
    now = timezone.now()
    allocation = AllocationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=8,
        starts_at=now - timedelta(days=1),
        ends_at=now + timedelta(days=2),
        status="active",
    )
    extension = allocation_extend(
        allocation=allocation,
        actor=team_member,
        ends_at=allocation.ends_at + timedelta(days=1),
        justification="one more day",
    )

    granted = capacity_request_approve(request=extension, actor=pool_admin)

    assert (granted.starts_at, granted.card_count) == (allocation.ends_at, 8)


def test_one_extension_may_wait_at_a_time(running, team_member, request_state):
    first = allocation_extend(
        allocation=running,
        actor=team_member,
        ends_at=running.ends_at + timedelta(days=1),
        justification="a",
    )
    before = request_state()

    with pytest.raises(InvalidTransition) as excinfo:
        allocation_extend(
            allocation=running,
            actor=team_member,
            ends_at=running.ends_at + timedelta(days=2),
            justification="b",
        )

    assert excinfo.value.data["pending_request"] == first.pk
    assert request_state() == before


def test_extensions_chain_from_the_last_granted_end(running, team_member, pool_admin):
    one_day = running.ends_at + timedelta(days=1)
    first = allocation_extend(
        allocation=running, actor=team_member, ends_at=one_day, justification="a"
    )
    capacity_request_approve(request=first, actor=pool_admin)

    second = allocation_extend(
        allocation=running,
        actor=team_member,
        ends_at=one_day + timedelta(days=2),
        justification="b",
    )

    # [end, end+1d) is granted already: the next window starts where that one ends.
    assert (second.starts_at, second.ends_at) == (one_day, one_day + timedelta(days=2))
    capacity_request_reject(request=second, actor=pool_admin, reason="enough")
    with pytest.raises(InvalidInput):  # not after what is already granted
        allocation_extend(allocation=running, actor=team_member, ends_at=one_day, justification="c")


def test_extensions_are_never_auto_approved(running, team_member, infer_pool):
    infer_pool.auto_approve_max_cards, infer_pool.auto_approve_max_days = 8, 30
    infer_pool.save()

    extension = allocation_extend(
        allocation=running,
        actor=team_member,
        ends_at=running.ends_at + timedelta(days=1),
        justification="x",
    )

    assert extension.status == RequestStatus.SUBMITTED


def test_extend_must_end_later_than_now(running, team_member, request_state):
    before = request_state()

    with pytest.raises(InvalidInput) as excinfo:
        allocation_extend(
            allocation=running, actor=team_member, ends_at=running.ends_at, justification="x"
        )

    assert list(excinfo.value.data["errors"]) == ["ends_at"]
    assert request_state() == before


def test_extend_refused_outside_the_team_or_for_an_ended_allocation(
    running, team_member, team_manager, other_member, request_state
):
    later = running.ends_at + timedelta(days=1)
    with pytest.raises(PermissionDenied):
        allocation_extend(allocation=running, actor=other_member, ends_at=later, justification="x")
    allocation_release(allocation=running, actor=team_manager)
    before = request_state()

    with pytest.raises(InvalidTransition):
        allocation_extend(allocation=running, actor=team_member, ends_at=later, justification="x")

    assert request_state() == before


# --- lifecycle sweep -----------------------------------------------------------------------------

NOW = datetime(2031, 6, 2, 12, 0, tzinfo=UTC)  # a fixed clock, years away from the real one


def test_the_sweep_provisions_expires_and_ends_with_a_fixed_clock(team, infer_pool, l40s):
    def alloc(status, start_h, end_h):
        return AllocationFactory(
            team=team,
            pool=infer_pool,
            gpu_model=l40s,
            status=status,
            starts_at=NOW + timedelta(hours=start_h),
            ends_at=NOW + timedelta(hours=end_h),
        )

    opened = alloc("approved", -1, 240)  # window opened an hour ago -> active
    opening = alloc("approved", 0.2, 240)  # opens in 12 min, within the 15 min lead -> active
    later = alloc("approved", 24, 240)  # opens tomorrow -> stays approved
    ending = alloc("active", -100, 71)  # ends in 71 h (< 3 days) -> expiring
    at_three_days = alloc("active", -100, 72)  # ends in exactly 3 days -> expiring
    not_yet = alloc("active", -100, 73)  # 73 h -> stays active
    over = alloc("active", -100, -0.1)  # ended 6 min ago -> ended
    never_started = alloc("approved", -48, -1)  # never provisioned, window over -> ended

    counts = allocation_lifecycle_sweep(now=NOW)

    assert counts == {"provisioned": 2, "expiring": 2, "ended": 2}
    status = dict(Allocation.objects.values_list("pk", "status"))
    assert [status[a.pk] for a in (opened, opening, later)] == ["active", "active", "approved"]
    assert [status[a.pk] for a in (ending, at_three_days, not_yet)] == [
        "expiring",
        "expiring",
        "active",
    ]
    assert [status[a.pk] for a in (over, never_started)] == ["ended", "ended"]
    assert [a for a, *_ in trail(opened)] == ["allocation.provisioning", "allocation.active"]
    assert trail(over) == [("allocation.ended", None, "active", "ended", "window ended")]
    assert trail(ending) == [
        ("allocation.expiring", None, "active", "expiring", "ends within 3 days")
    ]
    assert Allocation.objects.get(pk=ending.pk).expiry_notified_at == NOW

    events = AuditEvent.objects.count()
    assert allocation_lifecycle_sweep(now=NOW) == {"provisioned": 0, "expiring": 0, "ended": 0}
    assert AuditEvent.objects.count() == events


def test_expiring_emails_the_team_once(
    team,
    team_member,
    team_manager,
    other_member,
    infer_pool,
    l40s,
    django_capture_on_commit_callbacks,
):
    allocation = AllocationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=2,
        status="active",
        starts_at=NOW - timedelta(days=5),
        ends_at=NOW + timedelta(days=2),
    )

    with django_capture_on_commit_callbacks(execute=True):
        allocation_lifecycle_sweep(now=NOW)

    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert sorted(message.to) == ["alice@example.com", "mia@example.com"]  # not victor
    assert message.subject == "[gpu-pool] 2× L40S in Inference ends 2031-06-04 12:00 UTC"
    assert f"Allocation #{allocation.pk} of team NLP" in message.body

    with django_capture_on_commit_callbacks(execute=True):
        allocation_lifecycle_sweep(now=NOW + timedelta(hours=1))

    assert len(mail.outbox) == 1
    assert Allocation.objects.get(pk=allocation.pk).status == AllocationStatus.EXPIRING


def test_an_expiring_allocation_ends_at_its_end(team, infer_pool, l40s):
    allocation = AllocationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        status="expiring",
        starts_at=NOW - timedelta(days=5),
        ends_at=NOW,
    )

    assert allocation_lifecycle_sweep(now=NOW)["ended"] == 1
    assert Allocation.objects.get(pk=allocation.pk).status == AllocationStatus.ENDED
    assert CapacityRequest.objects.get(pk=allocation.request_id).status == "approved"


def test_the_sweep_uses_the_settings_warning_days(team, infer_pool, l40s, settings):
    settings.ALLOCATION_EXPIRY_WARNING_DAYS = 5
    allocation = AllocationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        status="active",
        starts_at=NOW - timedelta(days=5),
        ends_at=NOW + timedelta(days=4, hours=23),
    )

    assert allocation_lifecycle_sweep(now=NOW)["expiring"] == 1
    assert Allocation.objects.get(pk=allocation.pk).status_reason == "ends within 5 days"


def test_a_release_takes_its_extensions_with_it(running, team_member, team_manager, pool_admin):
    """h-newuser3: releasing an allocation left its approved extension approved, holding the
    same cards again from the old end (and billing them), and a waiting one still waiting."""
    one_day = running.ends_at + timedelta(days=1)
    granted = allocation_extend(
        allocation=running, actor=team_member, ends_at=one_day, justification="a"
    )
    extension = capacity_request_approve(request=granted, actor=pool_admin)
    waiting = allocation_extend(
        allocation=running,
        actor=team_member,
        ends_at=one_day + timedelta(days=1),
        justification="b",
    )
    assert (extension.status, waiting.status) == (
        AllocationStatus.APPROVED,
        RequestStatus.SUBMITTED,
    )

    released = allocation_release(allocation=running, actor=team_manager)

    extension.refresh_from_db()
    waiting.refresh_from_db()
    assert released.status == AllocationStatus.ENDED
    # The extension's window (from the old end) had not started: cancelled, not ended.
    assert extension.status == AllocationStatus.CANCELLED
    assert waiting.status == RequestStatus.CANCELLED
    reason = f"the allocation it extends (#{running.pk}) was released"
    assert extension.status_reason == reason
    assert AuditEvent.objects.filter(
        action="allocation.cancelled", object_id=extension.pk, reason=reason
    ).exists()
    assert not Allocation.objects.holding().filter(request__extends=running).exists()
