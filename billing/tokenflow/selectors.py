"""Token flow in money: each task's tokens, and its wasted tokens, at the rate card's token
prices — the statement's own price path (:func:`billing.rate_periods.rate_periods`, priced
with :func:`~billing.rate_periods.price_for` for the served model; cached input falls back to
the input price there). Showback: the statement's lines remain the charge.

A task is priced at the prices in force at its first call, per million tokens:
``cost = ((input − cached) × input price + cached × cached price + output × output price) ÷ 10⁶``
(input includes cached, OpenAI usage semantics). Replayed calls are not in the task's tokens
(no GPU computed them). No price for the served model then: the cost is unknown (``None``),
never 0. The costs are SQL expressions, so the tasks sort and page by them in the database.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import (
    BigIntegerField,
    Case,
    DecimalField,
    Expression,
    F,
    Max,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Cast

from billing.choices import RateKind
from billing.conf import billing_zone
from billing.errors import RateCardConflict
from billing.pricing import month_of, next_month, round_money
from billing.rate_periods import RatePeriod, price_for, rate_periods
from pools.tokenflow.flow import FlowSummary
from pools.tokenflow.models import AgentTask, AgentTaskDay
from pools.tokenflow.selectors import days_summary, task_days_in

MONEY = DecimalField(max_digits=30, decimal_places=10)
MILLION = Decimal(1_000_000)
TOKEN_KINDS = (RateKind.TOKEN_INPUT, RateKind.TOKEN_CACHED_INPUT, RateKind.TOKEN_OUTPUT)


@dataclass(frozen=True)
class FlowCost:
    """Totals of a set of priced tasks: cost and wasted cost (``currency``), and how many tasks
    had no price (their cost is left out and the totals are then unknown)."""

    cost: Decimal | None
    wasted_cost: Decimal | None
    unpriced_tasks: int
    currency: str


def _periods(since: datetime, until: datetime) -> list[RatePeriod]:
    zone = billing_zone()
    month: date = month_of(since, zone)
    last = month_of(until - timedelta(microseconds=1), zone)
    out: list[RatePeriod] = []
    while month <= last:
        try:
            out.extend(p for p in rate_periods(month=month, zone=zone) if p.card_id)
        except RateCardConflict:
            pass  # mixed currencies in the month: no single price; its tasks stay unpriced
        month = next_month(month)
    return out


def _first_call_in(period: RatePeriod) -> Q:
    return Q(first_call_at__gte=period.start, first_call_at__lt=period.end)


def _day_in(period: RatePeriod) -> Q:
    return Q(day__gte=period.rate_from, day__lt=period.rate_to)


def _cost(prefix: str, periods: list[RatePeriod], models: list[str], within=_first_call_in):
    tokens_in, cached, out = (F(f"{prefix}input_tokens"), F(f"{prefix}cached_tokens"),
                              F(f"{prefix}output_tokens"))  # fmt: skip
    whens = []
    for period in periods:
        for model in models:
            prices = [price_for(period, kind, None, model) for kind in TOKEN_KINDS]
            if None in prices:
                continue
            p_in, p_cached, p_out = (Value(p, output_field=MONEY) for p in prices)
            amount = ((tokens_in - cached) * p_in + cached * p_cached + out * p_out) / Value(
                MILLION, output_field=MONEY
            )
            whens.append(When(Q(served_model=model) & within(period), then=amount))
    unknown = Cast(Value(None), output_field=MONEY)  # typed: SUM(NULL) has no type in SQL
    return Case(*whens, default=unknown, output_field=MONEY) if whens else unknown


@dataclass(frozen=True)
class TokenPrices:
    """The rate periods of a window of first calls and the currency of their prices (read
    once a request, for the task table and the totals alike)."""

    periods: list[RatePeriod]
    currency: str


def token_prices(*, since: datetime, until: datetime) -> TokenPrices:
    """The prices of tasks first called in ``[since, until)``."""
    periods = _periods(since, until)
    currency = next((p.currency for p in periods if p.currency), None) or settings.BILLING_CURRENCY
    return TokenPrices(periods, currency)


def priced_tasks(
    tasks: QuerySet[AgentTask], *, prices: TokenPrices, models: list[str]
) -> QuerySet[AgentTask]:
    """``tasks`` (first calls in the window of ``prices``, served ``models``) annotated with
    ``cost`` and ``wasted_cost`` (module docstring), in ``prices.currency``."""
    periods = prices.periods
    return tasks.annotate(
        cost=_cost("", periods, models), wasted_cost=_cost("wasted_", periods, models)
    )


def priced_days(
    days: QuerySet[AgentTaskDay], *, prices: TokenPrices, models: list[str]
) -> QuerySet[AgentTaskDay]:
    """The per-day rollup rows ``days`` (of tasks as :func:`priced_tasks` takes them; rate
    periods start at local midnights, so a day is in one period) annotated with ``cost`` and
    ``wasted_cost`` of their summed tokens — the sum of their tasks' costs, the formula being
    linear in the tokens."""
    periods = prices.periods
    return days.annotate(
        cost=_cost("", periods, models, _day_in),
        wasted_cost=_cost("wasted_", periods, models, _day_in),
    )


INT8_MAX = 2**63 - 1
COST_ORDERINGS = ("cost", "wasted_cost")


def _scaled_prices(periods: list[RatePeriod], models: list[str]) -> tuple[int, list] | None:
    """``(scale, [(period, model, (input, cached, output) prices x 10^scale)])``: the token
    prices as whole numbers at one common decimal scale, or ``None`` when a price has more
    than 12 decimals (the rate card keeps 6)."""
    priced = []
    for period in periods:
        for model in models:
            prices = [price_for(period, kind, None, model) for kind in TOKEN_KINDS]
            if None not in prices:
                priced.append((period, model, prices))
    exponents = [-p.as_tuple().exponent for _, _, prices in priced for p in prices]
    scale = max([0, *exponents])
    if scale > 12:
        return None
    return scale, [(pe, m, [int(p.scaleb(scale)) for p in ps]) for pe, m, ps in priced]


def cost_order_key(
    name: str, *, prices: TokenPrices, models: list[str], days: QuerySet[AgentTaskDay]
) -> Expression:
    """What to sort tasks by for ``name`` (an ordering's field): for ``cost`` and
    ``wasted_cost``, the same cost in whole numbers (``tokens x price x 10^scale``, a 64-bit
    integer: the cost x 10^(6 + scale), so the same order, ``NULL`` where the cost is unknown)
    — PostgreSQL sorts 83,000 tasks by it in a third of the time of the ``numeric`` cost. Used
    only when no task of ``days`` (the rollup rows of the sorted tasks) can overflow it: each
    row's token sums bound every one of its tasks' tokens. Otherwise, and for any other
    field, the field itself."""
    if name not in COST_ORDERINGS:
        return F(name)
    scaled = _scaled_prices(prices.periods, models)
    if scaled is None or not scaled[1]:  # no price: every cost is unknown, nothing to sort
        return F(name)
    prefix = "wasted_" if name == "wasted_cost" else ""
    bound = days.aggregate(
        tokens_in=Max(f"{prefix}input_tokens"), tokens_out=Max(f"{prefix}output_tokens")
    )
    tokens_in, tokens_out = bound["tokens_in"] or 0, bound["tokens_out"] or 0
    scale, priced = scaled
    highest = max([0, *(abs(p) for _, _, ps in priced for p in ps)])
    if (tokens_in + tokens_out) * highest >= INT8_MAX:
        return F(name)
    whens = []
    for period, model, (p_in, p_cached, p_out) in priced:
        tokens, cached, out = (F(f"{prefix}input_tokens"), F(f"{prefix}cached_tokens"),
                               F(f"{prefix}output_tokens"))  # fmt: skip
        amount = (tokens - cached) * p_in + cached * p_cached + out * p_out
        whens.append(When(Q(served_model=model) & _first_call_in(period), then=amount))
    unknown = Value(None, output_field=BigIntegerField())
    return Case(*whens, default=unknown, output_field=BigIntegerField())


COST_AGGREGATES = {
    "cost": Sum("cost"),
    "wasted_cost": Sum("wasted_cost"),
    "unpriced": Sum("tasks", filter=Q(cost__isnull=True)),
}
"""The money totals of priced rollup rows, added to the token sums' one scan
(:func:`pools.tokenflow.selectors.days_summary`'s ``extra``) and read with :func:`flow_cost`."""


def task_days_between(
    *, user, team_id: int | None, model: str, since: datetime, until: datetime
) -> QuerySet[AgentTaskDay]:
    """The rollup rows ``user`` may see of the tasks first called in ``[since, until)`` (local
    midnights of the billing time zone, as the filter form gives them: whole rollup days)."""
    zone = billing_zone()
    first, after = since.astimezone(zone).date(), until.astimezone(zone).date()
    return task_days_in(user=user, team_id=team_id, model=model, since=first, until=after)


def flow_totals(
    days: QuerySet[AgentTaskDay], *, prices: TokenPrices, models: list[str]
) -> tuple[FlowSummary, FlowCost]:
    """What the page and ``summary/`` show of the rollup rows ``days`` (first calls in the
    window of ``prices``): the token figures and their money, in one query."""
    summary = days_summary(priced_days(days, prices=prices, models=models), extra=COST_AGGREGATES)
    return summary, flow_cost(summary.extra, prices.currency)


def flow_cost(sums: dict, currency: str) -> FlowCost:
    """The totals of :data:`COST_AGGREGATES`, rounded half-up to the currency's minor unit;
    unknown when any task had no price (a set without tasks costs 0)."""
    unpriced = sums["unpriced"] or 0

    def rounded(value):
        if unpriced:
            return None
        return round_money(Decimal(value or 0), currency)

    return FlowCost(rounded(sums["cost"]), rounded(sums["wasted_cost"]), unpriced, currency)
