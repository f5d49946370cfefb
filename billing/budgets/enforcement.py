"""The budget check pools call at submission and approval (``settings.BUDGET_CHECK``).

A request is beyond a budget when what the budget's scope has used in the period the request
starts in (:func:`billing.budgets.selectors.budget_statuses`, the statements' figures) plus
what the request adds inside that period passes the period's limit (rollover included). What
it adds: cards × real hours of its window inside the period (card-hours), priced at the
reserved card-hour price of the rate card in force at its start (money; unknown when the
model has no reserved price, or no model is chosen yet — then only card-hours are checked).
A budget for one pool or GPU model applies only when the request names that pool / model.
Allocations approved but not yet accrued are not counted: consumption is what statements
charge so far.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.db.models import Q
from django.utils import timezone

from billing.budgets.models import Budget
from billing.budgets.selectors import BudgetStatus, Dimension, budget_statuses
from billing.choices import RateKind
from billing.conf import billing_zone
from billing.pricing import month_of, round_money
from billing.services.rates import price_for, rate_periods
from pools.capacity.arithmetic import card_hours
from pools.capacity.budget_gate import SEVERITY, BudgetVerdict


def _reserved_price(gpu_model, at: datetime) -> Decimal | None:
    if gpu_model is None:
        return None
    for period in rate_periods(month=month_of(at, billing_zone()), zone=billing_zone()):
        if period.start <= at < period.end:
            return price_for(period, RateKind.GPU_RESERVED, gpu_model.pk, "")
    return None


def _over(status: BudgetStatus, hours: Decimal, money: Decimal | None):
    """The first limit the request passes: ``(dimension name, Dimension, requested)``."""
    checks: list[tuple[str, Dimension | None, Decimal | None]] = [
        ("card_hours", status.card_hours, hours),
        ("money", status.money, money),
    ]
    for name, dimension, requested in checks:
        if dimension is None or dimension.used is None or requested is None:
            continue
        if dimension.used + requested > dimension.limit:
            return name, dimension, requested
    return None


def budget_check(
    *, team, pool, gpu_model, cards: int, starts_at: datetime, ends_at: datetime,
    now: datetime | None = None,
) -> BudgetVerdict | None:  # fmt: skip
    """The most severe budget of ``team`` the request passes (ties: the first by id), or None."""
    # team-wide budgets always apply; one for a pool or model only when the request names it
    scope = Q(pool__isnull=True) | (Q(pool=pool) if pool is not None else Q())
    scope &= Q(gpu_model__isnull=True) | (Q(gpu_model=gpu_model) if gpu_model else Q())
    budgets = list(
        Budget.objects.filter(scope, team=team)
        .select_related("team", "pool", "gpu_model")
        .order_by("pk")
    )
    if not budgets:
        return None
    now = now or timezone.now()
    statuses = budget_statuses(budgets, now=now, at=max(starts_at, now))
    price = _reserved_price(gpu_model, max(starts_at, now))
    worst: BudgetVerdict | None = None
    for budget in budgets:
        status = statuses[budget.pk]
        hours = card_hours(cards, max(starts_at, status.starts_at), min(ends_at, status.ends_at))
        money = None  # a money limit is in the rate card's currency, as the price is
        if price is not None and budget.money_limit is not None:
            money = round_money(hours * price, budget.currency)
        over = _over(status, hours, money)
        if over is None:
            continue
        verdict = _verdict(status, *over)
        if worst is None or SEVERITY[verdict.enforcement] > SEVERITY[worst.enforcement]:
            worst = verdict
    return worst


_OUTCOME = {"warn": "a warning", "needs_admin": "a pool admin decides", "refuse": "refused"}


def _shown(value: Decimal) -> str:
    return str(value.quantize(Decimal("0.01")))


def _plain(value: Decimal) -> str:
    """A Decimal for JSON without exponent or trailing zeros: 30.000000 → "30"."""
    return format(value.normalize(), "f")


def _verdict(status: BudgetStatus, name: str, dimension: Dimension, requested: Decimal):
    budget = status.budget
    unit = "card-hours" if name == "card_hours" else dimension.unit
    reason = (
        f"Beyond the {budget.get_period_display().lower()} budget of {budget.team.name} "
        f"({budget.scope_label}, {status.period:%Y-%m}): {_shown(dimension.used)} {unit} used "
        f"+ {_shown(requested)} requested > {_shown(dimension.limit)} {unit}: "
        f"{_OUTCOME[budget.enforcement]}."
    )
    return BudgetVerdict(
        budget.enforcement,
        reason,
        {"budget": budget.pk, "period": f"{status.period:%Y-%m}", "dimension": name,
         "unit": unit, "limit": _plain(dimension.limit), "used": _plain(dimension.used),
         "requested": _plain(requested), "enforcement": budget.enforcement},
    )  # fmt: skip
