"""Changing the workload class of a live allocation (issue 36): refused when the new class may
not use the allocation's GPU model (400) or when it would put two classes on one card (409,
listing the allocations it would share cards with)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from pools.audit.services import audit_event_record
from pools.capacity.class_room import class_room_need
from pools.capacity.lifecycle import HOLDING_STATUSES
from pools.capacity.locks import allocation_lock, pool_lock
from pools.capacity.models import Allocation
from pools.capacity.services.requests import request_class_errors
from pools.capacity.window import holding_allocations
from pools.classes.models import WorkloadClass
from pools.common.errors import Conflict, InvalidInput, InvalidTransition
from pools.tenancy.permissions import require_pool_admin


class ClassConflict(Conflict):
    """A class change would share cards between classes (data: ``conflicts``, ``needed``,
    ``schedulable``)."""

    code = "class_conflict"


def allocation_class_change(
    *, allocation: Allocation, actor: Any, workload_class: WorkloadClass | None, reason: str = ""
) -> Allocation:
    """Set a holding allocation's class (pool admins), audited as ``allocation.class_changed``.

    Raises :class:`PermissionDenied`; :class:`InvalidTransition` for an allocation that holds
    no cards; :class:`InvalidInput` when the class may not use its GPU model; and
    :class:`ClassConflict` (409) when, from now to its end, its cards under the new class and
    every other class on cards of their own would need more cards than the pool has
    (:func:`pools.capacity.class_room.class_room_need`), with ``conflicts``: the overlapping
    holding allocations of other classes. Nothing is written then. Setting the same class
    again changes nothing."""
    require_pool_admin(actor, "Only pool admins may change an allocation's class.")
    if workload_class is not None:
        errors = request_class_errors(workload_class=workload_class, gpu_model=allocation.gpu_model)
        if errors:
            raise InvalidInput(errors["gpu_model"], errors=errors)
    with transaction.atomic():
        pool_lock(allocation.pool_id)
        allocation = allocation_lock(allocation.pk)
        if allocation.status not in HOLDING_STATUSES:
            raise InvalidTransition(
                f"An allocation that is {allocation.status} holds no cards to class.",
                status=allocation.status,
                action="change_class",
            )
        if allocation.workload_class_id == (workload_class.pk if workload_class else None):
            return allocation
        _check_room(allocation, workload_class)
        before = {"workload_class": _slug(allocation.workload_class)}
        allocation.workload_class = workload_class
        allocation.save(update_fields=["workload_class", "updated_at"])
        audit_event_record(
            actor=actor, action="allocation.class_changed", obj=allocation, before=before,
            after={"workload_class": _slug(workload_class)}, reason=reason,
        )  # fmt: skip
    return allocation


def _slug(workload_class: WorkloadClass | None) -> str | None:
    return workload_class.slug if workload_class is not None else None


def _check_room(allocation: Allocation, workload_class: WorkloadClass | None) -> None:
    """:class:`ClassConflict` when the allocation's remaining window has no room for it under
    ``workload_class`` (nothing to check on a pool without over-commit: whole cards each)."""
    pool = allocation.pool
    if pool.overcommit_ratio <= 1:
        return
    start = max(allocation.starts_at, timezone.now())
    needed, schedulable = class_room_need(
        pool=pool, gpu_model=allocation.gpu_model, start=start, end=allocation.ends_at,
        cards=allocation.card_count, workload_class=workload_class, exclude=allocation.pk,
    )  # fmt: skip
    if needed <= schedulable:
        return
    group = workload_class.pk if workload_class is not None else None
    others = holding_allocations(
        pool=pool, gpu_model=allocation.gpu_model, start=start, end=allocation.ends_at,
        exclude_allocation=allocation.pk,
    ).select_related("team", "workload_class").order_by("starts_at", "id")  # fmt: skip
    exclusive = workload_class is not None and workload_class.exclusive
    conflicts = [
        {"allocation": a.pk, "team": a.team.slug, "workload_class": _slug(a.workload_class),
         "card_count": a.card_count, "starts_at": a.starts_at.isoformat(),
         "ends_at": a.ends_at.isoformat()}
        for a in others
        if exclusive or a.workload_class_id != group
    ]  # fmt: skip
    raise ClassConflict(
        f"Allocation #{allocation.pk} as {_slug(workload_class) or 'unclassed'} would share "
        f"cards with {len(conflicts)} allocation(s) of other classes: {needed} "
        f"{allocation.gpu_model.name} cards needed, {schedulable} in {pool.name}.",
        conflicts=conflicts,
        needed=needed,
        schedulable=schedulable,
    )
