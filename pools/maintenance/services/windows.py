"""Maintenance windows and upgrade waves (issue 32 item 2): planned and cancelled by pool
admins, each in one transaction with its audit event, under the locks of every pool whose
nodes they take (in pool id order, :mod:`pools.capacity.locks`), so an approval cannot slip
into the window between the collision check and the save.

A window that would collide with approved allocations
(:func:`pools.maintenance.selectors.maintenance_collisions`) is saved only when the admin has
seen them: ``acknowledged`` must name every colliding allocation id, of whole cards or of MIG
slices; otherwise :class:`MaintenanceCollides` (409) carries the list and what each team
loses. Nothing is taken back from those allocations: they keep their status; the window's
cards count as away from then on, so nothing new is approved into it. Slurm follows after commit
(:mod:`pools.maintenance.services.binding`); Kubernetes is not told (no cordon).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from pools.audit.services import audit_event_record, audit_snapshot
from pools.capacity.locks import pool_lock
from pools.common.errors import Conflict, InvalidInput, InvalidTransition
from pools.inventory.models import DriverGroup, Node, Pool
from pools.jobs import MAINTENANCE_SYNC, enqueue_on_commit
from pools.maintenance.models import (
    TITLE_MAX_LENGTH,
    MaintenanceScope,
    MaintenanceStatus,
    MaintenanceWindow,
)
from pools.maintenance.selectors import (
    WaveAsk,
    maintenance_collisions,
    maintenance_wave_plan,
    scope_nodes,
    team_losses,
)
from pools.maintenance.waves import WavePlan
from pools.tenancy.permissions import require_pool_admin

MAX_WINDOW = timedelta(days=31)  # a longer outage is a change of inventory, not a window
MAX_WAVES = 52

SNAPSHOT_FIELDS = ("title", "scope", "starts_at", "ends_at", "reason", "status", "wave",
                   "wave_number")  # fmt: skip


class MaintenanceCollides(Conflict):
    """The window takes cards or MIG slices from approved allocations not acknowledged (data:
    ``collisions``, ``teams``: cards and slices lost per team,
    :func:`pools.maintenance.selectors.team_losses`)."""

    code = "maintenance_collisions"


class NoWavePlan(Conflict):
    """No wave plan keeps every approved allocation's cards (data: ``reason``,
    ``unplanned`` host names, ``waves`` the partial plan)."""

    code = "no_wave_plan"


def window_snapshot(window: MaintenanceWindow) -> dict[str, Any]:
    snapshot = audit_snapshot(
        window, *SNAPSHOT_FIELDS, pool="pool.slug", driver_group="driver_group.branch"
    )
    snapshot["nodes"] = sorted(window.nodes.values_list("hostname", flat=True))
    return snapshot


def _window_errors(title: str, starts_at: datetime, ends_at: datetime, now: datetime) -> dict:
    errors: dict[str, str] = {}
    if not title.strip() or len(title) > TITLE_MAX_LENGTH or "\n" in title:
        errors["title"] = f"One line of 1 to {TITLE_MAX_LENGTH} characters."
    if starts_at.tzinfo is None or ends_at.tzinfo is None:
        errors["starts_at"] = "A date and time with its offset."
    elif ends_at <= starts_at:
        errors["ends_at"] = "After the start."
    elif ends_at - starts_at > MAX_WINDOW:
        errors["ends_at"] = f"At most {MAX_WINDOW.days} days after the start."
    elif ends_at <= now:
        errors["ends_at"] = "In the future: a window that has ended takes nothing away."
    return errors


def _lock_pools(nodes: Sequence[Node]) -> None:
    for pool_id in sorted({n.pool_id for n in nodes if n.pool_id is not None}):
        pool_lock(pool_id)


def _collisions_acknowledged(
    nodes: Sequence[Node], start: datetime, end: datetime, acknowledged: Collection[int]
) -> list:
    """The approved allocations ``[start, end)`` on ``nodes`` takes cards or MIG slices from
    (:func:`pools.maintenance.selectors.maintenance_collisions`), once ``acknowledged`` names
    each; else :class:`MaintenanceCollides` with them and what each team loses."""
    collisions = maintenance_collisions(nodes=nodes, start=start, end=end)
    unseen = [c for c in collisions if c.allocation_id not in set(acknowledged)]
    if unseen:
        raise MaintenanceCollides(
            f"The window takes cards or MIG slices from {len(collisions)} approved "
            "allocation(s); "
            "confirm with their ids in acknowledged.",
            collisions=[c.as_dict() for c in collisions],
            teams=team_losses(collisions),
        )
    return collisions


def _window_nodes_record(
    window: MaintenanceWindow, nodes: Sequence[Node], collisions: list, *, actor: Any
) -> None:
    """A new window's nodes set, its audit record (with the collisions acknowledged), and the
    Slurm MAINT reservation queued for after commit."""
    window.nodes.set(nodes)
    audit_event_record(
        actor=actor,
        action="maintenance_window.created",
        obj=window,
        after=window_snapshot(window) | {"collisions": [c.as_dict() for c in collisions]},
        reason=window.reason,
    )
    enqueue_on_commit(MAINTENANCE_SYNC)  # the Slurm MAINT reservation


def maintenance_window_create(
    *,
    actor: Any,
    title: str,
    scope: str,
    starts_at: datetime,
    ends_at: datetime,
    pool: Pool | None = None,
    driver_group: DriverGroup | None = None,
    hostnames: Sequence[str] = (),
    reason: str = "",
    acknowledged: Collection[int] = (),
    wave: str = "",
    wave_number: int | None = None,
    now: datetime | None = None,
) -> MaintenanceWindow:
    """Take the scope's nodes (:func:`pools.maintenance.selectors.scope_nodes`) out for
    ``[starts_at, ends_at)`` (aware). Raises :class:`PermissionDenied` (not a pool admin),
    :class:`InvalidInput` (``errors`` by field) or :class:`MaintenanceCollides` (module doc);
    nothing is written then."""
    require_pool_admin(actor, "Only pool admins may plan maintenance.")
    errors = _window_errors(title, starts_at, ends_at, now or timezone.now())
    nodes, scope_errors = scope_nodes(
        scope=scope, pool=pool, driver_group=driver_group, hostnames=hostnames
    )
    errors.update(scope_errors)
    if errors:
        raise InvalidInput("The maintenance window has invalid fields.", errors=errors)
    with transaction.atomic():
        _lock_pools(nodes)
        collisions = _collisions_acknowledged(nodes, starts_at, ends_at, acknowledged)
        window = MaintenanceWindow.objects.create(
            title=title.strip(), scope=scope, pool=pool,
            driver_group=driver_group if scope == MaintenanceScope.DRIVER_GROUP else None,
            starts_at=starts_at, ends_at=ends_at, reason=reason, wave=wave,
            wave_number=wave_number,
            created_by=actor if getattr(actor, "is_authenticated", False) else None,
        )  # fmt: skip
        _window_nodes_record(window, nodes, collisions, actor=actor)
    return window


def maintenance_window_cancel(
    *, window: MaintenanceWindow, actor: Any, reason: str = ""
) -> MaintenanceWindow:
    """Cancel a planned window: its cards are back from now on and the Slurm reservation is
    deleted after commit. Raises :class:`PermissionDenied` or :class:`InvalidTransition`
    (already cancelled); nothing is written then."""
    require_pool_admin(actor, "Only pool admins may cancel maintenance.")
    with transaction.atomic():
        _lock_pools(list(window.nodes.all()))
        locked = MaintenanceWindow.objects.select_for_update().get(pk=window.pk)
        if locked.status != MaintenanceStatus.PLANNED:
            raise InvalidTransition(
                f"A window that is {locked.status} cannot be cancelled.",
                status=locked.status,
                action="cancel",
            )
        before = window_snapshot(locked)
        locked.status = MaintenanceStatus.CANCELLED
        locked.save(update_fields=["status"])
        audit_event_record(
            actor=actor,
            action="maintenance_window.cancelled",
            obj=locked,
            before=before,
            after=window_snapshot(locked),
            reason=reason,
        )
        enqueue_on_commit(MAINTENANCE_SYNC)
    return locked


def wave_ask_errors(ask: WaveAsk) -> dict[str, str]:
    errors: dict[str, str] = {}
    if ask.first_start.tzinfo is None:
        errors["first_start"] = "A date and time with its offset."
    if not timedelta(0) < ask.length <= MAX_WINDOW:
        errors["window_hours"] = f"More than 0 and at most {MAX_WINDOW.days * 24} hours."
    if ask.gap < timedelta(0):
        errors["gap_hours"] = "0 or more hours."
    if ask.per_wave < 1:
        errors["nodes_per_wave"] = "At least 1 node."
    if not 1 <= ask.max_slots <= MAX_WAVES:
        errors["max_waves"] = f"From 1 to {MAX_WAVES}."
    return errors


def _wave_windows(
    actor: Any, ask: WaveAsk, plan: WavePlan, *, title: str, reason: str, now: datetime
) -> list[MaintenanceWindow]:
    """Save one node window per wave of the complete ``plan`` for ``ask``'s pool, titled
    ``"<title> · wave N of M"`` (cut to the title's length) and sharing a new 12-hex wave id;
    returns them in wave order (:func:`maintenance_window_create` raises as it does)."""
    wave_id = uuid.uuid4().hex[:12]
    return [
        maintenance_window_create(
            actor=actor,
            title=f"{title.strip()} · wave {w.number} of {len(plan.waves)}"[:TITLE_MAX_LENGTH],
            scope=MaintenanceScope.NODES,
            pool=ask.pool,
            hostnames=w.hostnames,
            starts_at=w.starts_at,
            ends_at=w.ends_at,
            reason=reason,
            wave=wave_id,
            wave_number=w.number,
            now=now,
        )
        for w in plan.waves
    ]


def maintenance_waves_create(
    *, actor: Any, ask: WaveAsk, title: str, reason: str = "", now: datetime | None = None
) -> list[MaintenanceWindow]:
    """Plan the driver group's upgrade as waves (:mod:`pools.maintenance.waves`)
    and save one window per wave, titled ``"<title> · wave N of M"``, sharing a wave id, under
    the locks of the group's pools (the plan is made again there). Raises
    :class:`PermissionDenied`, :class:`InvalidInput` or :class:`NoWavePlan` (reason, the nodes
    no slot could take); nothing is written then."""
    require_pool_admin(actor, "Only pool admins may plan maintenance.")
    now = now or timezone.now()
    errors = wave_ask_errors(ask)
    if not errors and ask.first_start + ask.length <= now:
        errors["first_start"] = "The first wave must end in the future."
    if errors:
        raise InvalidInput("The wave plan has invalid fields.", errors=errors)
    with transaction.atomic():
        _, nodes = maintenance_wave_plan(ask)
        if not nodes:
            raise InvalidInput(
                "No node to upgrade.", errors={"driver_group": f"{ask.driver_group} has no nodes."}
            )
        _lock_pools(nodes)
        plan, nodes = maintenance_wave_plan(ask)  # again, under the locks
        if not plan.complete:
            raise NoWavePlan(
                plan.reason or "No wave plan.",
                reason=plan.reason,
                unplanned=list(plan.unplanned),
                waves=[w.hostnames for w in plan.waves],
            )
        return _wave_windows(actor, ask, plan, title=title, reason=reason, now=now)
