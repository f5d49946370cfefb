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
from django.core.exceptions import EmptyResultSet
from django.db import connection
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
from django.db.models.functions import Cast, Floor

from billing.choices import RateKind
from billing.conf import billing_zone
from billing.errors import RateCardConflict
from billing.pricing import minor_unit, month_of, next_month, round_money
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
    return _whole_amount(prefix, priced)


def _whole_amount(prefix: str, priced: list) -> Expression:
    """The cost (``prefix`` ``""``) or wasted cost (``"wasted_"``) of a task in whole numbers,
    ``tokens x price x 10^scale`` with the prices :func:`_scaled_prices` scaled (``priced``);
    ``NULL`` where the cost is unknown."""
    whens = []
    for period, model, (p_in, p_cached, p_out) in priced:
        tokens, cached, out = (F(f"{prefix}input_tokens"), F(f"{prefix}cached_tokens"),
                               F(f"{prefix}output_tokens"))  # fmt: skip
        amount = (tokens - cached) * p_in + cached * p_cached + out * p_out
        whens.append(When(Q(served_model=model) & _first_call_in(period), then=amount))
    unknown = Value(None, output_field=BigIntegerField())
    return Case(*whens, default=unknown, output_field=BigIntegerField())


def cents_shared(
    priced: QuerySet[AgentTask],
    *,
    prices: TokenPrices,
    models: list[str],
    days: QuerySet[AgentTaskDay],
    ids: list[int] | None = None,
) -> dict[int, tuple[int | None, int | None]]:
    """Task id -> its cost and wasted cost in minor units of ``prices.currency`` (cents), for
    the tasks ``ids`` of ``priced`` (:func:`priced_tasks` of ``prices`` and ``models``; ``days``
    their rollup rows), every task without ``ids``: shared out so that the tasks' add up to
    their sum rounded once, half-up, as :func:`flow_cost` gives the totals the page and
    ``summary/`` show. Each rounded alone, 0.156 + 0.0264 EUR read 0.16 + 0.03 = 0.19 beside a
    total of 0.18, and many tasks under half a cent read 0 beside a total of cents.

    Largest remainder (Hamilton), as a shared card's amount is split over its tenants
    (:func:`billing.pricing.split_minor_units`): each task gets its cost rounded down to the
    minor unit, and the units still missing go one each to the tasks that lost most to
    rounding down; on equal remainders the larger cost first, then the older row (id). So each
    task is within one minor unit of its cost, a costlier task never reads less than a cheaper
    one, and a task's cents may differ with the set it is listed in (0.156 EUR reads 0.15 beside
    0.0264, which takes the odd cent with the larger remainder). A task without a price:
    ``None`` (the total is unknown).

    On PostgreSQL in whole numbers (the costs x 10^(6 + scale) of :func:`cost_order_key`, when
    no task can overflow them): one statement reads the tasks once (their sums, and for each
    cost the tasks that lost most, as many as units are missing: a bounded sort), and one
    query before it the rollup's largest token sums. Otherwise with ``numeric`` costs: two
    queries (the sums, then the rows)."""
    whole = _whole_amounts(prices=prices, models=models, days=days)
    minor = minor_unit(prices.currency)
    if whole is None or whole[0] + 6 < minor or connection.vendor != "postgresql":
        return _cents_shared_numeric(priced, currency=prices.currency, ids=ids)
    scale, amounts = whole
    unit = 10 ** (scale + 6 - minor)  # the whole-number amount of one minor unit
    base = priced.annotate(_c=amounts["cost"], _w=amounts["wasted_cost"]).order_by()
    try:
        sql, params = base.values_list("pk", "_c", "_w").query.sql_with_params()
    except EmptyResultSet:  # no task (filters refused)
        return {}
    missing = f"CAST(div(SUM({{0}}) + {unit // 2}, {unit}) - SUM({{0}} / {unit}) AS bigint)"
    ahead = (
        "SELECT id FROM base WHERE {0} IS NOT NULL"
        f" ORDER BY mod({{0}}, {unit}) DESC, {{0}} DESC, id LIMIT (SELECT {{0}} FROM m)"
    )
    only = " WHERE base.id = ANY(%s)" if ids is not None else ""
    statement = (
        f"WITH base(id, c, w) AS MATERIALIZED ({sql}),"
        f" m(c, w) AS (SELECT {missing.format('c')}, {missing.format('w')} FROM base),"
        f" up_c AS ({ahead.format('c')}), up_w AS ({ahead.format('w')})"
        f" SELECT base.id, base.c / {unit} + (up_c.id IS NOT NULL)::int,"
        f" base.w / {unit} + (up_w.id IS NOT NULL)::int FROM base"
        " LEFT JOIN up_c ON up_c.id = base.id LEFT JOIN up_w ON up_w.id = base.id" + only
    )
    with connection.cursor() as cursor:
        cursor.execute(statement, [*params, *([list(ids)] if ids is not None else [])])
        return {pk: (cost, wasted) for pk, cost, wasted in cursor.fetchall()}


def _whole_amounts(
    *, prices: TokenPrices, models: list[str], days: QuerySet[AgentTaskDay]
) -> tuple[int, dict[str, Expression]] | None:
    """``(scale, {"cost": ..., "wasted_cost": ...})``: each task's cost and wasted cost x
    10^(6 + scale) as 64-bit integers (:func:`_whole_amount`), or ``None`` when a price has
    too many decimals, none is known or a task of ``days`` could overflow them (its rollup
    row's token sums bound its tokens; as :func:`cost_order_key` checks). One query."""
    scaled = _scaled_prices(prices.periods, models)
    if scaled is None or not scaled[1]:
        return None
    scale, priced = scaled
    kinds = [f"{prefix}{kind}" for prefix in ("", "wasted_") for kind in ("input", "output")]
    bound = days.aggregate(**{kind: Max(f"{kind}_tokens") for kind in kinds})
    highest = max([0, *(abs(p) for _, _, ps in priced for p in ps)])
    tokens = max(
        (bound[f"{prefix}input"] or 0) + (bound[f"{prefix}output"] or 0)
        for prefix in ("", "wasted_")
    )
    if tokens * highest >= INT8_MAX:
        return None
    return scale, {
        "cost": _whole_amount("", priced),
        "wasted_cost": _whole_amount("wasted_", priced),
    }


def _cents_shared_numeric(
    priced: QuerySet[AgentTask], *, currency: str, ids: list[int] | None
) -> dict[int, tuple[int | None, int | None]]:
    """:func:`cents_shared` with the ``numeric`` costs, wherever the whole numbers cannot be
    used. Two queries: the sums, then the rows (who gets a unit more a subquery of theirs)."""
    scale = Value(10 ** minor_unit(currency), output_field=MONEY)
    units = {field: F(field) * scale for field in COST_ORDERINGS}
    sums = priced.aggregate(
        **{f"{field}__total": Sum(field) for field in COST_ORDERINGS},
        **{f"{field}__floors": Sum(Floor(units[field])) for field in COST_ORDERINGS},
    )
    shares = {}
    for field, amount in units.items():
        total, floors = sums[f"{field}__total"], sums[f"{field}__floors"]
        shares[f"{field}_units"] = Floor(amount)
        missing = 0 if total is None else int(round_money(total, currency).scaleb(
            minor_unit(currency)) - floors)  # fmt: skip
        if missing > 0:
            left = priced.filter(**{f"{field}__isnull": False}).annotate(
                _left=amount - Floor(amount)
            )
            ahead = left.order_by(F("_left").desc(), F(field).desc(), "pk").values("pk")[:missing]
            one_more = Case(When(pk__in=ahead, then=Value(1)), default=Value(0))
            shares[f"{field}_units"] = Floor(amount) + one_more
    rows = priced.annotate(**shares).order_by()
    if ids is not None:
        rows = rows.filter(pk__in=ids)
    return {
        pk: (None if c is None else int(c), None if w is None else int(w))
        for pk, c, w in rows.values_list("pk", "cost_units", "wasted_cost_units")
    }


def units_money(units: int | None, currency: str) -> Decimal | None:
    """Minor units of ``currency`` (:func:`cents_shared`) as an amount: 15 EUR cents -> 0.15."""
    if units is None:
        return None
    step = Decimal(1).scaleb(-minor_unit(currency))
    return (Decimal(units) * step).quantize(step)


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
