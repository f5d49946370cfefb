"""Temporary overrides (issue 32 item 2, kueue #8654): a pool admin raises a team's ceiling,
Kueue borrowing limit or priority in one pool until a date, each change in one transaction
with its audit event; the schedulers follow after commit and again at expiry.

While an override is in force the functions that compute what the schedulers hold read it
(:mod:`pools.overrides.selectors`), so binding, beat and reconcile agree. At ``until`` it stops
counting at once; the beat (:func:`override_expire_due`) marks it expired (audited) and puts
the scheduler objects back by writing the team's figures again — the whole wanted state, so
a second run writes the same and a failed write is retried at the next beat.

Refused with field errors, nothing written: ``until`` not in the future (or more than
:data:`MAX_DAYS` ahead), a figure not raised (at or below what the team has now), more cards
than the pool's usable cards of the model, a team that holds nothing in the pool, a borrowing
limit outside a Kueue pool with a cohort, a priority for a team with no classed work there, a
second override of the same figure while one is active.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from pools.audit.services import audit_event_record, audit_snapshot
from pools.capacity.arithmetic import usable_cards
from pools.capacity.lifecycle import APPLIED_STATUSES
from pools.capacity.locks import pool_lock
from pools.capacity.models import Allocation
from pools.capacity.node_kinds import pool_nodes
from pools.capacity.services.class_qos import slurm_qos_sync, team_classes_held
from pools.capacity.services.scheduler_binding import (
    cluster_pools,
    k8s_product_label,
    kubernetes_quota_sync,
    kueue_borrowing,
    kueue_lender_sync,
    slurm_account_ensure,
    slurm_limit_sync,
    team_cards_applied,
)
from pools.classes.models import WorkloadClass
from pools.clusters.adapters import pool_adapter
from pools.common.choices import QuotaBackend, Scheduler
from pools.common.errors import InvalidInput, InvalidTransition
from pools.inventory.models import GpuModel, Pool
from pools.jobs import OVERRIDE_SYNC, enqueue_on_commit
from pools.overrides.models import (
    OVERRIDE_REASON_MAX_LENGTH,
    OverrideKind,
    OverrideStatus,
    TemporaryOverride,
)
from pools.recurring.models import RecurringReservation, ReservationStatus
from pools.tenancy.models import Team
from pools.tenancy.permissions import require_pool_admin
from scheduler_adapters.errors import SchedulerError

MAX_DAYS = 366  # an override is temporary: at most a year

SNAPSHOT_FIELDS = ("kind", "cards", "cards_before", "reason", "until", "status", "ended_at")


def override_snapshot(override: TemporaryOverride) -> dict[str, Any]:
    """The audit event's view of an override."""
    return audit_snapshot(
        override,
        *SNAPSHOT_FIELDS,
        team="team.slug",
        pool="pool.slug",
        gpu_model="gpu_model.slug",
        workload_class="workload_class.slug",
        class_before="class_before.slug",
    )


def _team_in_pool(team: Team, pool: Pool, now: datetime) -> bool:
    """Whether ``team`` holds or will hold cards in ``pool``: an applied allocation not yet
    ended, or an active recurring reservation with a date from today on."""
    return (
        Allocation.objects.filter(
            team=team, pool=pool, status__in=APPLIED_STATUSES, ends_at__gt=now
        ).exists()
        or RecurringReservation.objects.filter(
            team=team, pool=pool, status=ReservationStatus.ACTIVE, last_date__gte=now.date()
        ).exists()
    )


def override_current(
    *, team: Team, pool: Pool, kind: str, gpu_model: GpuModel | None, now: datetime
) -> int | WorkloadClass | None:
    """The figure ``kind`` of ``team`` in ``pool`` at ``now``, overrides in force included: the
    cap (cards), the Kueue borrowing limit of the model's product (cards), or the default
    workload class (``None``: no classed work there)."""
    pools = cluster_pools(scheduler=pool.scheduler, cluster=pool.cluster)
    if kind == OverrideKind.PRIORITY:
        held = team_classes_held(team=team, pools=pools, now=now)
        return held[0] if held else None
    assert gpu_model is not None
    if kind == OverrideKind.BORROWING_LIMIT:
        _cohort, _normal, wanted = kueue_borrowing(team=team, cluster=pool.cluster, now=now)
        return wanted.get(k8s_product_label(gpu_model), 0)
    return team_cards_applied(
        team=team, gpu_model=gpu_model, scheduler=pool.scheduler, cluster=pool.cluster, now=now
    )


def _common_errors(
    *, team: Team, pool: Pool, kind: str, until: datetime, reason: str, now: datetime
) -> dict[str, str]:
    errors: dict[str, str] = {}
    if kind not in OverrideKind.values:
        errors["kind"] = f"One of {', '.join(OverrideKind.values)}."
    if timezone.is_naive(until) or until <= now:
        errors["until"] = "A date and time in the future."
    elif until - now > timedelta(days=MAX_DAYS):
        errors["until"] = f"At most {MAX_DAYS} days ahead: an override is temporary."
    if not reason.strip() or len(reason) > OVERRIDE_REASON_MAX_LENGTH or "\n" in reason:
        errors["reason"] = f"Why, in one line of 1 to {OVERRIDE_REASON_MAX_LENGTH} characters."
    if not _team_in_pool(team, pool, now):
        errors["pool"] = (
            f"{team.name} holds no cards in {pool.name}: an override raises what a team has "
            "in a pool."
        )
    return errors


def _cards_errors(
    *, team: Team, pool: Pool, kind: str, gpu_model: GpuModel | None, cards: Any, now: datetime
) -> tuple[dict[str, str], int | None]:
    """Field errors of a ceiling or borrowing override, and the figure now (its "from")."""
    if gpu_model is None:
        return {"gpu_model": "The GPU model whose cards are raised."}, None
    if isinstance(cards, bool) or not isinstance(cards, int) or cards < 1:
        return {"cards": "A whole number of cards, at least 1."}, None
    if kind == OverrideKind.BORROWING_LIMIT and (
        pool.scheduler != Scheduler.KUBERNETES
        or pool.quota_backend != QuotaBackend.KUEUE
        or not pool.quota_cohort
    ):
        return {
            "pool": "A borrowing limit is Kueue's: the pool must be a Kueue pool with a cohort."
        }, None
    nodes = pool_nodes(pool=pool, gpu_model=gpu_model, generation=None)
    usable = usable_cards(nodes.schedulable(None), pool.overcommit_ratio)
    if usable == 0:
        return {"gpu_model": f"{pool.name} has no usable {gpu_model.name} cards."}, None
    if cards > usable:
        return {"cards": f"At most the pool's {usable} usable {gpu_model.name} cards."}, None
    before = override_current(team=team, pool=pool, kind=kind, gpu_model=gpu_model, now=now)
    assert isinstance(before, int)
    if cards <= before:
        figure = "borrowing limit" if kind == OverrideKind.BORROWING_LIMIT else "cap"
        return {
            "cards": f"An override raises: the team's {figure} is {before} {gpu_model.name} "
            f"cards now; give more than {before}."
        }, before
    return {}, before


def _priority_errors(
    *, team: Team, pool: Pool, workload_class: WorkloadClass | None, now: datetime
) -> tuple[dict[str, str], WorkloadClass | None]:
    """Field errors of a priority override, and the default class now (its "from")."""
    if workload_class is None:
        return {"workload_class": "The workload class the team's priority is raised to."}, None
    before = override_current(
        team=team, pool=pool, kind=OverrideKind.PRIORITY, gpu_model=None, now=now
    )
    if before is None:
        return {
            "workload_class": f"{team.name} holds no classed allocation in {pool.name}'s "
            "cluster: there is no class to raise."
        }, None
    assert isinstance(before, WorkloadClass)
    if workload_class.priority <= before.priority:
        return {
            "workload_class": f"An override raises: the team's work runs as {before.name} "
            f"(priority {before.priority}) now; choose a class of higher priority."
        }, before
    return {}, before


def _kind_checked(
    *,
    errors: dict[str, str],
    team: Team,
    pool: Pool,
    kind: str,
    gpu_model: GpuModel | None,
    cards: int | None,
    workload_class: WorkloadClass | None,
    now: datetime,
) -> tuple[int | None, WorkloadClass | None]:
    """The figure the override raises from, ``(cards_before, class_before)``, once the kind's
    fields pass (the pool's row locked): a priority names a class and no GPU model or cards; a
    ceiling or borrowing limit names cards of a GPU model and no class. Raises
    :class:`InvalidInput` with those fields' errors and ``errors`` (the common fields')."""
    errors = dict(errors)
    cards_before = class_before = None
    if kind == OverrideKind.PRIORITY:
        if gpu_model is not None or cards is not None:
            errors["gpu_model"] = "A priority is the team's, not a GPU model's: leave empty."
        more, class_before = _priority_errors(
            team=team, pool=pool, workload_class=workload_class, now=now
        )
    else:
        if workload_class is not None:
            errors["workload_class"] = "Only for a priority override: leave empty."
        more, cards_before = _cards_errors(
            team=team, pool=pool, kind=kind, gpu_model=gpu_model, cards=cards, now=now
        )
    errors = {**more, **errors}
    if errors:
        raise InvalidInput("The override has invalid fields.", errors=errors)
    return cards_before, class_before


def _override_insert(**fields: Any) -> TemporaryOverride:
    """Insert the override with the fields of its kind only (a priority's class, or a ceiling's
    or borrowing limit's GPU model and cards); a second active one of the same team, pool,
    kind and GPU model (the database's unique constraint) is a field error on ``kind`` naming
    until when the first one holds."""
    if fields["kind"] == OverrideKind.PRIORITY:
        fields.update(gpu_model=None, cards=None)
    else:
        fields.update(workload_class=None)
    try:
        with transaction.atomic():
            return TemporaryOverride.objects.create(**fields)
    except IntegrityError as exc:
        active = TemporaryOverride.objects.filter(
            team=fields["team"],
            pool=fields["pool"],
            kind=fields["kind"],
            gpu_model=fields["gpu_model"],
            status=OverrideStatus.ACTIVE,
        ).first()
        until_text = f" until {active.until:%Y-%m-%d %H:%M} UTC" if active else ""
        raise InvalidInput(
            "The override has invalid fields.",
            errors={"kind": f"Already raised{until_text}: cancel that override first."},
        ) from exc


def override_create(
    *,
    actor: Any,
    team: Team,
    pool: Pool,
    kind: str,
    until: datetime,
    reason: str,
    gpu_model: GpuModel | None = None,
    cards: int | None = None,
    workload_class: WorkloadClass | None = None,
    now: datetime | None = None,
) -> TemporaryOverride:
    """Raise ``kind`` of ``team`` in ``pool`` from now to ``until``: a ceiling or borrowing
    limit to ``cards`` of ``gpu_model``, a priority to ``workload_class``. Raises
    :class:`PermissionDenied` (not a pool admin) or :class:`InvalidInput` (``errors`` by field,
    see the module doc); nothing is written then. The schedulers follow after commit.

    Steps: the common fields (:func:`_common_errors`), the pool locked, the kind's fields
    (:func:`_kind_checked`), the row (:func:`_override_insert`), the audit record."""
    require_pool_admin(actor, "Only pool admins may override a team's limits.")
    now = now or timezone.now()
    errors = _common_errors(team=team, pool=pool, kind=kind, until=until, reason=reason, now=now)
    if errors.get("kind"):
        raise InvalidInput("The override has invalid fields.", errors=errors)
    with transaction.atomic():
        pool = pool_lock(pool.pk)
        cards_before, class_before = _kind_checked(
            errors=errors, team=team, pool=pool, kind=kind, gpu_model=gpu_model, cards=cards,
            workload_class=workload_class, now=now,
        )  # fmt: skip
        override = _override_insert(
            team=team, pool=pool, kind=kind, gpu_model=gpu_model, cards=cards,
            cards_before=cards_before, workload_class=workload_class, class_before=class_before,
            reason=reason.strip(), until=until, created_at=now,
            created_by=actor if getattr(actor, "is_authenticated", False) else None,
        )  # fmt: skip
        audit_event_record(
            actor=actor,
            action="override.created",
            obj=override,
            after=override_snapshot(override),
            reason=override.reason,
        )
        enqueue_on_commit(OVERRIDE_SYNC, override.pk)
    return override


def override_cancel(
    *, override: TemporaryOverride, actor: Any, reason: str = "", now: datetime | None = None
) -> TemporaryOverride:
    """End an active override now; the schedulers are put back after commit. Raises
    :class:`PermissionDenied` (not a pool admin) or :class:`InvalidTransition` (not active);
    nothing is written then."""
    require_pool_admin(actor, "Only pool admins may cancel overrides.")
    now = now or timezone.now()
    with transaction.atomic():
        locked = TemporaryOverride.objects.select_for_update().get(pk=override.pk)
        if locked.status != OverrideStatus.ACTIVE or locked.until <= now:
            raise InvalidTransition(
                f"An override that has {'expired' if locked.until <= now else locked.status} "
                "cannot be cancelled.",
                status=locked.status,
                action="cancel",
            )
        before = override_snapshot(locked)
        locked.status, locked.ended_at = OverrideStatus.CANCELLED, now
        locked.save(update_fields=["status", "ended_at"])
        audit_event_record(
            actor=actor,
            action="override.cancelled",
            obj=locked,
            before=before,
            after=override_snapshot(locked),
            reason=reason,
        )
        enqueue_on_commit(OVERRIDE_SYNC, locked.pk)
    return locked


def override_apply(*, override_id: int, now: datetime | None = None) -> dict[str, Any] | None:
    """Write the team's figures the override touches in its pool's scheduler (the whole wanted
    state: raised while it is in force, normal after) and keep what was written; once it has
    ended, stamp ``restored_at``. ``None`` when the override is gone. Raises the adapter's
    :class:`SchedulerError` (nothing stamped: the beat retries)."""
    now = now or timezone.now()
    override = (
        TemporaryOverride.objects.select_related("team", "pool", "pool__cluster", "gpu_model")
        .filter(pk=override_id)
        .first()
    )
    if override is None:
        return None
    pool, team = override.pool, override.team
    adapter = pool_adapter(pool)
    if adapter is None:
        binding: dict[str, Any] = {
            "applied": False,
            "note": f"Not applied in {pool.get_scheduler_display()}: no scheduler connection "
            "is configured for this pool (demo mode).",
        }
    elif pool.scheduler == Scheduler.KUBERNETES:
        binding = kubernetes_quota_sync(adapter=adapter, team=team, cluster=pool.cluster, now=now)
        lender = kueue_lender_sync(adapter=adapter, pool=pool, now=now)  # what is borrowed from
        if lender is not None:
            binding["kueue_lender"] = lender
    elif override.kind == OverrideKind.PRIORITY:
        pools = cluster_pools(scheduler=Scheduler.SLURM, cluster=pool.cluster)
        account = slurm_account_ensure(adapter=adapter, team=team)
        qos = slurm_qos_sync(adapter=adapter, team=team, account=account, pools=pools, now=now)
        binding = {"scheduler": "slurm", "applied": True, "account": account, **(qos or {})}
    else:
        binding = slurm_limit_sync(
            adapter=adapter, team=team, pool=pool, gpu_model=override.gpu_model, now=now
        )
    in_force = override.status == OverrideStatus.ACTIVE and override.until > now
    fields = {"scheduler_binding": binding}
    if not in_force:
        fields["restored_at"] = now
    TemporaryOverride.objects.filter(pk=override.pk).update(**fields)
    return binding


def _expire(override_id: int, now: datetime) -> bool:
    """Mark one due override expired with its audit event; ``False`` when another run (or a
    cancel) got there first."""
    with transaction.atomic():
        locked = (
            TemporaryOverride.objects.select_for_update()
            .filter(pk=override_id, status=OverrideStatus.ACTIVE, until__lte=now)
            .first()
        )
        if locked is None:
            return False
        before = override_snapshot(locked)
        locked.status, locked.ended_at = OverrideStatus.EXPIRED, locked.until
        locked.save(update_fields=["status", "ended_at"])
        audit_event_record(
            actor=None,
            action="override.expired",
            obj=locked,
            before=before,
            after=override_snapshot(locked),
            reason=f"until {locked.until.isoformat()} passed",
        )
    return True


def override_expire_due(*, now: datetime | None = None) -> dict[str, int]:
    """Beat: mark overrides whose ``until`` has passed expired (audited) and put the scheduler
    objects of every ended override not yet restored back; counts. Safe to run any number of
    times: an expired override is not expired twice, a restored one not written again."""
    now = now or timezone.now()
    counts = {"expired": 0, "restored": 0, "errors": 0}
    due = TemporaryOverride.objects.filter(status=OverrideStatus.ACTIVE, until__lte=now)
    for override_id in due.values_list("pk", flat=True):
        counts["expired"] += _expire(override_id, now)
    ended = TemporaryOverride.objects.exclude(status=OverrideStatus.ACTIVE).filter(
        restored_at__isnull=True
    )
    for override_id in ended.order_by("pk").values_list("pk", flat=True):
        try:
            override_apply(override_id=override_id, now=now)
        except SchedulerError as exc:
            counts["errors"] += 1
            TemporaryOverride.objects.filter(pk=override_id).update(
                scheduler_binding={"error": str(exc)[:500]}
            )
            continue
        counts["restored"] += 1
    return counts
