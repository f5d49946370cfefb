"""Recurring reservations in the schedulers (issue 32 item 2), written by the beat loop.

Slurm: an active reservation becomes one Slurm reservation ``portal-recur-<id>`` of whole nodes
of the pool × GPU model for the team's account, created over the next occurrence that has not
started with the rule's flag (``Flags=DAILY`` / ``WEEKDAY`` / ``WEEKLY``,
:data:`pools.recurring.recurrence.SLURM_REPEAT`), through ``scontrol`` as for allocations
(:mod:`scheduler_adapters.slurm.reservations`: slurmrestd cannot create reservations before
v0.0.43, i.e. on 22.05 and 24.11). slurmctld repeats it in its own wall-clock time and never
stops, so:

- a rule whose occurrences Slurm's repetition would not reproduce (a rule zone whose summer
  time differs from slurmctld's, :func:`pools.recurring.recurrence.slurm_drift`) is not written;
  the binding says from which occurrence it would drift;
- the Slurm reservation is deleted once the rule's last occurrence has ended, or when the
  reservation is cancelled, and read back gone. Until the deletion succeeds the binding is kept
  and every beat tries again; a refusal that is not transient (Slurm's permissions) is an
  unrepaired :class:`~pools.capacity.models.SchedulerDrift` with Slurm's message, recorded once
  per message (:func:`recurring_refusal_record`).

Cards that are not a sum of whole nodes (first fit over the pool's nodes of the model, by host
name) are not reserved in Slurm either; the binding says so, and the team's GrpTRES cap still
counts the occurrence (:func:`pools.capacity.services.scheduler_binding.team_cards_applied`).

Kubernetes: the team's namespace quota counts open occurrences (same function), so the beat
re-applies :func:`~pools.capacity.services.scheduler_binding.kubernetes_quota_sync` for each
team with a recurring reservation within a day of now: raised when an occurrence opens (within
the provisioning lead), lowered at the first beat after it closes. Each write is the whole
wanted state (server-side apply), so a beat run twice writes the same.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.utils import timezone

from pools.capacity.models import SchedulerDrift
from pools.capacity.node_kinds import pool_nodes
from pools.capacity.services.scheduler_binding import (
    kubernetes_quota_sync,
    reservation_drift_subject,
    slurm_limit_sync,
    unbind_refusal_record,
)
from pools.clusters.adapters import pool_adapter
from pools.common.choices import Scheduler
from pools.recurring.models import RecurringReservation, ReservationStatus
from pools.recurring.recurrence import SLURM_REPEAT, slurm_drift
from scheduler_adapters.errors import SchedulerError
from scheduler_adapters.records import ReservationSpec

# How far around today (UTC) the beat looks at reservations: a local date is at most 14 h
# from UTC's, and a reservation that ended or was cancelled yesterday still needs its quota
# lowered once.
AROUND = timedelta(days=2)


def recurring_reservation_name(reservation: RecurringReservation) -> str:
    """The Slurm reservation that holds a recurring reservation's occurrences
    (``settings.SLURM_RESERVATION_PREFIX``, default ``portal``)."""
    prefix = getattr(settings, "SLURM_RESERVATION_PREFIX", "portal")
    return f"{prefix}-recur-{reservation.pk}"


def recurring_nodes(reservation: RecurringReservation) -> tuple[str, ...] | None:
    """Whole nodes of the pool × model whose schedulable cards add up to exactly
    ``card_count`` (first fit, by host name), or ``None`` when none do."""
    nodes = pool_nodes(pool=reservation.pool, gpu_model=reservation.gpu_model, generation=None)
    per_node = sorted((host, len(kind.gpus)) for kind in nodes.kinds for host in kind.hostnames)
    wanted, chosen = reservation.card_count, []
    for host, cards in per_node:
        if 0 < cards <= wanted:
            chosen.append(host)
            wanted -= cards
    return tuple(sorted(chosen)) if wanted == 0 else None


def recurring_slurm_spec(
    reservation: RecurringReservation,
    *,
    nodes: tuple[str, ...],
    now: datetime,
    cluster_zone: str,
    name: str | None = None,
) -> ReservationSpec:
    """The Slurm reservation over the first occurrence starting after ``now``, repeating with
    the rule's flag. Raises ``ValueError`` (the reason) when no occurrence starts after
    ``now`` or Slurm's repetition in ``cluster_zone`` would move one."""
    ahead = [o for o in reservation.occurrences_from(now) if o[0] > now]
    if not ahead:
        raise ValueError("no occurrence starts after now")
    drift = slurm_drift(ahead, reservation.recurrence, cluster_zone)
    if drift is not None:
        starts_at = ahead[drift][0].astimezone(ZoneInfo(reservation.time_zone))
        raise ValueError(
            f"Slurm repeats reservations in its own zone ({cluster_zone}), which would move the "
            f"occurrence of {starts_at:%Y-%m-%d} ({reservation.time_zone}) by a change of "
            "summer time"
        )
    return ReservationSpec(
        name=name or recurring_reservation_name(reservation),
        account=reservation.team.slug,
        nodes=nodes,
        starts_at=ahead[0][0],
        ends_at=ahead[0][1],
        partition=reservation.pool.slurm_partition or None,
        repeat=SLURM_REPEAT[reservation.recurrence],
    )


def recurring_slurm_apply(
    *, adapter: Any, reservation: RecurringReservation, now: datetime
) -> dict[str, Any]:
    """Create the Slurm reservation of ``reservation`` (idempotent); returns the binding to
    keep: ``{"reservation", "nodes", "repeat", "starts_at"}``, or ``{"reservation": None,
    "note": why not}``. Raises the adapter's transient errors (the next beat retries)."""
    nodes = recurring_nodes(reservation)
    if nodes is None:
        return {
            "reservation": None,
            "note": f"Not reserved in Slurm: {reservation.card_count} cards are not whole nodes "
            f"of {reservation.gpu_model.name} in {reservation.pool.name}; the cap (GrpTRES) "
            "still counts each occurrence.",
        }
    try:
        spec = recurring_slurm_spec(
            reservation,
            nodes=nodes,
            now=now,
            cluster_zone=getattr(adapter, "reservation_time_zone", "UTC"),
        )
        adapter.create_reservation(spec)
    except (AttributeError, ValueError) as exc:
        return {"reservation": None, "note": f"Not reserved in Slurm: {exc}"}
    except SchedulerError as exc:
        if exc.transient:
            raise
        return {"reservation": None, "note": f"Not reserved in Slurm: {exc.message}"}
    return {
        "reservation": spec.name,
        "nodes": list(nodes),
        "repeat": spec.repeat,
        "starts_at": spec.starts_at.isoformat(),
    }


def _save_binding(reservation: RecurringReservation, binding: dict[str, Any]) -> None:
    RecurringReservation.objects.filter(pk=reservation.pk).update(scheduler_binding=binding)
    reservation.scheduler_binding = binding


def _slurm_pass(now: datetime, counts: dict[str, int]) -> None:
    """Create what is missing, delete what is over (module doc)."""
    today = now.astimezone(UTC).date()
    rows = RecurringReservation.objects.filter(pool__scheduler=Scheduler.SLURM).select_related(
        "team", "pool", "pool__cluster", "gpu_model"
    )
    bound = rows.filter(scheduler_binding__has_key="reservation")
    for reservation in bound.exclude(scheduler_binding__reservation=None):
        over = reservation.status != ReservationStatus.ACTIVE or not reservation.occurrences_from(
            now
        )
        adapter = pool_adapter(reservation.pool) if over else None
        if adapter is not None:
            _slurm_remove(adapter, reservation, counts)
    fresh = rows.filter(status=ReservationStatus.ACTIVE, last_date__gte=today - AROUND)
    for reservation in fresh.filter(scheduler_binding={}):
        adapter = pool_adapter(reservation.pool)
        if adapter is None or not reservation.occurrences_from(now):
            continue
        try:
            # the account and the members' associations first: Slurm names the account
            slurm_limit_sync(
                adapter=adapter,
                team=reservation.team,
                pool=reservation.pool,
                gpu_model=reservation.gpu_model,
                now=now,
            )
            binding = recurring_slurm_apply(adapter=adapter, reservation=reservation, now=now)
        except SchedulerError:
            counts["errors"] += 1
            continue
        _save_binding(reservation, binding)
        counts["reserved" if binding["reservation"] else "not_reserved"] += 1


def _slurm_remove(adapter: Any, reservation: RecurringReservation, counts: dict[str, int]) -> None:
    """Delete the Slurm reservation of ``reservation`` and unbind it; on an error keep it bound
    (the next beat deletes it) and record a refusal that is not transient."""
    try:
        adapter.delete_reservation(reservation.scheduler_binding["reservation"])
    except SchedulerError as exc:
        counts["errors"] += 1
        if not exc.transient:
            recurring_refusal_record(reservation=reservation, error=exc)
        return
    _save_binding(reservation, {})
    counts["removed"] += 1


def recurring_refusal_record(
    *, reservation: RecurringReservation, error: SchedulerError
) -> SchedulerDrift | None:
    """Record that Slurm refused to delete the Slurm reservation of ``reservation`` (cancelled,
    or past its last occurrence): an unrepaired drift naming it, with Slurm's message
    (:func:`~pools.capacity.services.scheduler_binding.unbind_refusal_record`). The beat asks
    every 5 minutes: when the newest drift of that Slurm reservation is already this refusal
    (unrepaired, same message) nothing new is recorded and ``None`` is returned."""
    name = reservation.scheduler_binding["reservation"]
    subject = reservation_drift_subject(name, reservation.pool.cluster)[:200]
    newest = (
        SchedulerDrift.objects.filter(subject=subject, team_id=reservation.team_id)
        .order_by("-detected_at", "-id")
        .first()
    )
    if newest is not None and not newest.repaired and newest.detail == str(error):
        return None
    why = "cancelled" if reservation.status != ReservationStatus.ACTIVE else "over"
    return unbind_refusal_record(
        allocation=reservation,
        subject=subject,
        expected=f"none: recurring reservation #{reservation.pk} is {why}",
        found="kept: Slurm refused its removal",
        error=error,
    )


def _around(now: datetime, scheduler: str):
    today = now.astimezone(UTC).date()
    return (
        RecurringReservation.objects.filter(
            pool__scheduler=scheduler, first_date__lte=today + AROUND, last_date__gte=today - AROUND
        )
        .select_related("team", "pool", "pool__cluster", "gpu_model")
        .order_by("team_id", "pool_id", "gpu_model_id")
    )


def _caps_pass(now: datetime, counts: dict[str, int]) -> None:
    """Quota (Kubernetes) and GrpTRES (Slurm) of each team with a reservation around now."""
    done: set[tuple] = set()
    for reservation in _around(now, Scheduler.KUBERNETES):
        key = (reservation.team_id, reservation.pool.cluster_id)
        adapter = pool_adapter(reservation.pool)
        if key in done or adapter is None:
            continue
        done.add(key)
        try:
            kubernetes_quota_sync(
                adapter=adapter, team=reservation.team, cluster=reservation.pool.cluster, now=now
            )
        except SchedulerError:
            counts["errors"] += 1  # the next beat writes the same again
            continue
        counts["quotas"] += 1
    for reservation in _around(now, Scheduler.SLURM):
        key = (reservation.team_id, reservation.pool.cluster_id, reservation.gpu_model_id)
        adapter = pool_adapter(reservation.pool)
        if key in done or adapter is None:
            continue
        done.add(key)
        try:
            slurm_limit_sync(
                adapter=adapter,
                team=reservation.team,
                pool=reservation.pool,
                gpu_model=reservation.gpu_model,
                now=now,
            )
        except SchedulerError:
            counts["errors"] += 1
            continue
        counts["caps"] += 1


def recurring_sync(*, now: datetime | None = None) -> dict[str, int]:
    """Beat: bring the schedulers in line with the recurring reservations at ``now`` (default:
    the clock); counts of what was written. Safe to run any number of times."""
    now = now or timezone.now()
    counts = {"reserved": 0, "not_reserved": 0, "removed": 0, "quotas": 0, "caps": 0, "errors": 0}
    _slurm_pass(now, counts)
    _caps_pass(now, counts)
    return counts
