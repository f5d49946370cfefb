"""Writes of budgets: create, change, delete — pool admins only, each audited, each checked
whole before anything is written (a field error names the field and changes nothing)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction

from billing.budgets import periods as p
from billing.budgets.choices import BudgetPeriod, Enforcement, Rollover
from billing.budgets.models import Budget
from billing.conf import billing_zone, default_currency
from billing.rate_periods import rate_periods
from pools.audit.services import audit_event_record, audit_snapshot
from pools.common.errors import Conflict, InvalidInput
from pools.common.validators import DATE_RANGE_MESSAGE, date_in_range
from pools.jobs import enqueue_on_commit
from pools.tenancy.models import Team
from pools.tenancy.permissions import require_pool_admin

SLURM_SYNC = "billing.tasks.budget_minutes_sync_task"
#: What a member is told when they try to set, change or delete a budget (pages and API).
BUDGETS_ADMIN_ONLY = "Only pool admins set budgets."
"""Re-writes the team's Slurm GrpTRESMins after a budget change (:mod:`billing.budgets.slurm`)."""

FIELDS = (
    "team", "cost_centre", "pool", "gpu_model", "period", "starts_on", "card_hours_limit",
    "money_limit", "currency", "rollover", "rollover_cap_percent", "enforcement",
)  # fmt: skip


def _sync_slurm(team_id: int | None) -> None:
    """Queue the team's GrpTRESMins sync after commit (a cost centre's budget is the portal's
    alone: it spans several Slurm accounts)."""
    if team_id is not None:
        enqueue_on_commit(SLURM_SYNC, team_id)


def rate_card_currency(month: date) -> str:
    """The currency of the rate card in force in ``month`` (the configured default where no
    card covers it): the only currency a budget's money limit may be in."""
    periods = rate_periods(month=month.replace(day=1), zone=billing_zone())
    return next((x.currency for x in periods if x.currency), None) or default_currency()


def _snapshot(budget: Budget) -> dict[str, Any]:
    return audit_snapshot(
        budget, *[f for f in FIELDS if f not in ("team", "pool", "gpu_model")],
        team="team.slug", pool="pool.slug", gpu_model="gpu_model.slug",
    )  # fmt: skip


def _owner_errors(values: dict[str, Any]) -> dict[str, str]:
    """Errors of the owner: exactly one of a team and a cost centre some team carries."""
    team, centre = values.get("team"), (values.get("cost_centre") or "").strip()
    if (team is None) == (not centre):
        return {"team": "A team or a cost centre, not both."}
    if centre and not Team.objects.filter(cost_centre=centre).exists():
        return {"cost_centre": f"No team has cost centre {centre!r}."}
    return {}


def _period_errors(values: dict[str, Any]) -> dict[str, str]:
    """Errors of the period: a known period, starting on its first day
    (:func:`billing.budgets.periods.period_start`) within the portal's dates
    (:data:`pools.common.validators.DATE_RANGE_MESSAGE`: year 9999 has no next period)."""
    period, starts_on = values["period"], values["starts_on"]
    if period not in BudgetPeriod.values:
        return {"period": f"One of {', '.join(BudgetPeriod.values)}."}
    if not date_in_range(starts_on):
        return {"starts_on": DATE_RANGE_MESSAGE}
    first = p.period_start(period, starts_on)
    if starts_on != first:
        return {"starts_on": f"The first day of a {period}: {first.isoformat()}?"}
    return {}


def _hours_errors(values: dict[str, Any]) -> dict[str, str]:
    """Errors of the card-hour limit: some limit given, and a card-hour limit above 0."""
    hours, money = values.get("card_hours_limit"), values.get("money_limit")
    if hours is not None and Decimal(hours) <= 0:
        return {"card_hours_limit": "More than 0 card-hours."}
    if hours is None and money is None:
        return {"card_hours_limit": "Give a card-hour limit, a money limit, or both."}
    return {}


def _money_errors(values: dict[str, Any]) -> dict[str, str]:
    """Errors of the money limit: above 0, in the currency of the rate card in force at the
    start (:func:`rate_card_currency`); a currency only with a money limit."""
    money, currency = values.get("money_limit"), values.get("currency") or ""
    errors: dict[str, str] = {}
    if money is None:
        if currency:
            errors["currency"] = "Only with a money limit."
        return errors
    if Decimal(money) <= 0:
        errors["money_limit"] = "More than 0."
    if not date_in_range(values["starts_on"]):
        return errors  # the period's error says so; no rate card is read out of range
    expected = rate_card_currency(values["starts_on"])
    if currency != expected:
        errors["currency"] = (
            f"The rate card charges in {expected}; a budget in {currency or 'no currency'} "
            "could not be compared with what it charges."
        )
    return errors


def _choice_errors(values: dict[str, Any]) -> dict[str, str]:
    """Errors of the rollover, its cap (0 % or more, only when unused carries over) and the
    enforcement."""
    errors: dict[str, str] = {}
    if values.get("rollover") not in Rollover.values:
        errors["rollover"] = f"One of {', '.join(Rollover.values)}."
    cap = values.get("rollover_cap_percent")
    if cap is not None and (values.get("rollover") != Rollover.CARRY or Decimal(cap) < 0):
        errors["rollover_cap_percent"] = "A cap of 0 % or more, only when unused carries over."
    if values.get("enforcement") not in Enforcement.values:
        errors["enforcement"] = f"One of {', '.join(Enforcement.values)}."
    return errors


def _validate(values: dict[str, Any]) -> None:
    """Field errors of a budget's values (all of them at once), raised as one InvalidInput
    ({field: message}, fields in :data:`FIELDS` order)."""
    errors: dict[str, str] = {}
    for step in (_owner_errors, _period_errors, _hours_errors, _money_errors, _choice_errors):
        errors.update(step(values))
    if errors:
        raise InvalidInput("The budget has invalid fields.", errors=errors)


def _save(budget: Budget) -> None:
    """Save, then read back, so the audit event shows the stored values (2500 → 2500.000).

    One budget per team or cost centre × pool × model × period: the ``budget_unique_scope``
    constraint on PostgreSQL (``NULLS NOT DISTINCT``); SQLite (the demo) cannot make that
    constraint, so the same rule is checked here first, inside the transaction (SQLite
    serialises writers)."""
    scope = {f: getattr(budget, f) for f in ("team", "cost_centre", "pool", "gpu_model", "period")}
    taken = Conflict(
        f"{budget.owner_label} already has a {budget.period} budget for {budget.scope_label}.",
        team=budget.team.slug if budget.team_id else None,
    )
    try:
        with transaction.atomic():
            if Budget.objects.filter(**scope).exclude(pk=budget.pk).exists():
                raise taken
            budget.save()
            budget.refresh_from_db()
    except IntegrityError as error:  # budget_unique_scope: a concurrent writer won the race
        raise taken from error


def _normalised(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with the cost centre stripped and the currency as ISO 4217 writes it
    (upper case, no spaces: ``" eur"`` is EUR)."""
    return {
        **values,
        "cost_centre": (values.get("cost_centre") or "").strip(),
        "currency": (values.get("currency") or "").strip().upper(),
    }


def budget_create(*, actor: Any, **values: Any) -> Budget:
    """A new budget from ``values`` (the names of :data:`FIELDS`; ``team``, ``pool`` and
    ``gpu_model`` as objects). Raises PermissionDenied, InvalidInput (field errors),
    Conflict (the scope already has a budget for that period)."""
    require_pool_admin(actor, BUDGETS_ADMIN_ONLY)
    values = _normalised({"rollover": Rollover.NONE, "enforcement": Enforcement.WARN, **values})
    _validate(values)
    with transaction.atomic():
        budget = Budget(**{k: v for k, v in values.items() if k in FIELDS})
        _save(budget)
        audit_event_record(actor=actor, action="budget.created", obj=budget,
                           after=_snapshot(budget))  # fmt: skip
        _sync_slurm(budget.team_id)
    return budget


def budget_update(*, budget: Budget, actor: Any, **changes: Any) -> Budget:
    """Change the given fields; the budget is checked whole. A change of period or limit
    applies to the period containing now: consumption is always recounted from usage, so it
    stays exact to the second whatever the period became."""
    require_pool_admin(actor, BUDGETS_ADMIN_ONLY)
    with transaction.atomic():
        budget = (
            Budget.objects.select_for_update(of=("self",)).select_related("team").get(pk=budget.pk)
        )
        before, old_team_id = _snapshot(budget), budget.team_id
        values = {f: getattr(budget, f) for f in FIELDS}
        values.update({k: v for k, v in changes.items() if k in FIELDS})
        values = _normalised(values)
        _validate(values)
        for key, value in values.items():
            setattr(budget, key, value)
        _save(budget)
        audit_event_record(actor=actor, action="budget.updated", obj=budget, before=before,
                           after=_snapshot(budget))  # fmt: skip
        _sync_slurm(budget.team_id)
        if old_team_id != budget.team_id:  # moved: the old team's entry goes too
            _sync_slurm(old_team_id)
    return budget


def budget_delete(*, budget: Budget, actor: Any) -> None:
    require_pool_admin(actor, BUDGETS_ADMIN_ONLY)
    with transaction.atomic():
        audit_event_record(actor=actor, action="budget.deleted", obj=budget,
                           before=_snapshot(budget))  # fmt: skip
        team_id = budget.team_id
        budget.delete()
        _sync_slurm(team_id)
