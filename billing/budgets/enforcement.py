"""The budget check pools call at submission and approval (``settings.BUDGET_CHECK``).

A request is beyond a budget when what the budget's scope has used in the period the request
starts in (:func:`billing.budgets.selectors.budget_statuses`, the statements' figures) plus
what the request adds inside that period passes the period's limit (rollover included). What
it adds: cards × real hours of its window inside the period (card-hours), priced at the
reserved card-hour price of the rate card in force at its start (money; unknown when the
model has no reserved price, or no model is chosen yet — then only card-hours are checked).
A budget for one pool or GPU model applies only when the request names that pool / model.

Consumption is what statements charge so far; on top of it the check counts what is already
*committed*: the team's approved allocations priced by reserved card-hours (holding, or ended or
reclaimed with hours not yet imported; in the budget's scope) from where the reservation
import's records of each end (the latest ``period_end`` of its reservation usage records; its
start when it has none) to the end of its window or the period, whichever comes first — the
cards it held at each moment of them (a reclamation's shrink counts from its instant, an undo
gives the cards back from its own: :mod:`pools.reclamation.card_timeline`, as the import charges
them; a slice allocation: its share of a card) × those hours, priced like the request at the
reserved price in force at their start (or now, if started). Without it, two requests could each
pass alone and together exceed the budget. Hours up to the import's end are the statements' (the
import accrues them), so nothing is counted twice, and the hours between the last import and now
are committed, so used + committed stays the same between hourly imports (it drifted down by the
hours since the last import when committed started at now). An allocation whose model has no
reserved price adds its card-hours and no money, as a statement could not price it either.
"""

from __future__ import annotations

import math
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

from django.db import connection
from django.db.models import Max, OuterRef, Subquery
from django.utils import timezone

from billing.budgets.models import Budget
from billing.budgets.selectors import (
    BudgetStatus,
    Dimension,
    budget_statuses_at,
    centre_teams,
)
from billing.choices import RateKind, UsageSource
from billing.conf import billing_zone
from billing.models import PriceListVersion, UsageRecord
from billing.pricing import (
    local_midnight,
    minor_unit,
    month_of,
    next_month,
    round_money,
    whole_seconds,
)
from billing.rate_periods import price_for, rate_periods_kept
from pools.capacity.arithmetic import card_hours, clip
from pools.capacity.budget_gate import SEVERITY, BudgetVerdict
from pools.capacity.lifecycle import COMMITTED_STATUSES
from pools.capacity.models import Allocation
from pools.capacity.rows import RowReader
from pools.capacity.slices import card_share
from pools.common.choices import IdleFindingState, PricingMethod
from pools.inventory.models import GpuModel
from pools.reclamation.card_timeline import CardPiece, card_changes, card_pieces
from pools.reclamation.models import IdleFinding
from pools.web.numbers import grouped


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

    def periods(self, start: datetime, end: datetime) -> list[tuple]:
        """``(start, end, GPU model id, price)`` of every reserved card-hour price in force
        at some instant of ``[start, end)``: the rate periods of the months it touches (those
        :meth:`at` looks in), one row per model priced."""
        found = []
        month = month_of(start, self.zone)
        while local_midnight(month, self.zone) < end:
            for period in self._month(month):
                found.extend(
                    (period.start, period.end, model_id, price)
                    for (kind, model_id, served), price in period.prices.items()
                    if kind == RateKind.GPU_RESERVED and model_id is not None and not served
                )
            month = next_month(month)
        return found

    def _month(self, month) -> list:
        if month not in self.months:
            self.months[month] = rate_periods_kept(
                month=month, zone=self.zone, version=self.version
            )
        return self.months[month]

    def _lookup(self, gpu_model_id: int, at: datetime) -> Decimal | None:
        for period in self._month(month_of(at, self.zone)):
            if period.start <= at < period.end:
                return price_for(period, RateKind.GPU_RESERVED, gpu_model_id, "")
        return None


def _card_seconds(pieces: list[CardPiece], start: datetime, end: datetime) -> int:
    """Cards × whole seconds of each of ``pieces`` inside ``[start, end)``, summed: each
    piece's seconds taken to the whole second apart (as :data:`_COMMITTED_SQL` does)."""
    return sum(
        piece.cards * whole_seconds(*span)
        for piece in pieces
        if (span := clip(piece.start, piece.end, start, end)) is not None
    )


def _held(rows, changes, start: datetime, end: datetime, now: datetime, prices) -> list[tuple]:
    """``(team, pool, GPU model, card-hours, reserved price or None)`` of each allocation row
    that holds cards in ``[start, end)`` after its imported usage's end: the cards it held at
    each moment (``changes``: :func:`pools.reclamation.card_timeline.card_changes` by id, a
    reclamation's shrink, end or undo; :func:`~pools.reclamation.card_timeline.card_pieces`)
    × the whole seconds held there / 3,600 s (a slice allocation: × its share of a card), an
    exact :class:`~fractions.Fraction`, priced at the reserved price in force at its start, or
    now if started."""
    held_rows = []
    for row in rows:
        pk, team_id, pool_id, model_id, model_slug, cards, profile, starts, ends, imported = row
        window = clip(max(starts, imported or starts), ends, start, end)
        if window is None:
            continue
        allocation = Allocation(starts_at=starts, ends_at=ends, card_count=cards)
        seconds = _card_seconds(card_pieces(allocation, changes.get(pk, ())), *window)
        if not seconds:
            continue
        held = Fraction(seconds, 3600) * card_share(profile, model_key=model_slug)
        price = prices.at(model_id, max(starts, now)) if prices is not None else None
        held_rows.append((team_id, pool_id, model_id, held, price))
    return held_rows


def _money_units(held: Fraction, price: Decimal, places: int) -> int:
    """``held`` card-hours at ``price`` in the currency's minor units (``places`` decimals),
    rounded half-up once (:func:`billing.pricing.round_money`), exactly."""
    return math.floor(held * Fraction(price) * 10**places + Fraction(1, 2))


def _committed(
    team, budgets, statuses, now: datetime, prices: _ReservedPrices | None
) -> dict[int, tuple[Decimal, Decimal]]:
    """Budget id -> ``(card-hours, money)`` the holding (or ended) reserved-priced allocations
    of the budget's team (or of every team of its cost centre) in the budget's scope hold in
    the budget's period after their imported usage ends (module docstring). Money in the rate
    card's currency, each allocation rounded half-up once to the budget currency's minor unit
    (as a statement line is); ``prices``: ``None`` when no budget counts money (nothing is priced).

    On PostgreSQL one aggregate statement (:func:`_committed_sql`; a team holds hundreds of
    allocations, which took longer to load than the rest of an approval); elsewhere (SQLite:
    the demo) the rows are read and summed here (:func:`_committed_rows`). Both are exact
    (integer card-seconds, one half-up rounding per allocation), so they agree to the last
    digit (``tests/billing/budgets/test_committed_sql.py``, over random data)."""
    return _committed_for({team.pk}, [(b.pk, b, statuses[b.pk]) for b in budgets], now, prices)


def _committed_for(
    team_ids: set[int], entries: list[tuple], now: datetime, prices: _ReservedPrices | None
) -> dict[int, tuple[Decimal, Decimal]]:
    """:func:`_committed` of ``(key, budget, status)`` entries, keyed by ``key``: a budget may
    come in several periods (requests of the approval queue starting in different ones), and
    the budgets of many teams (``team_ids``) are summed in the same statement."""
    members = centre_teams(b for _, b, _ in entries)
    if connection.vendor == "postgresql":
        return _committed_sql(team_ids, entries, now, prices, members)
    return _committed_rows(team_ids, entries, now, prices, members)


def _owners(budget, members: dict[str, set[int]]) -> set[int]:
    return {budget.team_id} if budget.team_id else members.get(budget.cost_centre, set())


def _window(status) -> tuple[datetime, datetime]:
    """The budget's period, ``[start, end)``: each allocation counts from its imported usage's
    end inside it (:func:`_imported_to`)."""
    return status.starts_at, status.ends_at


def _imported_to():
    """Per allocation row: where the reservation import's records of it end (the latest
    ``period_end``; ``None`` when it has none), as a subquery."""
    records = UsageRecord.objects.filter(
        allocation_id=OuterRef("pk"), source=UsageSource.RESERVATION
    )
    return Subquery(
        records.order_by().values("allocation_id").annotate(to=Max("period_end")).values("to")
    )


def _committed_rows(
    team_ids, entries, now: datetime, prices: _ReservedPrices | None, members
) -> dict[int, tuple[Decimal, Decimal]]:
    """:func:`_committed` by reading the allocation rows and their reclamations' card changes
    (two queries) and summing in Python; each allocation priced once per distinct period, not
    once per budget."""
    windows_of = [_window(status) for _, _, status in entries]
    teams = set(team_ids).union(*members.values())
    rows = list(
        Allocation.objects.filter(status__in=COMMITTED_STATUSES)
        .overlapping(min(lo for lo, _ in windows_of), max(hi for _, hi in windows_of))
        .filter(team_id__in=teams, pricing_method=PricingMethod.RESERVED)
        .annotate(imported_to=_imported_to())
        .values_list("pk", "team_id", "pool_id", "gpu_model_id", "gpu_model__slug",
                     "card_count", "mig_profile", "starts_at", "ends_at", "imported_to")
    )  # fmt: skip
    changes = card_changes(row[0] for row in rows) if rows else {}
    windows: dict[tuple[datetime, datetime], list[tuple]] = {}
    result = {}
    for (key, budget, _), window in zip(entries, windows_of, strict=True):
        if window not in windows:
            windows[window] = _held(rows, changes, *window, now, prices)
        places = minor_unit(budget.currency)
        hours, units = Fraction(0), 0
        owners = _owners(budget, members)
        for team_id, pool_id, model_id, held, price in windows[window]:
            if team_id not in owners:
                continue
            if budget.pool_id is not None and pool_id != budget.pool_id:
                continue
            if budget.gpu_model_id is not None and model_id != budget.gpu_model_id:
                continue
            hours += held
            if price is not None and budget.money_limit is not None:
                units += _money_units(held, price, places)
        result[key] = (_decimal(hours), Decimal(units).scaleb(-places))
    return result


def _decimal(value: Fraction) -> Decimal:
    """An exact fraction as a Decimal (28 significant digits, one rounding)."""
    return Decimal(value.numerator) / Decimal(value.denominator)


# The committing statuses as SQL literals (constants of the code, not input).
_COMMITTING = ", ".join(f"'{status}'" for status in sorted(map(str, COMMITTED_STATUSES)))
# The committed card-seconds and money of every budget of a check as one aggregate: the
# budgets (``b``: the period, scope, minor unit; money NULL when not counted),
# their owner teams (``o``), the reserved card-hour prices in force over the windows (``p``:
# rate periods × models, from the rate card as the statements read it) and the team's
# holding (or ended, or reclaimed) reserved allocations overlapping them (``a``), each counted
# from where its reservation usage records end (``from_at``: the latest ``period_end``, else
# its start) with the cards it held at each moment: the card changes its reclamations made
# (``c``: pools.reclamation.card_timeline.card_changes -- a shrink or an end at
# ``reclaimed_at``, an undo back at ``closed_at`` -- each clamped to its window) cut it into
# pieces (``q``: card_pieces -- before the first change its ``before``, after each its
# ``after``; without one ``card_count`` throughout), each piece's seconds taken to the whole
# second. Whole cards are summed here, money rounded half-up per allocation in the currency's
# minor units (``div`` truncates an exact ``numeric`` quotient: floor((2·s·price·10^places +
# 3,600) / 7,200) is s card-seconds at price per card-hour rounded half-up); an allocation of
# MIG slices comes back as a row of its own (``id`` not NULL), for
# :func:`pools.capacity.slices.card_share` to weigh in Python.
_FINDINGS = IdleFinding._meta.db_table
_CHANGED = f"'{IdleFindingState.RECLAIMED.value}', '{IdleFindingState.UNDONE.value}'"
_COMMITTED_SQL = f"""
WITH b AS (
  SELECT * FROM unnest(%(ids)s::int[], %(los)s::timestamptz[], %(his)s::timestamptz[],
                       %(pools)s::int[], %(models)s::int[], %(scales)s::bigint[])
             AS b(id, lo, hi, pool_id, model_id, scale)
), o AS (
  SELECT * FROM unnest(%(owner_budgets)s::int[], %(owner_teams)s::int[]) AS o(budget_id, team_id)
), p AS (
  SELECT * FROM unnest(%(price_los)s::timestamptz[], %(price_his)s::timestamptz[],
                       %(price_models)s::int[], %(prices)s::numeric[])
             AS p(lo, hi, model_id, price)
), a AS MATERIALIZED (
  SELECT a.id, a.team_id, a.pool_id, a.gpu_model_id, a.card_count, a.mig_profile, a.starts_at,
         GREATEST(a.starts_at, (
           SELECT MAX(r.period_end) FROM {UsageRecord._meta.db_table} r
            WHERE r.allocation_id = a.id AND r.source = '{UsageSource.RESERVATION.value}'
         )) AS from_at,
         a.ends_at, GREATEST(a.starts_at, %(now)s) AS priced_at
    FROM {Allocation._meta.db_table} a
   WHERE a.team_id = ANY(%(teams)s) AND a.pricing_method = '{PricingMethod.RESERVED.value}'
     AND a.status IN ({_COMMITTING}) AND a.starts_at < %(end)s AND a.ends_at > %(start)s
), c AS (
  SELECT c.allocation_id, LEAST(GREATEST(c.at, a.starts_at), a.ends_at) AS at, c.after,
         c.before, row_number() OVER (PARTITION BY c.allocation_id
                                      ORDER BY c.at, c.before, c.after) AS n
    FROM (
      SELECT f.allocation_id, f.reclaimed_at AS at, f.card_count AS before,
             f.cards_in_use AS after
        FROM {_FINDINGS} f
       WHERE f.state IN ({_CHANGED}) AND f.reclaimed_at IS NOT NULL
      UNION ALL
      SELECT f.allocation_id, f.closed_at, f.cards_in_use, f.card_count
        FROM {_FINDINGS} f
       WHERE f.state = '{IdleFindingState.UNDONE.value}' AND f.reclaimed_at IS NOT NULL
         AND f.closed_at IS NOT NULL
    ) c
    JOIN a ON a.id = c.allocation_id
), q AS (
  SELECT a.id, a.starts_at AS lo, COALESCE(c.at, a.ends_at) AS hi,
         COALESCE(c.before, a.card_count) AS cards
    FROM a LEFT JOIN c ON c.allocation_id = a.id AND c.n = 1
  UNION ALL
  SELECT c.allocation_id, c.at,
         COALESCE(LEAD(c.at) OVER (PARTITION BY c.allocation_id ORDER BY c.n), a.ends_at),
         c.after
    FROM c JOIN a ON a.id = c.allocation_id
), h AS (
  SELECT b.id AS budget_id, b.scale, a.id, a.gpu_model_id, a.mig_profile, a.priced_at,
         SUM(q.cards::bigint
             * floor(extract(epoch FROM LEAST(q.hi, b.hi))
                     - extract(epoch FROM GREATEST(q.lo, a.from_at, b.lo)))::bigint
         ) AS card_seconds
    FROM b
    JOIN o ON o.budget_id = b.id
    JOIN a ON a.team_id = o.team_id AND a.from_at < b.hi AND a.ends_at > b.lo
          AND a.from_at < a.ends_at
    JOIN q ON q.id = a.id AND GREATEST(q.lo, a.from_at, b.lo) < LEAST(q.hi, b.hi)
   WHERE (b.pool_id IS NULL OR a.pool_id = b.pool_id)
     AND (b.model_id IS NULL OR a.gpu_model_id = b.model_id)
   GROUP BY b.id, b.scale, a.id, a.gpu_model_id, a.mig_profile, a.priced_at
)
SELECT h.budget_id, CASE WHEN h.mig_profile = '' THEN NULL ELSE h.id END,
       SUM(h.card_seconds),
       SUM(div(2 * h.card_seconds * p.price * h.scale + 3600, 7200)),
       MIN(h.mig_profile), MIN(m.slug), MIN(p.price)
  FROM h
  JOIN {GpuModel._meta.db_table} m ON m.id = h.gpu_model_id
  LEFT JOIN p ON p.model_id = h.gpu_model_id AND p.lo <= h.priced_at AND h.priced_at < p.hi
 GROUP BY 1, 2
"""


def _committed_sql(
    team_ids, entries, now: datetime, prices: _ReservedPrices | None, members
) -> dict[int, tuple[Decimal, Decimal]]:
    """:func:`_committed` in one statement (:data:`_COMMITTED_SQL`)."""
    windows = [_window(status) for _, _, status in entries]
    start, end = min(lo for lo, _ in windows), max(hi for _, hi in windows)
    owners = [(key, t) for key, b, _ in entries for t in sorted(_owners(b, members))]
    periods = prices.periods(now, end) if prices is not None else []
    places = {key: minor_unit(b.currency) for key, b, _ in entries}
    priced = {key for key, b, _ in entries if b.money_limit is not None}
    params = {
        "ids": [key for key, _, _ in entries],
        "los": [lo for lo, _ in windows],
        "his": [hi for _, hi in windows],
        "pools": [b.pool_id for _, b, _ in entries],
        "models": [b.gpu_model_id for _, b, _ in entries],
        # money counted: 10^places; not counted (no money limit): NULL, which prices nothing
        "scales": [10 ** places[key] if key in priced else None for key, _, _ in entries],
        "owner_budgets": [pk for pk, _ in owners],
        "owner_teams": [t for _, t in owners],
        "price_los": [lo for lo, _, _, _ in periods],
        "price_his": [hi for _, hi, _, _ in periods],
        "price_models": [model for _, _, model, _ in periods],
        "prices": [price for _, _, _, price in periods],
        "teams": sorted(set(team_ids).union(*members.values())),
        "now": now,
        "start": start,
        "end": end,
    }
    hours = {key: Fraction(0) for key, _, _ in entries}
    units = dict.fromkeys(hours, 0)
    with connection.cursor() as cursor:
        cursor.execute(_COMMITTED_SQL, params)
        rows = cursor.fetchall()
    for budget_id, sliced, card_seconds, money, profile, slug, price in rows:
        if sliced is None:  # whole cards, summed and priced by the statement
            hours[budget_id] += Fraction(int(card_seconds), 3600)
            units[budget_id] += int(money or 0)
            continue
        held = Fraction(int(card_seconds), 3600) * card_share(profile, model_key=slug)
        hours[budget_id] += held
        if price is not None and budget_id in priced:
            units[budget_id] += _money_units(held, price, places[budget_id])
    return {pk: (_decimal(hours[pk]), Decimal(units[pk]).scaleb(-places[pk])) for pk in hours}


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


# The budgets of some teams, as one plain statement read without a queryset
# (pools.capacity.rows): the ORM took longer to build it than PostgreSQL to run it, on every
# approval (issue #29 item 7: approvals within 2x the bare transaction). The teams' own and
# their cost centres'; each with the price list's version (0 without its row) as
# ``price_list``. Which of them a request answers to is :func:`_applies`.
_BUDGETS = RowReader(Budget)


def _budgets_of(teams: list) -> list[Budget]:
    """The budgets of ``teams`` and of their cost centres, by id, each with ``price_list``
    (the price list's version)."""
    if not teams:
        return []
    team_ids = sorted({t.pk for t in teams})
    centres = sorted({t.cost_centre for t in teams if t.cost_centre})
    owner = f"b.team_id IN ({', '.join(['%s'] * len(team_ids))})"
    if centres:
        owner += (
            f" OR (b.team_id IS NULL AND b.cost_centre IN ({', '.join(['%s'] * len(centres))}))"
        )
    sql = (
        f"SELECT {_BUDGETS.columns}, COALESCE((SELECT v.version FROM "
        f"{PriceListVersion._meta.db_table} v WHERE v.id = 1), 0) FROM {Budget._meta.db_table} b "
        f"WHERE {owner} ORDER BY b.id"
    )
    return _BUDGETS.read(sql, [*team_ids, *centres], extra=("price_list",))


def _applies(budget: Budget, team, pool, gpu_model) -> bool:
    """Whether a request of ``team`` for ``pool`` × ``gpu_model`` (either ``None``: not named
    yet) answers to ``budget``: the team's own or its cost centre's; a team-wide budget always,
    one for a pool or model only when the request names it."""
    if budget.team_id is not None:
        owned = budget.team_id == team.pk
    else:
        owned = bool(team.cost_centre) and budget.cost_centre == team.cost_centre
    return (
        owned
        and budget.pool_id in (None, getattr(pool, "pk", None))
        and budget.gpu_model_id in (None, getattr(gpu_model, "pk", None))
    )


def budget_check(
    *, team, pool, gpu_model, cards: int, starts_at: datetime, ends_at: datetime,
    now: datetime | None = None,
) -> BudgetVerdict | None:  # fmt: skip
    """The most severe budget of ``team`` the request passes (ties: the first by id), or None."""
    ask = dict(team=team, pool=pool, gpu_model=gpu_model, cards=cards,
               starts_at=starts_at, ends_at=ends_at)  # fmt: skip
    return budget_checks([ask], now=now)[0]


def budget_checks(asks: list[dict], *, now: datetime | None = None) -> list[BudgetVerdict | None]:
    """:func:`budget_check` of many requests (each a dict of its keyword arguments), in their
    order, as of ``now``: the budgets, their consumption and what is committed are read once
    for all of them (the approval queue's page judges its rows in a fixed number of queries)."""
    budgets = _budgets_of([a["team"] for a in asks])
    if not budgets:
        return [None] * len(asks)
    now = now or timezone.now()
    # a budget's team, pool and model from the asks (no query each); only those it covers
    teams = {a["team"].pk: a["team"] for a in asks}
    pools = {a["pool"].pk: a["pool"] for a in asks if a["pool"] is not None}
    models = {a["gpu_model"].pk: a["gpu_model"] for a in asks if a["gpu_model"] is not None}
    for budget in budgets:
        for name, known in (("team", teams), ("pool", pools), ("gpu_model", models)):
            related = getattr(budget, f"{name}_id")
            if related is None or related in known:
                setattr(budget, name, known.get(related))
    applicable = [
        [b for b in budgets if _applies(b, a["team"], a["pool"], a["gpu_model"])] for a in asks
    ]
    pairs = [
        (b, max(a["starts_at"], now)) for a, bs in zip(asks, applicable, strict=True) for b in bs
    ]
    if not pairs:
        return [None] * len(asks)
    found = iter(budget_statuses_at(pairs, now=now))
    statuses = [[next(found) for _ in bs] for bs in applicable]
    # no rate is read when no budget has a money limit
    prices = None
    if any(b.money_limit is not None for b, _ in pairs):
        prices = _ReservedPrices(budgets[0].price_list)
    # one committed sum per budget and period, however many requests start in it
    keys: dict[tuple[int, datetime], int] = {}
    entries = []
    for (budget, _), status in zip(pairs, (s for ss in statuses for s in ss), strict=True):
        if (budget.pk, status.starts_at) not in keys:
            keys[(budget.pk, status.starts_at)] = len(entries)
            entries.append((len(entries), budget, status))
    owners = {a["team"].pk for a, bs in zip(asks, applicable, strict=True) if bs}
    committed = _committed_for(owners, entries, now, prices)
    return [
        _worst(ask, ask_statuses, prices, now, {
            s.budget.pk: committed[keys[(s.budget.pk, s.starts_at)]] for s in ask_statuses
        }) if ask_statuses else None
        for ask, ask_statuses in zip(asks, statuses, strict=True)
    ]  # fmt: skip


def _worst(ask: dict, statuses: list[BudgetStatus], prices, now: datetime, committed: dict):
    """The most severe of ``statuses`` (the budgets ``ask`` answers to, by id) it passes."""
    starts_at, ends_at, gpu_model = ask["starts_at"], ask["ends_at"], ask["gpu_model"]
    price = prices.at(gpu_model and gpu_model.pk, max(starts_at, now)) if prices else None
    worst: BudgetVerdict | None = None
    for status in statuses:
        budget = status.budget
        span = clip(starts_at, ends_at, status.starts_at, status.ends_at)
        hours = card_hours(ask["cards"], *span) if span else Decimal(0)
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


def _shown(value: Decimal, currency: str | None = None) -> str:
    """A figure of the reason as pages show numbers (:func:`pools.web.numbers.grouped`:
    thousands grouped with a narrow no-break space): card-hours half-up to 2 places
    (``1339.525`` -> ``1 339.53``), money half-up to ``currency``'s minor unit
    (:func:`billing.pricing.round_money`). ``data`` keeps the plain numbers (:func:`_plain`)."""
    if currency is None:
        return grouped(value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP), 2)
    return grouped(round_money(value, currency), minor_unit(currency))


def _plain(value: Decimal) -> str:
    """A Decimal for JSON without exponent or trailing zeros: 30.000000 → "30"."""
    return format(value.normalize(), "f")


def _verdict(
    status: BudgetStatus, name: str, dimension: Dimension, committed: Decimal, requested: Decimal
):
    budget = status.budget
    unit = "card-hours" if name == "card_hours" else dimension.unit
    currency = None if name == "card_hours" else unit

    def shown(value: Decimal) -> str:
        return _shown(value, currency)

    held = f"+ {shown(committed)} committed to approved allocations " if committed else ""
    reason = (
        f"Beyond the {budget.get_period_display().lower()} budget of {budget.owner_label} "
        f"({budget.scope_label}, {status.period:%Y-%m}): {shown(dimension.used)} {unit} used "
        f"{held}+ {shown(requested)} requested > {shown(dimension.limit)} {unit}: "
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
