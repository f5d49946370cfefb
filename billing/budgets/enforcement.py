"""The budget check pools call at submission and approval (``settings.BUDGET_CHECK``).

A request is beyond a budget when what the budget's scope has used in the period the request
starts in (:func:`billing.budgets.selectors.budget_statuses`, the statements' figures) plus
what the request adds inside that period passes the period's limit (rollover included). What
it adds: cards × real hours of its window inside the period (card-hours), priced at the
reserved card-hour price of the rate card in force at its start (money; unknown when the
model has no reserved price, or no model is chosen yet — then only card-hours are checked).
A budget for one pool or GPU model applies only when the request names that pool / model.

Consumption is what statements charge so far; on top of it the check counts what is already
*committed*: the team's approved allocations priced by reserved card-hours (holding, in the
budget's scope) from now to the end of their window or the period, whichever comes first —
cards (a slice allocation: its share of a card) × those hours, priced like the request at the
reserved price in force at their start (or now, if started). Without it, two requests could
each pass alone and together exceed the budget. Hours before now are the statements' (the
reservation import accrues them), so nothing is counted twice; hours between the last import
and now are in neither (the import runs hourly, so at most about an hour of each allocation).
An allocation whose model has no reserved price adds its card-hours and no money, as a
statement could not price it either.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.db.models import Q
from django.utils import timezone

from billing.budgets.models import Budget
from billing.budgets.selectors import BudgetStatus, Dimension, budget_statuses, centre_teams
from billing.choices import RateKind
from billing.conf import billing_zone
from billing.pricing import month_of, round_money
from billing.services.rates import price_for, rate_periods
from pools.capacity.arithmetic import card_hours, clip
from pools.capacity.budget_gate import SEVERITY, BudgetVerdict
from pools.capacity.models import Allocation
from pools.capacity.slices import card_share
from pools.choices import PricingMethod


def _reserved_price(gpu_model, at: datetime, cache: dict | None = None) -> Decimal | None:
    """The reserved card-hour price of ``gpu_model`` in force at ``at`` (``None``: no model or
    no price). ``cache`` keeps each month's rate periods across calls (one read per month, not
    one per allocation: benchmarks/budgets.py)."""
    if gpu_model is None:
        return None
    month = month_of(at, billing_zone())
    if cache is None or month not in cache:
        periods = rate_periods(month=month, zone=billing_zone())
        if cache is None:
            cache = {}
        cache[month] = periods
    for period in cache[month]:
        if period.start <= at < period.end:
            return price_for(period, RateKind.GPU_RESERVED, gpu_model.pk, "")
    return None


def _committed(team, budgets, statuses, now: datetime) -> dict[int, tuple[Decimal, Decimal]]:
    """Budget id -> ``(card-hours, money)`` the holding reserved-priced allocations of the
    budget's team (or of every team of its cost centre) in the budget's scope still hold
    between now and the end of the budget's period (one query for every budget). Money in the
    rate card's currency, rounded per allocation as a statement line is."""
    ends = [statuses[b.pk].ends_at for b in budgets]
    members = centre_teams(budgets)
    teams = {team.pk}.union(*members.values())
    allocations = list(
        Allocation.objects.holding()
        .overlapping(now, max(ends))
        .filter(team_id__in=teams, pricing_method=PricingMethod.RESERVED)
        .select_related("gpu_model")
        .only(
            "team_id", "pool_id", "gpu_model", "card_count", "mig_profile", "starts_at", "ends_at"
        )
    )
    prices: dict[tuple[int, datetime], Decimal | None] = {}
    months: dict = {}
    result = {}
    for budget in budgets:
        status = statuses[budget.pk]
        hours, money = Decimal(0), Decimal(0)
        owners = {budget.team_id} if budget.team_id else members.get(budget.cost_centre, set())
        for a in allocations:
            if a.team_id not in owners:
                continue
            if budget.pool_id is not None and a.pool_id != budget.pool_id:
                continue
            if budget.gpu_model_id is not None and a.gpu_model_id != budget.gpu_model_id:
                continue
            span = clip(a.starts_at, a.ends_at, max(now, status.starts_at), status.ends_at)
            held = card_hours(a.card_count, *span) if span else Decimal(0)
            if not held:
                continue
            if a.mig_profile:  # slices: their share of a card (3 × 1g.10gb = 3/7 card)
                share = card_share(a.mig_profile, model_key=a.gpu_model.slug)
                held = held * share.numerator / share.denominator
            hours += held
            priced_at = max(a.starts_at, now)
            key = (a.gpu_model_id, priced_at)
            if key not in prices:
                prices[key] = _reserved_price(a.gpu_model, priced_at, months)
            if prices[key] is not None and budget.money_limit is not None:
                money += round_money(held * prices[key], budget.currency)
        result[budget.pk] = (hours, money)
    return result


def _over(status: BudgetStatus, committed: tuple[Decimal, Decimal], hours, money):
    """The first limit the request passes: ``(dimension name, Dimension, committed,
    requested)``."""
    checks: list[tuple[str, Dimension | None, Decimal, Decimal | None]] = [
        ("card_hours", status.card_hours, committed[0], hours),
        ("money", status.money, committed[1], money),
    ]
    for name, dimension, held, requested in checks:
        if dimension is None or dimension.used is None or requested is None:
            continue
        if dimension.used + held + requested > dimension.limit:
            return name, dimension, held, requested
    return None


def budget_check(
    *, team, pool, gpu_model, cards: int, starts_at: datetime, ends_at: datetime,
    now: datetime | None = None,
) -> BudgetVerdict | None:  # fmt: skip
    """The most severe budget of ``team`` the request passes (ties: the first by id), or None."""
    # team-wide budgets always apply; one for a pool or model only when the request names it
    scope = Q(pool__isnull=True) | (Q(pool=pool) if pool is not None else Q())
    scope &= Q(gpu_model__isnull=True) | (Q(gpu_model=gpu_model) if gpu_model else Q())
    owner = Q(team=team)
    if team.cost_centre:  # the team's cost centre's budgets apply to it too
        owner |= Q(team__isnull=True, cost_centre=team.cost_centre)
    budgets = list(
        Budget.objects.filter(scope, owner)
        .select_related("team", "pool", "gpu_model")
        .order_by("pk")
    )
    if not budgets:
        return None
    now = now or timezone.now()
    statuses = budget_statuses(budgets, now=now, at=max(starts_at, now))
    price = _reserved_price(gpu_model, max(starts_at, now))
    committed = _committed(team, budgets, statuses, now)
    worst: BudgetVerdict | None = None
    for budget in budgets:
        status = statuses[budget.pk]
        span = clip(starts_at, ends_at, status.starts_at, status.ends_at)
        hours = card_hours(cards, *span) if span else Decimal(0)
        money = None  # a money limit is in the rate card's currency, as the price is
        if price is not None and budget.money_limit is not None:
            money = round_money(hours * price, budget.currency)
        over = _over(status, committed[budget.pk], hours, money)
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


def _verdict(
    status: BudgetStatus, name: str, dimension: Dimension, committed: Decimal, requested: Decimal
):
    budget = status.budget
    unit = "card-hours" if name == "card_hours" else dimension.unit
    held = f"+ {_shown(committed)} committed to approved allocations " if committed else ""
    reason = (
        f"Beyond the {budget.get_period_display().lower()} budget of {budget.owner_label} "
        f"({budget.scope_label}, {status.period:%Y-%m}): {_shown(dimension.used)} {unit} used "
        f"{held}+ {_shown(requested)} requested > {_shown(dimension.limit)} {unit}: "
        f"{_OUTCOME[budget.enforcement]}."
    )
    return BudgetVerdict(
        budget.enforcement,
        reason,
        {"budget": budget.pk, "period": f"{status.period:%Y-%m}", "dimension": name,
         "unit": unit, "limit": _plain(dimension.limit), "used": _plain(dimension.used),
         "committed": _plain(committed), "requested": _plain(requested),
         "enforcement": budget.enforcement},
    )  # fmt: skip
