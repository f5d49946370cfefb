"""Allocations after approval: provision, release, extend, expire, end.

Every transition is one function, one transaction and one audit event. Provisioning is called by
a Celery task after the approval committed; the scheduler binding (Slurm GrpTRES, Kubernetes
ResourceQuota) is applied by the adapter configured for the pool's scheduler.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from pools.audit.services import audit_event_record
from pools.capacity.lifecycle import APPLIED_STATUSES, HOLDING_STATUSES, transition_allowed
from pools.capacity.locks import allocation_lock, pool_lock
from pools.capacity.models import Allocation, CapacityRequest
from pools.capacity.request_fields import RequestFields
from pools.capacity.services.requests import (
    allocation_snapshot,
    capacity_request_cancel,
    capacity_request_create,
)
from pools.capacity.services.scheduler_binding import (
    PROVISION_LEAD,
    binding_apply,
    kubernetes_quota_sync,
    kueue_lender_sync,
    quota_refusal_record,
    reservation_refusal_record,
    slurm_limit_sync,
    slurm_reservation_remove,
)
from pools.clusters.adapters import pool_adapter
from pools.common.choices import AllocationStatus, RequestStatus, Scheduler
from pools.common.errors import InvalidInput, InvalidTransition
from pools.jobs import ALLOCATION_UNBIND, enqueue_on_commit
from pools.tenancy import selectors as tenancy_selectors
from pools.tenancy.permissions import require_manager, require_member
from scheduler_adapters.errors import CredentialsUnreadable, SchedulerError

logger = logging.getLogger(__name__)


class BindingCrashed(SchedulerError):
    """Applying an allocation raised something that is no scheduler error: an answer the
    adapter could not read, or a defect. Transient: retried like a scheduler that did not
    answer, then the allocation fails with this message; the traceback is in the log."""

    code = "binding_crashed"
    transient = True


def allocation_transition(
    allocation: Allocation, *, to: str, actor: Any, action: str, reason: str = "", **fields
) -> Allocation:
    """Move a locked ``allocation`` to status ``to`` (setting ``fields`` too) with its audit
    event; queues the unbind task on commit when it leaves the scheduler-applied statuses.

    Raises :class:`InvalidTransition` when :data:`pools.capacity.lifecycle.TRANSITIONS` does
    not allow the move; nothing is written then. The caller holds the allocation's lock.
    """
    if not transition_allowed(allocation.status, to):
        raise InvalidTransition(
            f"An allocation that is {allocation.status} cannot become {to}.",
            status=allocation.status,
            action=action,
        )
    before = allocation_snapshot(allocation)
    was_applied = allocation.status in APPLIED_STATUSES
    allocation.status = to
    if was_applied and to not in APPLIED_STATUSES:
        # The scheduler still enforces the old cap: lower it once this commits (a task, so the
        # scheduler is never called with a lock held).
        enqueue_on_commit(ALLOCATION_UNBIND, allocation.pk)
    for name, value in fields.items():
        setattr(allocation, name, value)
    allocation.status_reason = reason or allocation.status_reason
    allocation.save()
    audit_event_record(
        actor=actor,
        action=action,
        obj=allocation,
        before=before,
        after=allocation_snapshot(allocation),
        reason=reason,
    )
    return allocation


# What an allocation left provisioning by the lifecycle sweep (or with no worker) waits for.
SWEEP_RETRIES = "the lifecycle sweep tries again within 5 min"


def allocation_provision(
    *,
    allocation_id: int,
    now: datetime | None = None,
    final_attempt: bool = True,
    next_try: str = SWEEP_RETRIES,
) -> Allocation:
    """approved → provisioning → active, applying the scheduler binding in between.

    The scheduler is called with no lock held, between two transactions. A transient scheduler
    error (down, timeout, a 5xx that is no definite refusal) is raised again while
    ``final_attempt`` is false, leaving the allocation ``provisioning`` with a reason that says
    what happened and ``next_try`` ("Slurm answered 500; retry 3 of 8 at 14:02"); a permanent
    one, or a transient one on the final attempt, marks it ``failed`` with the scheduler's
    message. A provisioning allocation's reason is never empty ("applying in Slurm" until the
    first answer). Safe to run twice: an allocation already provisioning is applied again
    (bindings are idempotent); one in any other state is left alone. ``now`` is the sweep's
    clock (default: the real one).

    The allocation can stop holding cards while the scheduler applies it (released, cancelled,
    reclaimed), and the unbind that followed may have run before the apply landed: then what
    was applied is kept on the allocation and the unbind queued again to take it back
    (:func:`_applied_after_release`); deleted meanwhile, it is taken back here
    (:func:`_applied_after_delete`) and :class:`Allocation.DoesNotExist` raised.
    """
    now = now or timezone.now()
    with transaction.atomic():
        allocation = allocation_lock(allocation_id)
        if allocation.status not in (AllocationStatus.APPROVED, AllocationStatus.PROVISIONING):
            return allocation
        if allocation.starts_at > now + PROVISION_LEAD:
            return allocation  # the lifecycle sweep provisions it when its window opens
        if allocation.status == AllocationStatus.APPROVED:
            allocation_transition(
                allocation,
                to=AllocationStatus.PROVISIONING,
                actor=None,
                action="allocation.provisioning",
                reason=f"applying in {Scheduler(allocation.pool.scheduler).label}",
            )
    try:
        binding = _binding_apply_checked(allocation, now)
    except SchedulerError as exc:
        if exc.transient and not final_attempt:
            _provision_waits(allocation, exc, next_try)
            raise
        return allocation_fail(allocation_id=allocation_id, reason=f"{exc}")
    with transaction.atomic():
        try:
            locked = allocation_lock(allocation_id)
        except Allocation.DoesNotExist:
            pass
        else:
            return _provision_applied(locked, binding)
    _applied_after_delete(allocation, binding)  # outside the transaction: it calls the scheduler


def _provision_applied(allocation: Allocation, binding: dict) -> Allocation:
    """The locked ``allocation`` once the scheduler applied ``binding``: active with it when
    still provisioning; when it stopped holding cards meanwhile, :func:`_applied_after_release`;
    left as it is when another run of the task made it active first."""
    if allocation.status == AllocationStatus.PROVISIONING:
        return allocation_transition(
            allocation,
            to=AllocationStatus.ACTIVE,
            actor=None,
            action="allocation.active",
            scheduler_binding=binding,
        )
    if allocation.status not in HOLDING_STATUSES:
        _applied_after_release(allocation, binding)
    return allocation


def _applied_after_release(allocation: Allocation, binding: dict) -> None:
    """The locked ``allocation`` stopped holding cards while the scheduler applied it: its
    unbind read no reservation in the binding (none was stored yet) and may have lowered the
    cap before the apply raised it again. Store what was applied (so the unbind, and reconcile
    after it, see the reservation) and queue the unbind once this commits."""
    Allocation.objects.filter(pk=allocation.pk).update(
        scheduler_binding=binding, updated_at=timezone.now()
    )
    allocation.scheduler_binding = binding
    enqueue_on_commit(ALLOCATION_UNBIND, allocation.pk)


def _applied_after_delete(allocation: Allocation, binding: dict) -> None:
    """``allocation`` was deleted while the scheduler applied it: take back what was applied
    now (no row is left for a task or reconcile to find its reservation by; the cap is
    worked out without it), then raise :class:`Allocation.DoesNotExist`. A scheduler error is
    logged: the cap waits for reconcile, the reservation for its end."""
    allocation.scheduler_binding = binding
    try:
        _unbind(allocation)
    except SchedulerError as exc:
        logger.warning(
            "allocation %s deleted while applied; taking it back: %s", allocation.pk, exc
        )
    raise Allocation.DoesNotExist(f"Allocation {allocation.pk} was deleted while applied.")


def _binding_apply_checked(allocation: Allocation, now: datetime) -> dict:
    """:func:`binding_apply`, with anything it raises that is no :class:`SchedulerError`
    logged and raised again as :class:`BindingCrashed`: one allocation the adapter cannot
    apply must not stop the lifecycle sweep from applying, warning and ending the others."""
    try:
        return binding_apply(allocation, now=now)
    except SchedulerError:
        raise
    except Exception as exc:
        logger.exception("applying allocation %s raised", allocation.pk)
        raise BindingCrashed(
            f"internal error ({type(exc).__name__}) applying the allocation; see the logs",
            operation="binding_apply",
        ) from exc


def _provision_waits(allocation: Allocation, exc: SchedulerError, next_try: str) -> None:
    """Say on a still-provisioning allocation why it waits and when it is tried again. Not a
    transition (no audit event): the status stays ``provisioning``."""
    who = Scheduler(allocation.pool.scheduler).label
    what = f"{who} answered {exc.http_status}" if exc.http_status else f"{who} did not answer"
    if isinstance(exc, CredentialsUnreadable):
        what = f"{who} not asked: {exc.message}"
    elif isinstance(exc, BindingCrashed):
        what = f"{who}: internal error ({type(exc.__cause__).__name__})"
    Allocation.objects.filter(pk=allocation.pk, status=AllocationStatus.PROVISIONING).update(
        status_reason=f"{what}; {next_try}", updated_at=timezone.now()
    )


def allocation_fail(*, allocation_id: int, reason: str) -> Allocation:
    """provisioning → failed, with the scheduler's message; the cards return to the pool."""
    with transaction.atomic():
        allocation = allocation_lock(allocation_id)
        if allocation.status != AllocationStatus.PROVISIONING:
            return allocation
        return allocation_transition(
            allocation,
            to=AllocationStatus.FAILED,
            actor=None,
            action="allocation.failed",
            reason=reason[:2000],
        )


def allocation_unbind(*, allocation_id: int) -> dict | None:
    """After an allocation stopped holding cards (released, ended, cancelled, reclaimed), set the
    team's scheduler cap to what its other allocations still hold and, in Slurm, remove the
    allocation's reservation; in Kubernetes, set the pool's Kueue lender to its free cards.
    Returns the new binding, or ``None`` when the pool's scheduler is not configured.

    Each step runs whatever the other answered (:func:`unbind_steps`), so a refused reservation
    removal never leaves the cap high, nor a refused quota update the lender low (nor the
    reverse); the first error is raised again once both ran. A refusal of the removal or of
    the quota update that is not transient is recorded for admins with the scheduler's message
    (:func:`reservation_refusal_record`, :func:`quota_refusal_record`); a transient one is left
    to the task's retries and reconcile.
    """
    allocation = Allocation.objects.select_related(
        "team", "pool", "pool__cluster", "gpu_model"
    ).get(pk=allocation_id)
    if allocation.status in HOLDING_STATUSES:
        return None
    return _unbind(allocation)


def _unbind(allocation: Allocation) -> dict | None:
    """The scheduler steps of :func:`allocation_unbind` for ``allocation`` as given."""
    adapter = pool_adapter(allocation.pool)
    if adapter is None:
        return None
    if allocation.pool.scheduler == Scheduler.KUBERNETES:
        binding, _lender = unbind_steps(
            allocation,
            (
                lambda: kubernetes_quota_sync(
                    adapter=adapter, team=allocation.team, cluster=allocation.pool.cluster
                ),
                quota_refusal_record,
            ),
            # its cards are free again
            (lambda: kueue_lender_sync(adapter=adapter, pool=allocation.pool), None),
        )
        return binding
    _removed, binding = unbind_steps(
        allocation,
        (
            lambda: slurm_reservation_remove(adapter=adapter, allocation=allocation),
            reservation_refusal_record,
        ),
        (
            lambda: slurm_limit_sync(
                adapter=adapter,
                team=allocation.team,
                pool=allocation.pool,
                gpu_model=allocation.gpu_model,
                mig_profile=allocation.mig_profile,
            ),
            None,
        ),
    )
    return binding


UnbindStep = tuple[Callable[[], Any], Callable[..., Any] | None]


def unbind_steps(allocation: Allocation, *steps: UnbindStep) -> list[Any]:
    """Run each ``(step, record)`` of ``allocation``'s unbind in order, whatever the steps
    before it answered, and return their results (one per step). A step's non-transient
    :class:`SchedulerError` is passed to its ``record`` (``record(allocation=, error=)``,
    e.g. :func:`reservation_refusal_record`; ``None``: nothing recorded, reconcile repairs
    it); a transient one is left to the task's retries. Once every step ran, the first error
    is raised again."""
    first: SchedulerError | None = None
    results: list[Any] = []
    for step, record in steps:
        try:
            results.append(step())
        except SchedulerError as exc:
            results.append(None)
            if record is not None and not exc.transient:
                record(allocation=allocation, error=exc)
            first = first or exc
    if first is not None:
        raise first
    return results


def allocation_release(*, allocation: Allocation, actor: Any, reason: str = "") -> Allocation:
    """End an allocation early (team managers, pool admins): its cards return to the pool now.

    A window that has not started yet ends as cancelled. Its extensions go with it: an approved
    one (an allocation of its own from this one's end, :func:`allocation_extend`) is cancelled,
    and one still waiting (draft or submitted) is cancelled too -- released cards were otherwise
    held again from the old end, and billed. Idempotent for an ended or cancelled allocation
    (releasing twice answers the first outcome); :class:`InvalidTransition` for failed or
    reclaimed ones.
    """
    require_manager(actor, allocation.team)
    with transaction.atomic():
        pool_lock(allocation.pool_id)
        allocation = allocation_lock(allocation.pk)
        if allocation.status in (AllocationStatus.ENDED, AllocationStatus.CANCELLED):
            return allocation
        if allocation.status not in HOLDING_STATUSES:
            raise InvalidTransition(
                f"An allocation that is {allocation.status} cannot be released.",
                status=allocation.status,
                action="release",
            )
        released = _release_now(allocation, actor, reason)
        _release_extensions(released, actor)
    return released


def _release_now(allocation: Allocation, actor: Any, reason: str) -> Allocation:
    """The locked, holding ``allocation`` ended now, or cancelled when its window has not
    started (its audit event says which; ``reason`` empty: "released early" / "released")."""
    now = timezone.now()
    if allocation.starts_at >= now:
        return allocation_transition(
            allocation,
            to=AllocationStatus.CANCELLED,
            actor=actor,
            action="allocation.cancelled",
            reason=reason or "released",
        )
    return allocation_transition(
        allocation,
        to=AllocationStatus.ENDED,
        actor=actor,
        action="allocation.released",
        reason=reason or "released early",
        ends_at=min(allocation.ends_at, now),
    )


def _release_extensions(allocation: Allocation, actor: Any) -> None:
    """The extensions of the just released ``allocation`` (pool locked): each approved one's
    allocation released as well, each waiting one cancelled, all audited with the reason."""
    reason = f"the allocation it extends (#{allocation.pk}) was released"
    granted = Allocation.objects.holding().filter(request__extends=allocation).order_by("pk")
    for pk in granted.values_list("pk", flat=True):
        _release_now(allocation_lock(pk), actor, reason)
    waiting = CapacityRequest.objects.filter(
        extends=allocation, status__in=(RequestStatus.DRAFT, RequestStatus.SUBMITTED)
    )
    for request in waiting:
        capacity_request_cancel(request=request, actor=actor, reason=reason)


def allocation_extend(
    *, allocation: Allocation, actor: Any, ends_at: datetime, justification: str
) -> CapacityRequest:
    """Ask for more time: a new submitted request for ``[current end, ends_at)``.

    The extra window starts where the allocation — or the last approved extension of it — ends,
    so extensions chain and never overlap (two approved extensions of one window would hold the
    same cards twice). One extension may be pending at a time. Any team member may ask. The
    extension carries the allocation's shape (:func:`extension_shape`) and, when approved, keeps
    the allocation's placed cards or is refused (the running job is on them). Raises
    :class:`InvalidInput` when ``ends_at`` is not after that end and :class:`InvalidTransition`
    when the allocation no longer holds cards or an extension is already pending.
    """
    require_member(actor, allocation.team)
    with transaction.atomic():
        # Decide on the row as it is now, locked so two clicks cannot both pass the checks.
        allocation = allocation_lock(allocation.pk)
        granted_until = _extendable_until(allocation)
        if ends_at <= granted_until:
            raise InvalidInput(
                "The new end must be after the current end.",
                errors={"ends_at": f"After {timezone.localtime(granted_until):%Y-%m-%d %H:%M %Z}."},
            )
        source = allocation.request
        return capacity_request_create(
            actor=actor,
            fields=RequestFields(
                team=allocation.team,
                workload_kind=source.workload_kind,
                card_count=allocation.card_count,
                starts_at=granted_until,
                ends_at=ends_at,
                justification=justification,
                pool=allocation.pool,
                gpu_model=allocation.gpu_model,
                cuda_version=source.cuda_version,
                extends=allocation,
                mig_profile=allocation.mig_profile,
                **extension_shape(allocation),
            ),
        )


def _extendable_until(allocation: Allocation) -> datetime:
    """The end of the time ``allocation`` (locked) holds: its own end or its last approved
    extension's, where a new extension starts. Raises :class:`InvalidTransition` when it no
    longer holds cards or an extension of it (draft or submitted) is already waiting."""
    if allocation.status not in HOLDING_STATUSES:
        raise InvalidTransition(
            f"This allocation is {allocation.status} and can no longer be extended.",
            status=allocation.status,
            action="extend",
        )
    pending = CapacityRequest.objects.filter(
        extends=allocation, status__in=(RequestStatus.DRAFT, RequestStatus.SUBMITTED)
    ).first()
    if pending is not None:
        raise InvalidTransition(
            f"An extension of this allocation is already waiting: request #{pending.pk}.",
            status=allocation.status,
            action="extend",
            pending_request=pending.pk,
        )
    return max(
        [allocation.ends_at]
        + list(
            Allocation.objects.holding()
            .filter(request__extends=allocation)
            .values_list("ends_at", flat=True)
        )
    )


def extension_shape(allocation: Allocation) -> dict[str, Any]:
    """The shape fields of an extension of ``allocation``: its request's shape (cards per
    node, NVLink domain, shared nodes) over the groups it holds now, ``card_count`` /
    ``cards_per_node`` (fewer than asked after a reclamation shrank it); none when it was
    granted unshaped or holds part of a group (then the approval keeps its placed cards
    without a shape: :func:`pools.capacity.services.requests.capacity_request_approve`)."""
    source = allocation.request
    per_node = source.cards_per_node
    if per_node is None or source.node_count is None or allocation.card_count % per_node:
        return {}
    return {
        "cards_per_node": per_node,
        "node_count": allocation.card_count // per_node,
        "one_nvlink_domain": source.one_nvlink_domain,
        "shared_nodes": source.shared_nodes,
    }


def allocation_lifecycle_sweep(
    *, now: datetime | None = None, warn_days: int | None = None
) -> dict[str, int]:
    """Move allocations along with the clock; safe to run any number of times.

    Approved allocations whose window opens within ``PROVISION_LEAD`` are provisioned; active
    ones ending within ``warn_days`` (default ``settings.ALLOCATION_EXPIRY_WARNING_DAYS``, 3)
    become ``expiring`` and the team is emailed once; those past their end become ``ended``.
    Returns ``{"provisioned": n, "expiring": m, "ended": k}``.
    """
    now = now or timezone.now()
    warn = timedelta(
        days=warn_days if warn_days is not None else settings.ALLOCATION_EXPIRY_WARNING_DAYS
    )
    ended = _end_past(now)
    provisioned = _provision_due(now)
    return {"provisioned": provisioned, "expiring": _mark_expiring(now, warn), "ended": ended}


def _end_past(now: datetime) -> int:
    """End every allocation holding cards whose window ended by ``now`` (each locked and checked
    again in its own transaction); returns how many ended."""
    ended = 0
    ending = Allocation.objects.holding().filter(ends_at__lte=now)
    for allocation_id in ending.values_list("pk", flat=True):
        with transaction.atomic():
            allocation = _lock_listed(allocation_id)
            if allocation is None:
                continue
            if allocation.status in HOLDING_STATUSES and allocation.ends_at <= now:
                allocation_transition(
                    allocation,
                    to=AllocationStatus.ENDED,
                    actor=None,
                    action="allocation.ended",
                    reason="window ended",
                )
                ended += 1
    return ended


def _lock_listed(allocation_id: int) -> Allocation | None:
    """:func:`allocation_lock` of an allocation a sweep listed; ``None`` when it was deleted
    since (the sweep goes on with the others)."""
    try:
        return allocation_lock(allocation_id)
    except Allocation.DoesNotExist:
        return None


def _provision_due(now: datetime) -> int:
    """Provision the approved / provisioning allocations whose window opens within
    ``PROVISION_LEAD`` of ``now`` and has not ended; one the scheduler fails stays provisioning
    for the next sweep. Returns how many became active."""
    provisioned = 0
    due = Allocation.objects.filter(
        status__in=(AllocationStatus.APPROVED, AllocationStatus.PROVISIONING),
        ends_at__gt=now,
        starts_at__lte=now + PROVISION_LEAD,
    )
    for allocation_id in due.values_list("pk", flat=True):
        try:
            allocation = allocation_provision(
                allocation_id=allocation_id, now=now, final_attempt=False
            )
        except SchedulerError:
            continue  # stays provisioning; the next sweep (or the task) tries again
        except Allocation.DoesNotExist:
            continue  # deleted since it was listed
        if allocation.status == AllocationStatus.ACTIVE:
            provisioned += 1
    return provisioned


def _mark_expiring(now: datetime, warn: timedelta) -> int:
    """Mark ``expiring`` the active allocations ending within ``warn`` of ``now`` (each locked
    and checked again), e-mailing the team once the transaction commits; returns how many."""
    expiring = 0
    soon = Allocation.objects.filter(
        status=AllocationStatus.ACTIVE, ends_at__gt=now, ends_at__lte=now + warn
    )
    for allocation_id in soon.values_list("pk", flat=True):
        with transaction.atomic():
            allocation = _lock_listed(allocation_id)
            if allocation is None or allocation.status != AllocationStatus.ACTIVE:
                continue
            allocation_transition(
                allocation,
                to=AllocationStatus.EXPIRING,
                actor=None,
                action="allocation.expiring",
                expiry_notified_at=now,
                reason=f"ends within {warn.days} days",
            )
            transaction.on_commit(lambda a=allocation: _email_expiry(a))
            expiring += 1
    return expiring


def _email_expiry(allocation: Allocation) -> None:
    recipients = tenancy_selectors.team_member_emails(team_id=allocation.team_id)
    if not recipients:
        return
    managers = tenancy_selectors.team_manager_count(team_id=allocation.team_id)
    send_mail(
        subject=f"[gpu-pool] {allocation.card_count}× {allocation.gpu_model.name} in "
        f"{allocation.pool.name} ends {allocation.ends_at:%Y-%m-%d %H:%M %Z}",
        message=(
            f"Allocation #{allocation.pk} of team {allocation.team.name} ends on "
            f"{allocation.ends_at:%Y-%m-%d %H:%M %Z}. After that its cards return to the pool.\n"
            f"To keep them, ask for an extension on the allocation's page"
            f"{' (a manager approves it)' if managers else ''}."
        ),
        from_email=None,
        recipient_list=recipients,
        fail_silently=True,
    )
