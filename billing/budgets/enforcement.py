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

from django.utils import timezone

from billing.budgets.models import Budget
from billing.budgets.selectors import BudgetStatus, Dimension, budget_statuses, centre_teams
from billing.choices import RateKind
from billing.conf import billing_zone
from billing.models import PriceListVersion
from billing.pricing import month_of, round_money
from billing.rate_periods import price_for, rate_periods_kept
from pools.capacity.arithmetic import card_hours, clip
from pools.capacity.budget_gate import SEVERITY, BudgetVerdict
from pools.capacity.models import Allocation
from pools.capacity.rows import RowReader
from pools.capacity.slices import card_share
from pools.common.choices import PricingMethod


class _ReservedPrices:
    """Reserved card-hour prices of the GPU models, each month's rate periods read once
    (:func:`~billing.rate_periods.rate_periods_kept` under the price list's ``version``: in
    this process, once per version — an approval reads no rate card once warm)."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.months: dict = {}
        self.zone = billing_zone()
        self.found: dict[tuple[int, datetime], Decimal | None] = {}

    def at(self, gpu_model_id: int | None, at: datetime) -> Decimal | None:
        """The price in force at ``at`` (``None``: no model or no price); each (model,
        instant) looked up once — allocations already started are all priced at ``now``."""
        if gpu_model_id is None:
            return None
        key = (gpu_model_id, at)
        if key not in self.found:
            self.found[key] = self._lookup(gpu_model_id, at)
        return self.found[key]

    def _lookup(self, gpu_model_id: int, at: datetime) -> Decimal | None:
        month = month_of(at, self.zone)
        if month not in self.months:
            self.months[month] = rate_periods_kept(
                month=month, zone=self.zone, version=self.version
            )
        for period in self.months[month]:
            if period.start <= at < period.end:
                return price_for(period, RateKind.GPU_RESERVED, gpu_model_id, "")
        return None


def _held(rows, start: datetime, end: datetime, now: datetime, prices) -> list[tuple]:
    """``(team, pool, GPU model, card-hours, reserved price or None)`` of each allocation row
    that holds cards in ``[start, end)``: cards (a slice allocation: its share of a card) ×
    the hours held there, priced at the reserved price in force at its start, or now if
    started."""
    held_rows = []
    for team_id, pool_id, model_id, model_slug, cards, profile, starts, ends in rows:
        span = clip(starts, ends, start, end)
        held = card_hours(cards, *span) if span else Decimal(0)
        if not held:
            continue
        if profile:  # slices: their share of a card (3 × 1g.10gb = 3/7 card)
            share = card_share(profile, model_key=model_slug)
            held = held * share.numerator / share.denominator
        price = prices.at(model_id, max(starts, now)) if prices is not None else None
        held_rows.append((team_id, pool_id, model_id, held, price))
    return held_rows


def _committed(
    team, budgets, statuses, now: datetime, prices: _ReservedPrices | None
) -> dict[int, tuple[Decimal, Decimal]]:
    """Budget id -> ``(card-hours, money)`` the holding reserved-priced allocations of the
    budget's team (or of every team of its cost centre) in the budget's scope still hold
    between now and the end of the budget's period (one query for every budget; each
    allocation priced once per distinct period, not once per budget). Money in the rate card's
    currency, rounded per allocation as a statement line is. ``prices``: ``None`` when no
    budget counts money (nothing is priced)."""
    ends = [statuses[b.pk].ends_at for b in budgets]
    members = centre_teams(budgets)
    teams = {team.pk}.union(*members.values())
    rows = list(
        Allocation.objects.holding()
        .overlapping(now, max(ends))
        .filter(team_id__in=teams, pricing_method=PricingMethod.RESERVED)
        .values_list("team_id", "pool_id", "gpu_model_id", "gpu_model__slug", "card_count",
                     "mig_profile", "starts_at", "ends_at")
    )  # fmt: skip
    windows: dict[tuple[datetime, datetime], list[tuple]] = {}
    result = {}
    for budget in budgets:
        status = statuses[budget.pk]
        window = (max(now, status.starts_at), status.ends_at)
        if window not in windows:
            windows[window] = _held(rows, *window, now, prices)
        hours, money = Decimal(0), Decimal(0)
        owners = {budget.team_id} if budget.team_id else members.get(budget.cost_centre, set())
        for team_id, pool_id, model_id, held, price in windows[window]:
            if team_id not in owners:
                continue
            if budget.pool_id is not None and pool_id != budget.pool_id:
                continue
            if budget.gpu_model_id is not None and model_id != budget.gpu_model_id:
                continue
            hours += held
            if price is not None and budget.money_limit is not None:
                money += round_money(held * price, budget.currency)
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


# The budgets a request answers to, as one plain statement read without a queryset
# (pools.capacity.rows): the ORM took longer to build it than PostgreSQL to run it, on every
# approval (issue #29 item 7: approvals within 2x the bare transaction). Team-wide budgets
# always apply, one for a pool or model only when the request names it (NULL matches no pool);
# the team's own, and its cost centre's when it has one; each with the price list's version (0
# without its row) as ``price_list``.
_BUDGETS = RowReader(Budget)
_BUDGETS_SQL = (
    f"SELECT {_BUDGETS.columns}, COALESCE((SELECT v.version FROM "
    f"{PriceListVersion._meta.db_table} v WHERE v.id = 1), 0) FROM {Budget._meta.db_table} b "
    "WHERE (b.pool_id IS NULL OR b.pool_id = %s) "
    "AND (b.gpu_model_id IS NULL OR b.gpu_model_id = %s) "
    "AND (b.team_id = %s OR (b.team_id IS NULL AND %s <> '' AND b.cost_centre = %s)) "
    "ORDER BY b.id"
)


def _budgets_of(team, pool, gpu_model) -> list[Budget]:
    """The budgets of ``team`` (or of its cost centre) whose scope covers ``pool`` ×
    ``gpu_model`` (either ``None``: not named yet), by id, each with ``price_list`` (the price
    list's version) and its team, pool and model taken from the arguments (no query each)."""
    pool_id, model_id = getattr(pool, "pk", None), getattr(gpu_model, "pk", None)
    params = [pool_id, model_id, team.pk, team.cost_centre, team.cost_centre]
    budgets = _BUDGETS.read(_BUDGETS_SQL, params, extra=("price_list",))
    for budget in budgets:
        budget.team = team if budget.team_id else None
        budget.pool = pool if budget.pool_id else None
        budget.gpu_model = gpu_model if budget.gpu_model_id else None
    return budgets


def budget_check(
    *, team, pool, gpu_model, cards: int, starts_at: datetime, ends_at: datetime,
    now: datetime | None = None,
) -> BudgetVerdict | None:  # fmt: skip
    """The most severe budget of ``team`` the request passes (ties: the first by id), or None."""
    budgets = _budgets_of(team, pool, gpu_model)
    if not budgets:
        return None
    now = now or timezone.now()
    statuses = budget_statuses(budgets, now=now, at=max(starts_at, now))
    # no rate is read when no budget has a money limit
    prices = None
    if any(b.money_limit is not None for b in budgets):
        prices = _ReservedPrices(budgets[0].price_list)
    price = prices.at(gpu_model and gpu_model.pk, max(starts_at, now)) if prices else None
    committed = _committed(team, budgets, statuses, now, prices)
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
