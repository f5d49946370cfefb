"""Capacity requests: create, submit, approve, accept, reject, cancel. One function per transition,
each in one transaction, each writing its audit event; approval holds the pool's row lock
(:mod:`pools.capacity.locks`) while it checks the capacity invariant.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from pools.audit.services import (
    audit_event_build,
    audit_event_record,
    audit_events_write,
    audit_snapshot,
)
from pools.capacity.availability import (
    SCHEDULER_OF_KIND,
    no_whole_cards,
    pool_free_cards,
    pool_free_slices,
    pool_slices,
    request_options,
    slice_nodes_away,
)
from pools.capacity.budget_gate import (
    NEEDS_ADMIN,
    BudgetVerdict,
    budget_check_step,
    card_equivalents,
)
from pools.capacity.class_room import class_room_check
from pools.capacity.generation import allocations_changed
from pools.capacity.locks import (
    pool_and_request_lock,
    pool_lock,
    request_lock,
    request_lock_reusing,
)
from pools.capacity.models import Allocation, CapacityRequest, PlacedCards
from pools.capacity.placement import away_reason
from pools.capacity.request_fields import RequestFields
from pools.capacity.rows import RowWriter
from pools.capacity.shapes import (
    placed_cards,
    placement_record,
    placement_taken,
    request_shape,
    shape_data,
    shape_fit,
)
from pools.capacity.slices import is_profile
from pools.capacity.window import WindowHolds, maintenance_windows_by_pool_model, window_holds
from pools.classes.models import WorkloadClass
from pools.classes.rules import ClassRule
from pools.classes.selectors import class_model_refusal
from pools.clusters.services import cluster_require_reachable
from pools.common.choices import (
    AllocationStatus,
    RequestKind,
    RequestStatus,
    Scheduler,
    WorkloadKind,
)
from pools.common.errors import (
    BudgetExceeded,
    ClusterUnreachable,
    InsufficientCapacity,
    InvalidInput,
    InvalidTransition,
    PermissionDenied,
)
from pools.inventory.driver_versions import parse_cuda_version
from pools.inventory.models import GpuModel, Pool
from pools.jobs import ALLOCATION_PROVISION, ELASTIC_HAND_BACK, enqueue_all_on_commit
from pools.tenancy.models import Team
from pools.tenancy.permissions import require_manager, require_member, require_pool_admin
from scheduler_adapters.types import MAX_GPUS_PER_NODE

# A start a few minutes in the past is "now" (clock skew, a slow form); more is an error.
START_GRACE = timedelta(minutes=10)
MAX_WINDOW = timedelta(days=366)
JUSTIFICATION_MAX = 5000
# The 403 of a non-admin approving, accepting or rejecting (services and API alike).
ADMINS_DECIDE = "Only pool admins may decide requests."
GROWTH_NOT_APPROVED = (
    "A request for capacity to add is accepted or rejected, not approved: no pool has the "
    "cards yet."
)


def _snapshot(request: CapacityRequest) -> dict:
    snapshot = audit_snapshot(
        request,
        "status",
        "kind",
        "card_count",
        "starts_at",
        "ends_at",
        pool="pool.slug",
        gpu_model="gpu_model.slug",
    )
    if request.mig_profile:  # card_count counts slices of it (issue 38)
        snapshot["mig_profile"] = request.mig_profile
    return snapshot


def validate_request_fields(
    fields: RequestFields, *, now: datetime | None = None, capacity: bool = True
) -> dict[str, str]:
    """Field errors of a request's inputs, ``{field: message}``; empty when usable. Of
    ``fields``, reads all but ``team``, ``justification``, ``extends`` and the shape
    (:func:`validate_shape_fields`); ``workload_class`` as stated (resolve it first with
    :func:`request_class`).

    Checks: the kind is known; the count is a positive integer; the window ends after it starts,
    does not start in the past (10 min grace) and lasts at most a year; a model or a minimum
    memory is given; a named pool runs the kind's scheduler and offers the model; the CUDA
    version is MAJOR.MINOR; the count fits the pool (or some eligible pool) at all.

    A ``growth`` request asks for what the pools do not have yet, so it names a GPU model and
    is not held to any pool's cards; a named pool (the one that must grow) must still run the
    workload's scheduler. ``capacity`` False leaves out the last check (whether the cards exist):
    the explainer (:mod:`pools.explain`) explains that rather than refusing the fields.

    A request for MIG slices (``mig_profile`` such as ``1g.10gb``; ``card_count`` counts
    slices) names the pool and GPU model, and the pool must hold at least that many slices of
    the profile on that model (:func:`_slice_errors`).

    With a ``workload_class``, the count must fit on models the class permits (the named
    model's refusal is :func:`request_class_errors`).
    """
    f = fields
    errors = _kind_and_count_errors(f.kind, f.workload_kind, f.card_count, f.gpu_model)
    if f.starts_at.tzinfo is None or f.ends_at.tzinfo is None:
        errors["starts_at"] = "Give times with a time zone offset."
        return errors
    errors.update(_window_errors(f.starts_at, f.ends_at, now or timezone.now()))
    errors.update(
        _choice_errors(f.workload_kind, f.pool, f.gpu_model, f.min_memory_gib, f.cuda_version)
    )
    if f.mig_profile:
        return errors or _slice_errors(f.mig_profile, f.kind, f.card_count, f.pool, f.gpu_model)
    if errors or f.kind == RequestKind.GROWTH or not capacity:
        return errors
    # a named model the class refuses is request_class_errors' to say, not the count's
    rule = f.workload_class.rule() if f.workload_class and f.gpu_model is None else None
    return _capacity_errors(f, rule)


def _kind_and_count_errors(
    kind: str, workload_kind: str, card_count: Any, gpu_model: GpuModel | None
) -> dict[str, str]:
    """The request's kind (a growth request names its model), workload and card count."""
    errors: dict[str, str] = {}
    if kind not in RequestKind.values:
        errors["kind"] = "Ask for cards from a pool, or for capacity to add."
    elif kind == RequestKind.GROWTH and gpu_model is None:
        errors["gpu_model"] = "Name the GPU model the pool should add."
    if workload_kind not in WorkloadKind.values:
        errors["workload_kind"] = "Choose training (Slurm) or inference (Kubernetes)."
    if isinstance(card_count, bool) or not isinstance(card_count, int) or card_count <= 0:
        errors["card_count"] = "The number of cards must be a whole number of at least 1."
    return errors


def _window_errors(starts_at: datetime, ends_at: datetime, now: datetime) -> dict[str, str]:
    """An aware window that ends after it starts, lasts at most :data:`MAX_WINDOW` and does
    not start before ``now`` less :data:`START_GRACE`."""
    errors: dict[str, str] = {}
    if ends_at <= starts_at:
        errors["ends_at"] = "The end must be after the start."
    elif ends_at - starts_at > MAX_WINDOW:
        errors["ends_at"] = "A request may last at most 366 days; ask again to extend."
    if starts_at < now - START_GRACE:
        errors["starts_at"] = "The start is in the past."
    return errors


def _choice_errors(
    workload_kind: str,
    pool: Pool | None,
    gpu_model: GpuModel | None,
    min_memory_gib: Decimal | None,
    cuda_version: str,
) -> dict[str, str]:
    """A model or a positive minimum memory, a MAJOR.MINOR CUDA version, and a named pool
    that runs the workload's scheduler (the error quotes the pool's name and names the kind by
    its value, ``training`` / ``inference``)."""
    errors: dict[str, str] = {}
    if gpu_model is None and min_memory_gib is None:
        errors["gpu_model"] = "Choose a GPU model, or a minimum memory per card."
    if min_memory_gib is not None and min_memory_gib <= 0:
        errors["min_memory_gib"] = "The minimum memory must be positive."
    if cuda_version and _cuda_or_none(cuda_version) is None:
        errors["cuda_version"] = "Write a CUDA version as MAJOR.MINOR, e.g. 12.4."
    if pool is not None and workload_kind in WorkloadKind.values:
        needed = SCHEDULER_OF_KIND[workload_kind]
        if pool.scheduler != needed:
            # The pool's name is quoted and the kind named by its value: a pool may be called
            # "Training (Slurm)", like the kind's label.
            errors["pool"] = (
                f"The pool “{pool.name}” runs {pool.get_scheduler_display()}; "
                f"{workload_kind} requests need a {needed.label} pool."
            )
    return errors


def _capacity_errors(fields: RequestFields, rule: ClassRule | None) -> dict[str, str]:
    """Whether the cards exist at all for otherwise usable ``fields``: the named pool offers
    the model, some eligible pool's driver supports the CUDA version, and one holds the count
    (on models the class ``rule`` permits)."""
    pool, gpu_model, cuda, count = (
        fields.pool, fields.gpu_model, fields.cuda_version, fields.card_count
    )  # fmt: skip
    kind_ok = _kind_options(fields, rule)
    offered = [o for o in kind_ok if o.schedulable or not cuda]
    if pool is not None and gpu_model is not None and not any(o.total for o in kind_ok):
        mig_cards = max((o.mig_cards for o in kind_ok), default=0)
        return {
            "gpu_model": f"{no_whole_cards(pool, gpu_model, mig_cards)}."
            if mig_cards
            else f"{pool.name} offers no schedulable {gpu_model.name} cards."
        }
    if cuda and not any(o.schedulable for o in kind_ok):
        return {"cuda_version": f"No eligible pool has a driver that supports CUDA {cuda}."}
    if not offered or max(o.usable for o in offered) < count:
        most = max((o.usable for o in offered), default=0)
        return {"card_count": f"No eligible pool has {count} such cards (the most is {most})."}
    return {}


def _kind_options(fields: RequestFields, rule: ClassRule | None) -> list:
    """The (pool, model) options (:func:`pools.capacity.availability.request_options`) for
    ``fields`` in pools of the workload's scheduler, on models the class ``rule`` permits."""
    options = request_options(
        workload_kind=fields.workload_kind,
        card_count=fields.card_count,
        start=fields.starts_at,
        end=fields.ends_at,
        pool=fields.pool,
        gpu_model=fields.gpu_model,
        min_memory_gib=fields.min_memory_gib,
        cuda=fields.cuda_version or None,
        rule=rule,
    )
    scheduler = SCHEDULER_OF_KIND[fields.workload_kind]
    return [
        o
        for o in options
        if o.pool.scheduler == scheduler
        and (
            rule is None
            or rule.permits(model_slug=o.gpu_model.slug, card_class=o.gpu_model.card_class)
        )
    ]


def _slice_errors(
    profile: Any, kind: str, count: int, pool: Pool | None, gpu_model: GpuModel | None
) -> dict[str, str]:
    """A request for ``count`` slices of MIG ``profile``: a profile name (``1g.10gb``), a
    request for cards (not growth), a named pool and GPU model, and at least ``count``
    schedulable slices of the profile there (:func:`pools.capacity.availability.pool_slices`);
    the message lists the profiles the pool × model has."""
    if not isinstance(profile, str) or not is_profile(profile):
        return {"mig_profile": "Give a MIG profile such as 1g.10gb, or leave it blank for cards."}
    if kind != RequestKind.CARDS:
        return {"mig_profile": "Capacity to add is asked for in whole cards."}
    if pool is None or gpu_model is None:
        return {"mig_profile": "Name the pool and the GPU model whose MIG slices you ask for."}
    if pool.scheduler == Scheduler.KUBERNETES and profile.endswith("+me"):
        # "+" may stand in no resource name nor label value: no quota could be written
        return {"mig_profile": f"{pool.name} cannot give {profile} slices a quota yet."}
    slices = pool_slices(pool=pool, gpu_model=gpu_model)
    if not slices.get(profile):
        offered = ", ".join(f"{name} ({n})" for name, n in sorted(slices.items())) or "none"
        return {
            "mig_profile": f"{pool.name} has no {gpu_model.name} MIG {profile} slices "
            f"(it has: {offered})."
        }
    if count > slices[profile]:
        return {
            "card_count": f"{pool.name} has {slices[profile]} {gpu_model.name} MIG {profile} "
            f"slices, fewer than {count}."
        }
    return {}


def validate_shape_fields(fields: RequestFields) -> dict[str, str]:
    """Field errors of a request's shape (``cards_per_node``, ``node_count``,
    ``one_nvlink_domain``, ``shared_nodes`` of ``fields``, against its ``card_count``);
    empty when there is none or it is usable."""
    card_count, cards_per_node, node_count, one_nvlink_domain, shared_nodes = (
        fields.card_count, fields.cards_per_node, fields.node_count, fields.one_nvlink_domain,
        fields.shared_nodes,
    )  # fmt: skip
    errors: dict[str, str] = {}
    for name, value in (("one_nvlink_domain", one_nvlink_domain), ("shared_nodes", shared_nodes)):
        if not isinstance(value, bool):
            errors[name] = "Say yes or no."
    if cards_per_node is None and node_count is None:
        if one_nvlink_domain is True or shared_nodes is True:
            errors["cards_per_node"] = "Give cards per node and nodes for a shape."
        return errors
    # no node holds more than MAX_GPUS_PER_NODE cards (the importers refuse such nodes)
    for name, value, most in (
        ("cards_per_node", cards_per_node, MAX_GPUS_PER_NODE),
        ("node_count", node_count, 1024),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
            errors[name] = f"Give a whole number from 1 to {most}."
    if errors:
        return errors
    if isinstance(card_count, int) and cards_per_node * node_count != card_count:
        errors["card_count"] = (
            f"{node_count} × {cards_per_node} is {cards_per_node * node_count} cards, "
            f"not {card_count}."
        )
    return errors


def _cuda_or_none(text: str) -> tuple[int, int] | None:
    # parse_cuda_version raises on "twelve" or "12" and answers None for "N/A": both are unusable.
    try:
        return parse_cuda_version(text)
    except ValueError:
        return None


def capacity_request_create(
    *, actor: Any, fields: RequestFields, submit: bool = True
) -> CapacityRequest:
    """Create the request ``fields`` state for their team (draft, or submitted when ``submit``).

    ``workload_class`` (issue 36) defaults to the extended allocation's, else the team's
    default class; a named GPU model the class does not permit is refused on ``gpu_model``
    with the models it may use (:func:`request_class_errors`), and an open request only lands
    on models it permits.

    ``mig_profile`` (``"1g.10gb"``) asks for ``card_count`` MIG slices of that profile of
    ``gpu_model`` in ``pool`` instead of whole cards: both named, no shape (issue 38).

    ``kind`` ``growth`` asks for capacity no pool has yet (see :class:`RequestKind`): any
    number of cards of a named GPU model, in no pool or the pool that must grow; a pool admin
    accepts it (:func:`capacity_request_accept`) or rejects it.

    A shape (``node_count`` groups of ``cards_per_node``, optionally ``one_nvlink_domain``;
    ``shared_nodes`` when groups may share a node) must multiply to ``card_count``; without one
    the request is for any ``card_count`` cards. See :mod:`pools.capacity.placement`.

    Raises :class:`PermissionDenied` when ``actor`` is not a member of the team (or staff),
    :class:`InvalidInput` with ``errors`` ``{field: message}`` for unusable fields
    (:func:`_create_errors`) and :class:`BudgetExceeded` when submitting is beyond a budget
    that refuses it; nothing is written then. A submitted request that the pool's auto-approve
    rule covers is approved at once (see :func:`capacity_request_submit`).

    In steps: the class stated (:func:`request_class`), every field error at once
    (:func:`_create_errors`), the budget for a submitted request of cards
    (:func:`pools.capacity.budget_gate.budget_check_step`), the request written
    (:func:`_request_record`), then submitted (:func:`capacity_request_submit`).
    """
    require_member(actor, fields.team)
    workload_class = request_class(
        team=fields.team, workload_class=fields.workload_class, extends=fields.extends
    )
    fields = replace(fields, workload_class=workload_class)
    errors = _create_errors(fields)
    if errors:
        raise InvalidInput("The request has invalid fields.", errors=errors)
    if submit and fields.kind == RequestKind.CARDS:  # refused by a budget: not even a draft left
        budget_check_step(
            request=CapacityRequest(team=fields.team, starts_at=fields.starts_at,
                                    ends_at=fields.ends_at),
            cards=card_equivalents(fields.card_count, fields.mig_profile, fields.gpu_model),
            ends_at=fields.ends_at, pool=fields.pool, gpu_model=fields.gpu_model, system=False,
        )  # fmt: skip
    request = _request_record(actor, fields)
    if submit:
        capacity_request_submit(request=request, actor=actor)
        request.refresh_from_db()
    return request


def capacity_request_create_once(
    *, actor: Any, fields: RequestFields, submit: bool = True
) -> tuple[CapacityRequest, bool]:
    """:func:`capacity_request_create`, once per ``fields.form_token``: ``(request, True)`` when
    it wrote one; ``(the request actor's form of that token wrote, False)`` when it is a second
    POST of the same form (a double click, a reload that posts again), nothing written. Two
    POSTs at once: the token's unique index makes the later INSERT fail once the earlier
    commits, and that one is answered (the index is per requester: another user's token
    collides with nothing). No token (``None``): always created. Raises what
    :func:`capacity_request_create` raises."""
    token = fields.form_token
    earlier = CapacityRequest.objects.filter(requested_by=actor, form_token=token)
    if token is not None and (found := earlier.first()) is not None:
        return found, False
    try:
        return capacity_request_create(actor=actor, fields=fields, submit=submit), True
    except IntegrityError:
        found = earlier.first() if token is not None else None
        if found is None:
            raise
        return found, False


def _create_errors(fields: RequestFields) -> dict[str, str]:
    """Every field error of a create, ``{field: message}``: the request's fields
    (:func:`validate_request_fields`), an extension that asks for other than cards of what the
    allocation holds, a MIG request with a shape, the shape (:func:`validate_shape_fields`),
    the class's models (:func:`request_class_errors`) and a blank or over-long justification
    (:data:`JUSTIFICATION_MAX` characters)."""
    errors = validate_request_fields(fields)
    extends, mig_profile = fields.extends, fields.mig_profile
    if extends is not None and fields.kind != RequestKind.CARDS:
        errors["kind"] = "An extension asks for cards from the allocation's pool."
    if extends is not None and mig_profile != extends.mig_profile:
        errors["mig_profile"] = "An extension asks for what the allocation holds."
    if mig_profile and (fields.cards_per_node is not None or fields.node_count is not None):
        errors["cards_per_node"] = "MIG slices are asked for without a shape."
    errors.update(validate_shape_fields(fields))
    errors.update(
        request_class_errors(workload_class=fields.workload_class, gpu_model=fields.gpu_model)
    )
    justification = fields.justification or ""
    if not justification.strip():
        errors["justification"] = "Say what the cards are for."
    elif len(justification) > JUSTIFICATION_MAX:
        errors["justification"] = f"Keep it under {JUSTIFICATION_MAX:,} characters."
    return errors


def request_record_values(fields: RequestFields) -> dict[str, Any]:
    """The columns a create writes for usable ``fields`` (requester aside), ``{name: value}``:
    no ``min_memory_gib`` when a model is named, ``cuda_version`` ``""`` for none, the
    justification stripped."""
    return {
        "team": fields.team,
        "workload_kind": fields.workload_kind,
        "workload_class": fields.workload_class,
        "kind": fields.kind,
        "pool": fields.pool,
        "gpu_model": fields.gpu_model,
        "min_memory_gib": None if fields.gpu_model else fields.min_memory_gib,
        "card_count": fields.card_count,
        "mig_profile": fields.mig_profile,
        "starts_at": fields.starts_at,
        "ends_at": fields.ends_at,
        "cuda_version": fields.cuda_version or "",
        "justification": fields.justification.strip(),
        "extends": fields.extends,
        "cards_per_node": fields.cards_per_node,
        "node_count": fields.node_count,
        "one_nvlink_domain": fields.one_nvlink_domain,
        "shared_nodes": fields.shared_nodes,
        "form_token": fields.form_token,
    }


def _request_record(actor: Any, fields: RequestFields) -> CapacityRequest:
    """Write the draft request ``actor`` asks with usable ``fields`` and its
    ``request.created`` audit event, in one transaction."""
    with transaction.atomic():
        request = CapacityRequest.objects.create(
            requested_by=actor, **request_record_values(fields)
        )
        audit_event_record(
            actor=actor, action="request.created", obj=request, after=_snapshot(request)
        )
    return request


def request_class(
    *, team: Team, workload_class: WorkloadClass | None, extends: Allocation | None = None
) -> WorkloadClass | None:
    """The class a new request states: the one named, else the extended allocation's, else
    the team's default (``None``: unclassed)."""
    if workload_class is not None:
        return workload_class
    if extends is not None and extends.workload_class_id is not None:
        return extends.workload_class
    return team.default_class


def request_class_errors(
    *, workload_class: WorkloadClass | None, gpu_model: GpuModel | None
) -> dict[str, str]:
    """``{"gpu_model": reason}`` when the class may not run on the named model ("Production may
    not run on GeForce RTX 4090: consumer class (it may use: …)"), else ``{}``."""
    if gpu_model is None:
        return {}
    refusal = class_model_refusal(workload_class=workload_class, gpu_model=gpu_model)
    return {"gpu_model": f"{refusal}."} if refusal else {}


def capacity_request_submit(*, request: CapacityRequest, actor: Any) -> CapacityRequest:
    """draft → submitted; then approve at once if the pool's auto-approve rule covers it.

    Idempotent: submitting a submitted request changes nothing. Raises
    :class:`InvalidTransition` from any other state.
    """
    require_member(actor, request.team)
    with transaction.atomic():
        request = request_lock(request.pk)
        if request.status == RequestStatus.SUBMITTED:
            return request
        if request.status != RequestStatus.DRAFT:
            raise InvalidTransition(
                f"A request that is {request.status} cannot be submitted.",
                status=request.status,
                action="submit",
            )
        verdict = _submit_budget_verdict(request)
        before = _snapshot(request)
        request.status = RequestStatus.SUBMITTED
        request.submitted_at = timezone.now()
        request.budget_verdict = verdict.enforcement if verdict else ""
        request.budget_reason = verdict.reason if verdict else ""
        request.save(update_fields=["status", "submitted_at", "budget_verdict", "budget_reason"])
        audit_event_record(
            actor=actor,
            action="request.submitted",
            obj=request,
            before=before,
            after=_snapshot(request),
        )
    if _auto_approvable(request):
        try:
            capacity_request_approve(
                request=request, actor=None, system=True, reason="auto-approved by the pool's rule"
            )
        except (InsufficientCapacity, BudgetExceeded, ClusterUnreachable):
            pass  # stays in the queue for a pool admin
    return request


def _submit_budget_verdict(request: CapacityRequest) -> BudgetVerdict | None:
    """The budget's verdict on submitting ``request`` as asked
    (:func:`pools.capacity.budget_gate.budget_check_step`, which raises
    :class:`BudgetExceeded` when a budget refuses it); ``None`` for capacity to add, which
    grants no cards yet."""
    if request.kind != RequestKind.CARDS:
        return None
    return budget_check_step(
        request=request, ends_at=request.ends_at,
        cards=card_equivalents(request.card_count, request.mig_profile, request.gpu_model),
        pool=request.pool, gpu_model=request.gpu_model, system=False,
    )  # fmt: skip


def _auto_approvable(request: CapacityRequest) -> bool:
    pool = request.pool
    if request.kind != RequestKind.CARDS:
        return False  # capacity to add is decided by a person
    if request.budget_verdict == NEEDS_ADMIN:
        return False  # beyond a budget that leaves it to a pool admin
    if pool is None or request.gpu_model_id is None or request.extends_id:
        return False
    if pool.auto_approve_max_cards is None or pool.auto_approve_max_days is None:
        return False
    return (
        request.card_count <= pool.auto_approve_max_cards
        and request.ends_at - request.starts_at <= timedelta(days=pool.auto_approve_max_days)
    )


def capacity_request_approve(
    *,
    request: CapacityRequest,
    actor: Any,
    card_count: int | None = None,
    ends_at: datetime | None = None,
    pool: Pool | None = None,
    gpu_model: GpuModel | None = None,
    reason: str = "",
    system: bool = False,
) -> Allocation:
    """submitted → approved, creating the allocation; return it.

    A pool admin may grant fewer cards or a shorter window, and must pick the pool and model
    when the request left them open. The capacity invariant — for the pool and model, the cards of
    holding allocations at every instant of the window plus these stay within schedulable cards ×
    over-commit — is checked with the pool's row locked, so concurrent approvals cannot
    over-commit. Idempotent: approving an approved request returns its allocation. Raises
    :class:`PermissionDenied`, :class:`InvalidInput`, :class:`InvalidTransition`,
    :class:`InsufficientCapacity` (data ``free``, ``requested``), :class:`ClusterUnreachable`
    (the pool's cluster is down: its pools are read-only); nothing is written then.
    ``system`` marks an approval by a rule rather than a person.

    A shaped request (``cards_per_node`` × ``node_count``) must also fit node by node on cards
    free for the whole window (:mod:`pools.capacity.shapes`), checked under the same lock; the
    cards counted on become the allocation's ``placement``. A refusal then carries ``shape``,
    ``largest_shape`` and ``largest_single_node`` and says the largest shape that does fit.

    An extension (``extends``) of an allocation with a placement keeps its cards: it is placed
    on the same nodes and GPUs, granted whole, when all are free for the extra window
    (:func:`pools.capacity.shapes.placement_taken`), and refused otherwise with ``taken`` (the
    cards that are not free), however the shape might fit elsewhere: the running job is on
    those cards. An extension of an unplaced allocation is checked like any request.

    In steps: where it grants (:func:`_approval_target`), the pool and request locked, still
    approvable (:func:`_check_approvable`), the grant's own bounds (:func:`_check_grant`), the
    class may use the model (:func:`_check_class`), the budget
    (:func:`pools.capacity.budget_gate.budget_check_step`), the slices, or the cards and shape,
    free for the window with no two classes on one card (:func:`_grant_room`), the decision
    written (:func:`_approval_record` of :func:`_new_allocation`), the scheduler work queued on
    commit (:func:`_approval_enqueue`).
    """
    if not system:
        require_pool_admin(actor, ADMINS_DECIDE)
    if request.kind == RequestKind.GROWTH:
        raise _not_approvable(request, GROWTH_NOT_APPROVED)
    target_pool, target_model = _approval_target(request, pool, gpu_model, card_count, ends_at)
    with transaction.atomic():
        locked_pool, request = _approval_locks(request, target_pool, target_model)
        if request.status == RequestStatus.APPROVED:
            return request.allocation
        _check_approvable(request, locked_pool, actor)
        cards = request.card_count if card_count is None else card_count
        end = request.ends_at if ends_at is None else ends_at
        _check_grant(request, cards, end, locked_pool, target_model)
        _check_class(request, target_model)
        budget_check_step(request=request, ends_at=end, pool=locked_pool, gpu_model=target_model,
                          cards=card_equivalents(cards, request.mig_profile, target_model),
                          system=system)  # fmt: skip
        placement = _grant_room(request, cards, end, locked_pool, target_model)
        allocation = _approval_record(
            request,
            actor,
            reason,
            _new_allocation(request, cards, end, locked_pool, target_model, placement),
        )
        _approval_enqueue(allocation)
    return allocation


def _approval_locks(
    request: CapacityRequest, pool: Pool | None, model: GpuModel | None
) -> tuple[Pool | None, CapacityRequest]:
    """The pool granted in (when known) and the request, locked in one statement."""
    if pool is None:
        return None, request_lock_reusing(request, model)
    return pool_and_request_lock(pool.pk, request, model)


def _check_approvable(request: CapacityRequest, locked_pool: Pool | None, actor: Any) -> None:
    """The (locked) request is submitted and has a pool to grant in, whose cluster answers:
    else :class:`InvalidTransition` or :class:`ClusterUnreachable` (its pools are read-only;
    what it says of the cluster is what ``actor`` may see)."""
    if request.status != RequestStatus.SUBMITTED or locked_pool is None:
        raise _not_approvable(request, f"A request that is {request.status} cannot be approved.")
    cluster_require_reachable(cluster_id=locked_pool.cluster_id, actor=actor)


def _grant_room(
    request: CapacityRequest, cards: int, end: datetime, pool: Pool, model: GpuModel
) -> list[dict[str, Any]]:
    """Room for the grant in the locked ``pool``: MIG slices free (:func:`_grant_slices`), or
    whole cards and the shape free (:func:`_grant_placement`) on cards no other class holds
    (:func:`pools.capacity.class_room.class_room_check`). Returns the placement to record."""
    if request.mig_profile:
        return _grant_slices(request, cards, end, pool, model)
    placement = _grant_placement(request, cards, end, pool, model)
    class_room_check(
        pool=pool, gpu_model=model, start=request.starts_at, end=end,
        cards=cards, workload_class=request.workload_class,
    )  # fmt: skip
    return placement


def _new_allocation(
    request: CapacityRequest,
    cards: int,
    end: datetime,
    pool: Pool,
    model: GpuModel,
    placement: list[dict[str, Any]],
) -> Allocation:
    """The allocation (unsaved, approved) of a grant of ``cards`` of ``model`` in ``pool``
    from the request's start until ``end``, on ``placement``."""
    return Allocation(
        request=request,
        team=request.team,
        pool=pool,
        gpu_model=model,
        workload_class=request.workload_class,
        card_count=cards,
        mig_profile=request.mig_profile,
        starts_at=request.starts_at,
        ends_at=end,
        status=AllocationStatus.APPROVED,
        placement=placement,
    )


def _check_class(request: CapacityRequest, gpu_model: GpuModel) -> None:
    """The request's workload class may run on the granted model (issue 36), whoever picked
    it; else :class:`InvalidInput` on ``gpu_model`` with the models the class may use."""
    errors = request_class_errors(workload_class=request.workload_class, gpu_model=gpu_model)
    if errors:
        raise InvalidInput(errors["gpu_model"], errors=errors)


def _not_approvable(request: CapacityRequest, message: str) -> InvalidTransition:
    return InvalidTransition(message, status=request.status, action="approve")


def _approval_target(
    request: CapacityRequest,
    pool: Pool | None,
    gpu_model: GpuModel | None,
    card_count: int | None,
    ends_at: datetime | None,
) -> tuple[Pool | None, GpuModel | None]:
    """Where an approval grants: the pool and model the admin or the request named; for an
    open request still submitted, the first option where the grant fits (checked again under
    the pool lock). An approved one answers its allocation without looking for room."""
    target_pool = pool or request.pool
    target_model = gpu_model or request.gpu_model
    if target_pool is None or target_model is None:
        current = CapacityRequest.objects.filter(pk=request.pk).values_list("status", flat=True)
        if current.get() == RequestStatus.SUBMITTED:
            target_pool, target_model = _choose_option(
                request, target_pool, target_model, card_count=card_count, ends_at=ends_at
            )
    return target_pool, target_model


def _grant_placement(
    request: CapacityRequest, cards: int, end: datetime, pool: Pool, model: GpuModel
) -> list[dict[str, Any]]:
    """The placement a grant of ``cards`` until ``end`` records (``[]`` unshaped), once the
    pool (locked) has the cards free for the window, the shape fits node by node, and an
    extension's placed cards are free; else raises :class:`InvalidInput` (not granted whole)
    or :class:`InsufficientCapacity` (:func:`_insufficient`). One read of what the window
    holds serves the card count and the shape check."""
    shape = request_shape(request)
    pinned = _extended_placement(request, pool, model)
    holds = window_holds(
        pool=pool,
        gpu_model=model,
        start=request.starts_at,
        end=end,
        per_node=shape is not None or bool(pinned),
    )
    free = pool_free_cards(
        pool=pool,
        gpu_model=model,
        start=request.starts_at,
        end=end,
        cuda=request.cuda_version or None,
        holds=holds,
    )
    _check_granted_whole(request, cards, shape, pinned)
    fit = None
    if shape is not None and not pinned:
        fit = shape_fit(
            pool=pool,
            gpu_model=model,
            shape=shape,
            start=request.starts_at,
            end=end,
            cuda=request.cuda_version or None,
            holds=holds,
        )
    if free < cards or (fit is not None and not fit.fits):
        raise _insufficient(pool, model, free, cards, shape, fit, (request.starts_at, end))
    if pinned:
        _check_extended_cards(request, pinned, end, pool, model, free, holds)
        return pinned
    return placement_record(fit) if fit is not None else []


def _grant_slices(
    request: CapacityRequest, cards: int, end: datetime, pool: Pool, model: GpuModel
) -> list[dict[str, Any]]:
    """The per-profile invariant of a request for MIG slices (issue 38), under the pool lock:
    the slices of ``request.mig_profile`` that ``pool`` × ``model`` holds now
    (:func:`pools.inventory.selectors.mig_slices`: MIG instances of schedulable cards in MIG
    mode) minus the most that holding slice allocations of that profile hold at once in
    ``[starts_at, end)`` (:func:`pools.capacity.window.window_holds`) must be at least
    ``cards``. No over-commit: a slice is a hardware partition, two teams cannot share it.
    Slices on nodes a maintenance window takes out are not free; the refusal names those nodes.
    Returns ``[]`` (slices are not placed); raises :class:`InsufficientCapacity` (data ``free``,
    ``requested``, ``mig_profile``) otherwise."""
    profile = request.mig_profile
    free = pool_free_slices(pool=pool, gpu_model=model, profile=profile,
                            start=request.starts_at, end=end)  # fmt: skip
    if free < cards:
        said = away_reason(slice_nodes_away(pool=pool, gpu_model=model, profile=profile,
                                            start=request.starts_at, end=end))  # fmt: skip
        raise InsufficientCapacity(
            f"Insufficient capacity: {free} {model.name} MIG {profile} slice(s) free in "
            f"{pool.name} for that window, {cards} requested."
            + (f" Not free: {said}." if said else ""),
            free=free,
            requested=cards,
            pool=pool.slug,
            gpu_model=model.slug,
            mig_profile=profile,
        )
    return []


def _check_granted_whole(
    request: CapacityRequest, cards: int, shape, pinned: list[dict[str, Any]]
) -> None:
    """An extension of a placed allocation, and a shaped request, are granted whole or not at
    all: :class:`InvalidInput` on ``card_count`` otherwise."""
    if pinned and cards != sum(len(spot["gpus"]) for spot in pinned):
        raise InvalidInput(
            "The approval has invalid fields.",
            errors={
                "card_count": f"An extension keeps the cards of allocation "
                f"#{request.extends_id} and is granted whole "
                f"({sum(len(spot['gpus']) for spot in pinned)} cards) or not at all."
            },
        )
    if shape is not None and not pinned and cards != shape.total_cards:
        raise InvalidInput(
            "The approval has invalid fields.",
            errors={
                "card_count": f"A {shape.describe()} request is granted whole "
                f"({shape.total_cards} cards) or not at all."
            },
        )


def _insufficient(
    pool: Pool, model: GpuModel, free: int, cards: int, shape, fit, window: tuple
) -> InsufficientCapacity:
    """The refusal of a grant: ``free`` and ``requested`` cards, and for a shape that does not
    fit, the shape, the largest that does and the largest on a single node; when planned
    maintenance windows take cards away in ``window`` (start, end), which ones
    (``maintenance``: ids)."""
    shaped = {}
    if fit is not None and not fit.fits:
        message = f"Insufficient capacity in {pool.name}: {fit.message()}"
        shaped = {
            "shape": shape_data(shape),
            "largest_shape": shape_data(fit.largest),
            "largest_single_node": shape_data(fit.largest_single_node),
        }
    else:
        message = (
            f"Insufficient capacity: {free} {model.name} card(s) free in "
            f"{pool.name} for that window, {cards} requested."
        )
    away = maintenance_windows_by_pool_model(*window, pool_id=pool.pk, gpu_model_id=model.pk).get(
        (pool.pk, model.pk), []
    )
    if away:
        titles = ", ".join(f"{title} (#{pk})" for pk, title, _, _, _ in away)
        message += f" Maintenance takes cards away in that window: {titles}."
        shaped["maintenance"] = [pk for pk, _, _, _, _ in away]
    return InsufficientCapacity(
        message, free=free, requested=cards, pool=pool.slug, gpu_model=model.slug, **shaped
    )


_ALLOCATIONS = RowWriter(Allocation)
# The decision's UPDATE written out, as request.save(update_fields=…) writes it: the ORM took
# longer to build it than PostgreSQL to run it (issue #29 item 7).
_APPROVED = (
    f"UPDATE {CapacityRequest._meta.db_table} SET status = %s, decided_by_id = %s, "
    "decided_at = %s, decision_reason = %s WHERE id = %s"
)


def _approval_record(
    request: CapacityRequest, actor: Any, reason: str, allocation: Allocation
) -> Allocation:
    """Write the decision: the request approved, ``allocation`` (unsaved) created with its
    placed cards, and both audit events in one INSERT (approvals are the hot path: issue #3,
    >= 100/s; issue #29 item 7: within 2x the bare transaction)."""
    before = _snapshot(request)
    request.status = RequestStatus.APPROVED
    request.decided_by = actor if getattr(actor, "is_authenticated", False) else None
    request.decided_at = timezone.now()
    request.decision_reason = reason
    with connection.cursor() as cursor:
        decided_at = connection.ops.adapt_datetimefield_value(request.decided_at)
        cursor.execute(_APPROVED, [request.status, request.decided_by_id, decided_at, reason,
                                   request.pk])  # fmt: skip
    _ALLOCATIONS.insert(allocation)
    allocations_changed()  # the INSERT sends no post_save
    if allocation.placement:
        PlacedCards.objects.bulk_create(placed_cards(allocation))
    audit_events_write(
        [
            audit_event_build(
                actor=actor,
                action="request.approved",
                obj=request,
                before=before,
                after=_snapshot(request),
                reason=reason,
            ),
            audit_event_build(
                actor=actor,
                action="allocation.approved",
                obj=allocation,
                after=allocation_snapshot(allocation),
                reason=reason,
            ),
        ]
    )
    return allocation


def _approval_enqueue(allocation: Allocation) -> None:
    """On commit: provision the allocation, and in a Kubernetes pool take back (with notice)
    the burst cards lent to elastic allocations that this guarantee needs: burst never counts
    against a guarantee (pools/elastic/services.py)."""
    jobs = [(ALLOCATION_PROVISION, allocation.pk)]
    if allocation.pool.scheduler == Scheduler.KUBERNETES:
        window = (allocation.starts_at.isoformat(), allocation.ends_at.isoformat())
        jobs.insert(0, (ELASTIC_HAND_BACK, allocation.pool_id, allocation.gpu_model_id, *window))
    enqueue_all_on_commit(*jobs)


def _extended_placement(
    request: CapacityRequest, pool: Pool, model: GpuModel
) -> list[dict[str, Any]]:
    """The placement an extension keeps: that of the allocation it extends, when it has one
    holding its cards (a shrink before placements shrank with it may have left it wider) and
    the extension is approved into the same pool and model; else ``[]``."""
    if request.extends_id is None:
        return []
    extended = request.extends
    if extended is None or (extended.pool_id, extended.gpu_model_id) != (pool.pk, model.pk):
        return []
    if sum(len(spot["gpus"]) for spot in extended.placement) != extended.card_count:
        return []
    return [{"node": spot["node"], "gpus": list(spot["gpus"])} for spot in extended.placement]


def _check_extended_cards(
    request: CapacityRequest,
    pinned: list[dict[str, Any]],
    end: datetime,
    pool: Pool,
    model: GpuModel,
    free: int,
    holds: WindowHolds,
) -> None:
    """Raise :class:`InsufficientCapacity` (data ``taken``: the cards not free, as a
    placement) when the cards of the extended allocation are not all free for the extra
    window: the running job needs those cards, not others. The message names the nodes of
    those cards a maintenance window takes out (``holds.away``)."""
    taken = placement_taken(
        pool=pool,
        gpu_model=model,
        placement=pinned,
        start=request.starts_at,
        end=end,
        cuda=request.cuda_version or None,
        holds=holds,
    )
    if not taken:
        return
    where = "; ".join(f"{spot['node']} GPU {', '.join(map(str, spot['gpus']))}" for spot in taken)
    said = away_reason(a for a in holds.away if a.node in {spot["node"] for spot in taken})
    raise InsufficientCapacity(
        f"Insufficient capacity in {pool.name}: the cards allocation #{request.extends_id} "
        f"runs on are not all free for the extra window ({where} taken or not schedulable"
        f"{'; ' + said if said else ''}). "
        "An extension keeps its cards; a new request may be placed elsewhere.",
        free=free,
        requested=request.card_count,
        pool=pool.slug,
        gpu_model=model.slug,
        taken=taken,
    )


def _check_grant(
    request: CapacityRequest, cards: Any, end: datetime, pool: Pool, model: GpuModel
) -> None:
    errors = {}
    if isinstance(cards, bool) or not isinstance(cards, int) or cards <= 0:
        errors["card_count"] = "Grant a whole number of cards, at least 1."
    elif cards > request.card_count:
        errors["card_count"] = f"Grant at most the {request.card_count} cards requested."
    if end > request.ends_at:
        errors["ends_at"] = "Grant at most the window requested."
    elif end <= request.starts_at:
        errors["ends_at"] = "The end must be after the start."
    if pool.scheduler != SCHEDULER_OF_KIND[request.workload_kind]:
        errors["pool"] = f"{pool.name} does not run {request.get_workload_kind_display()}."
    if request.gpu_model_id and model.pk != request.gpu_model_id:
        errors["gpu_model"] = f"The request is for {request.gpu_model.name}."
    elif request.min_memory_gib is not None and model.memory_gib < request.min_memory_gib:
        errors["gpu_model"] = f"{model.name} has less than {request.min_memory_gib} GiB."
    if errors:
        raise InvalidInput("The approval has invalid fields.", errors=errors)


def _choose_option(
    request: CapacityRequest,
    pool: Pool | None,
    model: GpuModel | None,
    *,
    card_count: Any = None,
    ends_at: datetime | None = None,
) -> tuple[Pool, GpuModel]:
    """Where an open request (no pool or no model named) goes: among the (pool, model)
    options with enough free cards for the grant (most free cards first), the first; for a
    shaped request granted whole, the first where the shape also fits node by node
    (:func:`pools.capacity.shapes.shape_fit`, one read per option tried). Raises
    :class:`InsufficientCapacity` when no option has the cards, or, for a shape, when it fits
    on none: then with the refusal of the option with most free cards (``shape``,
    ``largest_shape``, ``largest_single_node``, as for a named pool and model). Read without
    the pool lock; the approval checks its choice again under it."""
    # Look for room for what is granted (fewer cards, a shorter window), not what was asked;
    # an unusable grant is refused by _check_grant afterwards.
    cards = card_count if _is_count(card_count) else request.card_count
    end = ends_at if ends_at is not None and ends_at > request.starts_at else request.ends_at
    options = request_options(
        workload_kind=request.workload_kind,
        card_count=cards,
        start=request.starts_at,
        end=end,
        pool=pool,
        gpu_model=model,
        min_memory_gib=request.min_memory_gib,
        cuda=request.cuda_version or None,
        rule=request.workload_class.rule() if request.workload_class_id else None,
    )
    eligible = [o for o in options if o.eligible]
    if not eligible:
        raise InsufficientCapacity(
            "Insufficient capacity: no eligible pool has enough free cards for that window.",
            free=max((o.free for o in options), default=0),
            requested=cards,
        )
    shape = request_shape(request)
    if shape is None or cards != shape.total_cards:
        return eligible[0].pool, eligible[0].gpu_model  # a partial grant is refused later
    return _first_shape_fit(request, eligible, shape, cards, end)


def _first_shape_fit(
    request: CapacityRequest, eligible: list, shape, cards: int, end: datetime
) -> tuple[Pool, GpuModel]:
    """The first of the ``eligible`` options (most free cards first) where ``shape`` fits node
    by node until ``end`` (:func:`pools.capacity.shapes.shape_fit`, one read per option
    tried); else :class:`InsufficientCapacity` with the refusal of the first option."""
    refused = None
    for option in eligible:  # most free cards first; the first where the shape fits wins
        fit = shape_fit(
            pool=option.pool,
            gpu_model=option.gpu_model,
            shape=shape,
            start=request.starts_at,
            end=end,
            cuda=request.cuda_version or None,
        )
        if fit.fits:
            return option.pool, option.gpu_model
        refused = refused or (option, fit)
    option, fit = refused
    raise InsufficientCapacity(
        f"Insufficient capacity in {option.pool.name}: {fit.message()}",
        free=option.free,
        requested=cards,
        pool=option.pool.slug,
        gpu_model=option.gpu_model.slug,
        shape=shape_data(shape),
        largest_shape=shape_data(fit.largest),
        largest_single_node=shape_data(fit.largest_single_node),
    )


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


@dataclass(frozen=True)
class _Decision:
    """A pool admin's decision that ends a submitted request without an allocation: it moves
    the request to ``to_status``, audited as ``audit_action``. ``action`` (``"accept"``) names
    the transition in :class:`InvalidTransition`'s data, ``done`` (``"accepted"``) in its
    message; ``reason_missing`` is the message of the :class:`InvalidInput` for a blank
    reason. With ``only_kind``, a request of another kind is refused with ``wrong_kind``."""

    to_status: str
    action: str
    done: str
    audit_action: str
    reason_missing: str
    only_kind: str | None = None
    wrong_kind: str = ""


_ACCEPT = _Decision(
    to_status=RequestStatus.ACCEPTED,
    action="accept",
    done="accepted",
    audit_action="request.accepted",
    reason_missing="Say how the capacity will be added (the team sees it).",
    only_kind=RequestKind.GROWTH,
    wrong_kind="Only a request for capacity to add is accepted; approve a request for cards.",
)
_REJECT = _Decision(
    to_status=RequestStatus.REJECTED,
    action="reject",
    done="rejected",
    audit_action="request.rejected",
    reason_missing="Say why the request is rejected.",
)


def capacity_request_accept(
    *, request: CapacityRequest, actor: Any, reason: str
) -> CapacityRequest:
    """submitted → accepted, for a ``growth`` request (capacity no pool has yet): a pool admin
    takes it on for procurement or a pool's expansion and says how in ``reason`` (the team sees
    it, e.g. "2 HGX H100 nodes ordered, in infer-k8s from 2027-01"). No allocation is made and
    no card is counted: once the cards are in a pool, the team requests them as usual.

    Idempotent for an accepted request and the same note (another note: 409
    :class:`InvalidTransition`). Raises :class:`PermissionDenied` for non-admins,
    :class:`InvalidInput` without a note and :class:`InvalidTransition` for a request of cards
    or from any state but submitted; nothing is written then.
    """
    return _decide(request=request, actor=actor, reason=reason, decision=_ACCEPT)


def capacity_request_reject(
    *, request: CapacityRequest, actor: Any, reason: str
) -> CapacityRequest:
    """submitted → rejected, with a reason the team sees. Pool admins only.

    Idempotent for a rejected request and the same reason (another reason: 409
    :class:`InvalidTransition`). Raises :class:`InvalidInput` without a reason and
    :class:`InvalidTransition` from other states.
    """
    return _decide(request=request, actor=actor, reason=reason, decision=_REJECT)


def _decide(
    *, request: CapacityRequest, actor: Any, reason: str, decision: _Decision
) -> CapacityRequest:
    """Submitted → ``decision.to_status``, with the stripped ``reason`` stored and audited.

    Idempotent for a request already there with the same reason (:func:`_check_same_decision`);
    the :class:`PermissionDenied` for non-admins and
    the blank reason (:class:`InvalidInput`) are checked before the row is locked, the
    request's kind and status (:func:`_check_decidable`) after.
    """
    require_pool_admin(actor, ADMINS_DECIDE)
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput(decision.reason_missing, errors={"reason": "Required."})
    with transaction.atomic():
        request = request_lock(request.pk)
        if request.status == decision.to_status:
            _check_same_decision(request, decision, reason)
            return request
        _check_decidable(request, decision)
        before = _snapshot(request)
        request.status = decision.to_status
        request.decided_by, request.decided_at = actor, timezone.now()
        request.decision_reason = reason
        request.save(update_fields=["status", "decided_by", "decided_at", "decision_reason"])
        audit_event_record(actor=actor, action=decision.audit_action, obj=request,
                           before=before, after=_snapshot(request), reason=reason)  # fmt: skip
    return request


def _check_same_decision(request: CapacityRequest, decision: _Decision, reason: str) -> None:
    """A (locked) request already ``decision.to_status``: the same decision again (a retry:
    the stripped ``reason`` is the one recorded) changes nothing; another reason is
    :class:`InvalidTransition` (409) with the recorded one in ``data.decision_reason``, never a
    silent success that kept the first."""
    if reason != request.decision_reason:
        raise InvalidTransition(
            f"This request was already {decision.done} with another note: "
            f"{request.decision_reason!r}.",
            status=request.status,
            action=decision.action,
            decision_reason=request.decision_reason,
        )


def _check_decidable(request: CapacityRequest, decision: _Decision) -> None:
    """The (locked) request is of the kind ``decision`` takes and submitted; else
    :class:`InvalidTransition`."""
    if decision.only_kind is not None and request.kind != decision.only_kind:
        raise InvalidTransition(decision.wrong_kind, status=request.status, action=decision.action)
    if request.status != RequestStatus.SUBMITTED:
        raise InvalidTransition(
            f"A request that is {request.status} cannot be {decision.done}.",
            status=request.status,
            action=decision.action,
        )


def capacity_request_cancel(
    *, request: CapacityRequest, actor: Any, reason: str = ""
) -> CapacityRequest:
    """draft/submitted → cancelled; an approved request whose allocation has not started
    provisioning is cancelled together with it.

    The requester may cancel their own draft or submitted request; cancelling an approved one
    (which gives granted cards back) is for the team's managers and pool admins, like a release.
    Idempotent for a cancelled request; :class:`InvalidTransition` once the allocation is
    provisioning or later (release it instead). The admin's decision note is kept; the reason
    for cancelling goes to the audit trail.

    In steps: the pool and request locked, what the cancel takes with it and who may
    (:func:`_cancel_allocation`), the request and its allocation cancelled and audited
    (:func:`_cancel_record`).
    """
    require_member(actor, request.team)
    with transaction.atomic():
        if request.pool_id:
            pool_lock(request.pool_id)
        request = request_lock(request.pk)  # decide on the row as it is now
        if request.status == RequestStatus.CANCELLED:
            return request
        allocation = _cancel_allocation(request, actor)
        _cancel_record(request, allocation, actor, reason)
    return request


def capacity_request_may_cancel(*, request: CapacityRequest, actor: Any) -> bool:
    """Whether :func:`capacity_request_cancel` would cancel ``request`` for ``actor`` now: the
    same checks (who asks, and the request's and its allocation's status), read without a lock
    and written nowhere. The request page offers *Cancel this request* exactly then."""
    try:
        require_member(actor, request.team)
        _cancel_allocation(request, actor)
    except (InvalidTransition, PermissionDenied):
        return False
    return True


def _cancel_allocation(request: CapacityRequest, actor: Any) -> Allocation | None:
    """The allocation a cancel of the (locked) ``request`` cancels too (an approved request's,
    still approved), or ``None`` (a draft or submitted request). Raises
    :class:`InvalidTransition` when the request can no longer be cancelled, and
    :class:`PermissionDenied` unless ``actor`` requested it or manages the team (always needed
    once cards were granted)."""
    allocation = getattr(request, "allocation", None) if request.status == "approved" else None
    cancellable = request.status in (RequestStatus.DRAFT, RequestStatus.SUBMITTED) or (
        allocation is not None and allocation.status == AllocationStatus.APPROVED
    )
    if not cancellable:
        raise InvalidTransition(
            f"This request is {request.status} and can no longer be cancelled"
            + ("; release its allocation instead." if allocation else "."),
            status=request.status,
            action="cancel",
        )
    is_requester = getattr(actor, "pk", None) == request.requested_by_id
    if allocation is not None or not is_requester:
        require_manager(actor, request.team)
    return allocation


def _cancel_record(
    request: CapacityRequest, allocation: Allocation | None, actor: Any, reason: str
) -> None:
    """Write the cancel: ``request`` cancelled and, with it, ``allocation`` (when given), each
    with its audit event carrying ``reason``."""
    before = _snapshot(request)
    request.status = RequestStatus.CANCELLED
    request.save(update_fields=["status"])
    audit_event_record(actor=actor, action="request.cancelled", obj=request, before=before,
                       after=_snapshot(request), reason=reason)  # fmt: skip
    if allocation is None:
        return
    allocation.status = AllocationStatus.CANCELLED
    allocation.status_reason = reason
    allocation.save(update_fields=["status", "status_reason", "updated_at"])
    audit_event_record(
        actor=actor,
        action="allocation.cancelled",
        obj=allocation,
        before={"status": AllocationStatus.APPROVED},
        after={"status": AllocationStatus.CANCELLED},
        reason=reason,
    )


def allocation_snapshot(allocation: Allocation) -> dict:
    """The audited fields of an allocation, JSON-ready."""
    snapshot = audit_snapshot(
        allocation,
        "status",
        "card_count",
        "starts_at",
        "ends_at",
        pool="pool.slug",
        gpu_model="gpu_model.slug",
    )
    if allocation.placement:  # the cards a shape check counted on (issue #20)
        snapshot["placement"] = allocation.placement
    if allocation.mig_profile:  # card_count counts slices of it (issue 38)
        snapshot["mig_profile"] = allocation.mig_profile
    return snapshot
