"""Recurring reservations (issue 32 item 2): made and cancelled by pool admins, each in one
transaction with its audit event.

A reservation is refused unless every occurrence after now leaves the card invariant whole: at
each instant of each occurrence, the cards held by holding allocations and by the occurrences
of the other active reservations of the pool × GPU model, plus the reservation's own, stay
within the usable cards, ``floor(schedulable × over-commit ratio)``
(:func:`pools.capacity.arithmetic.usable_cards`, the approval's count). The refusal names the
first occurrence where they would not, by its local date.
"""

from __future__ import annotations

from datetime import date, datetime, time
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.db import transaction
from django.utils import timezone

from pools.audit.services import audit_event_record, audit_snapshot
from pools.capacity.arithmetic import usable_cards
from pools.capacity.availability import holding_intervals
from pools.capacity.locks import pool_lock
from pools.capacity.node_kinds import pool_nodes
from pools.common.errors import InsufficientCapacity, InvalidInput, InvalidTransition
from pools.inventory.models import GpuModel, Pool
from pools.jobs import RECURRING_SYNC, enqueue_on_commit
from pools.recurring.models import (
    MAX_SPAN_DAYS,
    NAME_MAX_LENGTH,
    Recurrence,
    RecurringReservation,
    ReservationStatus,
)
from pools.recurring.recurrence import Rule, Steps, occurrences
from pools.tenancy.models import Team
from pools.tenancy.permissions import require_pool_admin

SNAPSHOT_FIELDS = (
    "name", "card_count", "recurrence", "time_zone", "first_date", "last_date",
    "start_time", "end_time", "status",
)  # fmt: skip


def reservation_snapshot(reservation: RecurringReservation) -> dict[str, Any]:
    """The audit event's view of a reservation (times as ISO 8601 text)."""
    return audit_snapshot(
        reservation,
        *SNAPSHOT_FIELDS,
        team="team.slug",
        pool="pool.slug",
        gpu_model="gpu_model.slug",
        as_text=True,
    )


def _rule_errors(rule: Rule, name: str) -> dict[str, str]:
    """Field errors of a rule that cannot be a reservation, by field name."""
    errors: dict[str, str] = {}
    if not name.strip() or len(name) > NAME_MAX_LENGTH or "\n" in name:
        errors["name"] = f"One line of 1 to {NAME_MAX_LENGTH} characters."
    if isinstance(rule.cards, bool) or not isinstance(rule.cards, int) or rule.cards < 1:
        errors["card_count"] = "A whole number of cards, at least 1."
    if rule.recurrence not in Recurrence.values:
        errors["recurrence"] = f"One of {', '.join(Recurrence.values)}."
    try:
        ZoneInfo(rule.time_zone)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        errors["time_zone"] = "An IANA time zone name, e.g. Europe/Berlin."
    if rule.last_date < rule.first_date:
        errors["last_date"] = "On or after the first date."
    elif (rule.last_date - rule.first_date).days > MAX_SPAN_DAYS:
        errors["last_date"] = f"At most {MAX_SPAN_DAYS} days after the first date."
    if rule.end_time <= rule.start_time:
        errors["end_time"] = "After the start time, on the same day."
    return errors


def _first_conflict(
    rule: Rule, pool: Pool, gpu_model: GpuModel, ahead: list[tuple[datetime, datetime]]
) -> InsufficientCapacity | None:
    """The refusal of the first occurrence of ``ahead`` (``rule``'s occurrences still to end,
    in order) without ``rule.cards`` free cards, or ``None``. Three queries (the pool's
    schedulable cards as the approval counts them, :func:`pools.capacity.node_kinds.pool_nodes`;
    holding allocations; other reservations) whatever the number of occurrences; each then
    costs a binary search over the held steps."""
    start, end = ahead[0][0], ahead[-1][1]
    nodes = pool_nodes(pool=pool, gpu_model=gpu_model, generation=None)
    usable = usable_cards(nodes.schedulable(None), pool.overcommit_ratio)
    # holding allocations and the other reservations' occurrences
    steps = Steps.of(holding_intervals(pool=pool, gpu_model=gpu_model, start=start, end=end))
    for s, e in ahead:
        free = max(usable - steps.peak(s, e), 0)
        if free < rule.cards:
            local = s.astimezone(ZoneInfo(rule.time_zone))
            return InsufficientCapacity(
                f"Only {free} of {usable} {gpu_model.name} cards are free in {pool.name} on "
                f"{local:%Y-%m-%d} from {rule.start_time:%H:%M} to {rule.end_time:%H:%M} "
                f"({rule.time_zone}); the reservation asks for {rule.cards}.",
                free=free,
                requested=rule.cards,
                usable=usable,
                date=local.date().isoformat(),
                starts_at=s.isoformat(),
                errors={"first_date": f"Not enough free cards on {local:%Y-%m-%d}."},
            )
    return None


def _occurrences_ahead(rule: Rule, name: str, now: datetime) -> list[tuple[datetime, datetime]]:
    """The rule's occurrences (aware ``(start, end)``) that end after ``now``. Raises
    :class:`InvalidInput` by field for a rule or name the module doc refuses, or a rule with
    no occurrence left (pure)."""
    errors = _rule_errors(rule, name)
    if errors:
        raise InvalidInput("The recurring reservation has invalid fields.", errors=errors)
    ahead = [o for o in occurrences(rule) if o[1] > now]
    if not ahead:
        raise InvalidInput(
            "The rule has no occurrence after now.",
            errors={"last_date": "No occurrence of the rule ends after now."},
        )
    return ahead


def recurring_reservation_create(
    *,
    actor: Any,
    team: Team,
    pool: Pool,
    gpu_model: GpuModel,
    name: str,
    card_count: int,
    recurrence: str,
    time_zone: str,
    first_date: date,
    last_date: date,
    start_time: time,
    end_time: time,
    now: datetime | None = None,
) -> RecurringReservation:
    """Reserve ``card_count`` whole cards of ``gpu_model`` in ``pool`` for ``team`` at each
    occurrence of the rule (:mod:`pools.recurring.recurrence`), checked under the pool lock
    against the card invariant over every occurrence that ends after ``now`` (see the module
    doc). Raises :class:`PermissionDenied` (not a pool admin), :class:`InvalidInput` (``errors``
    by field; no occurrence left after ``now``) or :class:`InsufficientCapacity` (``date``: the
    first conflicting local date, ``free``, ``requested``, ``usable``); nothing is written then.
    The schedulers follow after commit (:mod:`pools.recurring.services.binding`)."""
    require_pool_admin(actor, "Only pool admins may reserve recurring capacity.")
    rule = Rule(recurrence, first_date, last_date, start_time, end_time, time_zone, card_count)
    ahead = _occurrences_ahead(rule, name, now or timezone.now())
    with transaction.atomic():
        pool = pool_lock(pool.pk)
        refusal = _first_conflict(rule, pool, gpu_model, ahead)
        if refusal is not None:
            raise refusal
        reservation = RecurringReservation.objects.create(
            team=team, pool=pool, gpu_model=gpu_model, name=name.strip(), card_count=card_count,
            recurrence=recurrence, time_zone=time_zone, first_date=first_date,
            last_date=last_date, start_time=start_time, end_time=end_time,
            created_by=actor if getattr(actor, "is_authenticated", False) else None,
        )  # fmt: skip
        audit_event_record(
            actor=actor,
            action="recurring_reservation.created",
            obj=reservation,
            after=reservation_snapshot(reservation),
        )
        # the schedulers now rather than at the next beat (services/recurring_binding.py)
        enqueue_on_commit(RECURRING_SYNC)
    return reservation


def recurring_reservation_cancel(
    *, reservation: RecurringReservation, actor: Any, reason: str = ""
) -> RecurringReservation:
    """Cancel an active reservation: its occurrences hold no cards from now on. Raises
    :class:`PermissionDenied` (not a pool admin) or :class:`InvalidTransition` (already
    cancelled); nothing is written then."""
    require_pool_admin(actor, "Only pool admins may cancel recurring reservations.")
    with transaction.atomic():
        pool_lock(reservation.pool_id)
        locked = RecurringReservation.objects.select_for_update().get(pk=reservation.pk)
        if locked.status != ReservationStatus.ACTIVE:
            raise InvalidTransition(
                f"A reservation that is {locked.status} cannot be cancelled.",
                status=locked.status,
                action="cancel",
            )
        before = reservation_snapshot(locked)
        locked.status = ReservationStatus.CANCELLED
        locked.save(update_fields=["status"])
        audit_event_record(
            actor=actor,
            action="recurring_reservation.cancelled",
            obj=locked,
            before=before,
            after=reservation_snapshot(locked),
            reason=reason,
        )
        enqueue_on_commit(RECURRING_SYNC)  # the Slurm reservation deleted, the quota lowered
    return locked
