"""Reads for pages, API and reports: who may see which statement, and the month reports."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

from django.db import connection
from django.db.models import Count, Exists, OuterRef, Prefetch, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from billing.charges import (
    SharedCardPeriod,
    period_cost,
    period_sums,
    record_costs,
    shared_card_splits,
    with_cost,
)
from billing.choices import TOKEN_UNITS, ChargeBasis, RateKind, UsageUnit
from billing.conf import billing_zone
from billing.generation import statements_generation
from billing.models import RateCard, Statement, StatementLine, UsageRecord
from billing.pricing import (
    next_month,
    previous_month,
    round_money,
    seconds_in_periods,
    whole_seconds,
)
from billing.rate_periods import month_currency, rate_periods
from pools.capacity.arithmetic import card_seconds_hours
from pools.capacity.generation import allocations_generation
from pools.capacity.lifecycle import CHARGED_STATUSES
from pools.capacity.models import Allocation
from pools.common.choices import IdleFindingState
from pools.common.generation import cached
from pools.inventory.models import SCHEDULABLE_CARD, SLICED_CARD, Gpu, Pool
from pools.inventory.selectors import inventory_generation
from pools.reclamation.card_timeline import card_changes, card_pieces
from pools.reclamation.models import IdleFinding
from pools.tenancy.models import Team


def statement_list(*, user) -> QuerySet[Statement]:
    """Statements the user may see: all for staff (finance, pool admins), else their teams',
    with ``line_count`` (a correlated count, computed for the rows a page keeps: a join and
    ``GROUP BY`` counted the lines of every statement before the page was chosen, and again in
    the paginator's ``COUNT(*)`` — 10,080 statements at 100,800 GPUs, 61 ms)."""
    lines = (
        StatementLine.objects.filter(statement=OuterRef("pk"))
        .order_by()
        .values("statement")
        .annotate(n=Count("id"))
        .values("n")
    )
    qs = Statement.objects.select_related("team").annotate(line_count=Coalesce(Subquery(lines), 0))
    return qs.visible_to(user)


def statement_lines(*, statement: Statement) -> QuerySet[StatementLine]:
    return statement.lines.select_related("gpu_model", "pool", "statement", "gpu__node").order_by(
        "position"
    )


def lines_by_statement(statement_ids: list[int]) -> dict[int, list[StatementLine]]:
    """Statement id -> its lines by position, with their GPU model, in one query."""
    lines: dict[int, list[StatementLine]] = defaultdict(list)
    for line in (
        StatementLine.objects.filter(statement_id__in=statement_ids)
        .select_related("gpu_model", "gpu__node", "pool")
        .order_by("statement_id", "position")
    ):
        lines[line.statement_id].append(line)
    return lines


def month_trend(*, team: Team | None, month: date, months: int = 12) -> list[dict]:
    """Statement totals for the ``months`` months ending with ``month`` (zeros where none)."""
    first = month
    for _ in range(months - 1):
        first = previous_month(first)
    qs = Statement.objects.filter(month__gte=first, month__lte=month)
    if team is not None:
        qs = qs.filter(team=team)
    # no ordering: the model's (by team name) would join every statement with its team
    totals = dict(
        qs.order_by().values("month").annotate(t=Sum("total_amount")).values_list("month", "t")
    )
    result, cursor = [], first
    while cursor <= month:
        result.append({"month": cursor, "total": totals.get(cursor) or Decimal(0)})
        cursor = next_month(cursor)
    return result


def cost_by_gpu_model(lines) -> list[dict]:
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for line in lines:
        totals[line.label or "—"] += line.amount
    return [{"label": k, "amount": v} for k, v in sorted(totals.items(), key=lambda kv: -kv[1])]


def top_allocations(*, month: date, team: Team | None = None, limit: int = 10) -> list[dict]:
    """The month's reserved usage records of allocations by what the statement charges for
    them, the ``limit`` dearest (ties: lowest allocation id first): ``{"allocation",
    "card_hours", "amount", "currency"}``, ``amount`` = the record's card-seconds at the
    reserved price of each rate period they fall in (:mod:`billing.charges`), rounded once.

    Ranked in SQL (:func:`billing.charges.with_cost`: by amount, then allocation id, as the
    rows are sorted here) without loading the month's records: the ``limit`` first of those
    that lie inside one rate period, beside the few that straddle a rate change
    (:func:`billing.charges.record_costs`). Three queries."""
    periods = rate_periods(month=month, zone=billing_zone())
    currency = month_currency(periods)
    records = UsageRecord.objects.filter(
        month=month, basis=ChargeBasis.RESERVED, unit=UsageUnit.CARD_SECONDS,
        allocation__isnull=False,
    )  # fmt: skip
    if team is not None:
        records = records.filter(team=team)
    ranked = with_cost(records, periods, RateKind.GPU_RESERVED, currency).order_by(
        "-units", "allocation_id"
    )
    costs = dict(ranked.values_list("pk", "cost")[:limit])
    costs.update(record_costs(records, periods, RateKind.GPU_RESERVED))
    amounts = {pk: round_money(card_seconds_hours(cost), currency) for pk, cost in costs.items()}
    chosen = UsageRecord.objects.filter(pk__in=list(amounts)).select_related(
        "allocation__team", "allocation__pool", "allocation__gpu_model"
    )
    rows = [
        {
            "allocation": record.allocation,
            "card_hours": card_seconds_hours(record.quantity),
            "amount": amounts[record.pk],
            "currency": currency,
        }
        for record in chosen
    ]
    rows.sort(key=lambda r: (-r["amount"], r["allocation"].pk))
    return rows[:limit]


@dataclass(frozen=True)
class IdleCost:
    """One pool's month, all amounts in the rate card's currency at the reserved rate:
    ``idle_cost = capacity_cost − allocated_cost − used_outside_cost``; ``utilisation`` is
    (allocated + used outside) / capacity in per cent, ``None`` without priced capacity.
    ``allocated_cost`` is every card allocations held: their granted cards (the floor of an
    elastic one) and the elastic cards charged above the floor in the pool (burst records)."""

    pool: Pool
    capacity_cost: Decimal
    allocated_cost: Decimal
    used_outside_cost: Decimal
    idle_cost: Decimal
    utilisation: Decimal | None
    currency: str = "EUR"  # the month's rate card's (EUR when none prices the month)
    counted_to: datetime | None = None  # capacity's hours end here: the month's end or now


def pool_idle_costs(*, month: date) -> list[IdleCost]:
    """Showback per pool: capacity × hours × reserved rate − what allocations held − the used
    card-hours of jobs outside any allocation, per model, all at the reserved rate.

    Capacity is the pool's current inventory of cards the schedulers can hand out: the capacity
    invariant's one rule (:data:`~pools.inventory.models.SCHEDULABLE_CARD`, or in MIG mode
    :data:`~pools.inventory.models.SLICED_CARD`): node up — not down, drained, in maintenance
    or unknown — model recognised, card not in error. A card nobody can be given is not idle
    capacity. Allocations of every pricing method count as held for their wall time inside the
    month, so the jobs inside one priced on use (used records naming it) are in its held time
    and not counted again, bar what they used beyond its cards. An elastic allocation's cards
    above its floor, borrowed from its pool's free cards, are held too: the month's charged
    ``burst`` card-seconds (:func:`_elastic_burst_seconds`) count as allocated in its pool
    (cards it placed in a burst pool are that pool's, which has no idle cost). Used card-hours
    outside allocations are :func:`_used_outside_costs` plus what shared cards' tenants are charged
    (:func:`shared_card_splits`), so a shared card's part of the pool's idle cost is its idle
    remainder.

    Burst pools (``Pool.burst``: rented cloud capacity, paid per use) carry no idle cost and
    are left out: their cards cost nothing while nobody uses them. The hours counted run from
    the month's start to its end or to now, whichever comes first, so the current month's
    capacity is only the hours that have happened (as its usage is).
    """
    periods = rate_periods(month=month, zone=billing_zone())
    currency = month_currency(periods)
    now = timezone.now()
    start, end = periods[0].start, min(periods[-1].end, now)
    if end <= start:  # a month still to come: nothing has happened yet
        return []
    bounds = [(max(p.start, start), min(p.end, end)) for p in periods]
    pools = {pool.pk: pool for pool in Pool.objects.filter(burst=False)}
    capacity = {key: n for key, n in _schedulable_cards().items() if key[0] in pools}
    month_seconds = seconds_in_periods(start, end, bounds)
    full: dict[int, Decimal] = defaultdict(Decimal)
    for (pool_id, model_id), cards in capacity.items():
        seconds = [Decimal(cards * s) for s in month_seconds]
        full[pool_id] += period_cost(seconds, periods, RateKind.GPU_RESERVED, model_id)
    held: dict[int, Decimal] = defaultdict(Decimal)
    for (pool_id, model_id), seconds in _held_card_seconds(
        start, end, bounds, ended=periods[-1].end <= now
    ).items():
        held[pool_id] += period_cost(seconds, periods, RateKind.GPU_RESERVED, model_id)
    for (pool_id, model_id), seconds in _elastic_burst_seconds(periods, month).items():
        held[pool_id] += period_cost(seconds, periods, RateKind.GPU_RESERVED, model_id)
    outside = _used_outside_costs(periods, month, capacity)
    shared, _ = shared_card_splits(month=month, periods=periods)
    for card in shared:  # a shared card's tenants used it outside any allocation
        if card.split is not None and card.gpu.node.pool_id is not None:
            outside[card.gpu.node.pool_id] += sum(p.amount for p in card.split.parts)
    result = []
    shown = [pools[pk] for pk in set(full) | set(held) if pk in pools]
    for pool in sorted(shown, key=lambda pool: (pool.name, pool.pk)):
        cap, used, other = full[pool.pk], held[pool.pk], outside[pool.pk]
        result.append(
            IdleCost(
                pool=pool,
                capacity_cost=round_money(cap, currency),
                allocated_cost=round_money(used, currency),
                used_outside_cost=round_money(other, currency),
                idle_cost=round_money(cap - used - other, currency),
                utilisation=((used + other) / cap * 100).quantize(Decimal("0.1")) if cap else None,
                currency=currency,
                counted_to=end,
            )
        )
    return result


_SCHEDULABLE: dict[int, dict[tuple[int, int], int]] = {}
"""The newest inventory generation's :func:`_schedulable_cards` read in this process."""


def _schedulable_cards() -> dict[tuple[int, int], int]:
    """(pool, GPU model) -> the pool's cards the schedulers can hand out: the capacity
    invariant's one rule (:data:`~pools.inventory.models.SCHEDULABLE_CARD`, or in MIG mode
    :data:`~pools.inventory.models.SLICED_CARD`), burst pools among them. Kept per inventory
    generation (:func:`pools.inventory.selectors.inventory_generation`, which every write of
    GPUs, nodes, driver groups and GPU models changes), as the pool's node kinds are: one
    small read while the inventory stands still, not a count over every card of the fleet."""
    generation = inventory_generation()
    if generation is not None and generation in _SCHEDULABLE:
        return _SCHEDULABLE[generation]
    capacity: dict[tuple[int, int], int] = defaultdict(int)
    for pool_id, model_id, n in (
        Gpu.objects.filter(SCHEDULABLE_CARD | SLICED_CARD, node__pool__isnull=False)
        .values_list("node__pool_id", "gpu_model_id")
        .annotate(n=Count("id"))
        .order_by()
    ):
        capacity[(pool_id, model_id)] += n
    if generation is not None:
        _SCHEDULABLE.clear()
        _SCHEDULABLE[generation] = dict(capacity)
    return dict(capacity)


def _elastic_burst_seconds(periods, month) -> dict[tuple[int, int], list[Decimal]]:
    """(pool, GPU model) -> card-seconds per rate period that elastic allocations of the pool
    were charged above their floor in ``month``: the ``burst`` usage records
    (:func:`billing.services.usage_import.usage_import_elastic_burst`, one per allocation and
    month, the cards its scale events held above the floor less those placed in a burst pool),
    by the allocation's pool. The floor is already in :func:`_held_card_seconds`; the records
    are what the statement charges, so the idle cost and the bill count the same card-hours.
    One ``GROUP BY`` (:func:`billing.charges.period_sums`) by allocation, then the pools of the
    few elastic allocations it names, read only when there are some (a past month's page with
    no burst reads no allocation: its held card-seconds come from the cache)."""
    records = UsageRecord.objects.filter(
        month=month, basis=ChargeBasis.BURST, unit=UsageUnit.CARD_SECONDS,
        allocation__isnull=False, gpu_model__isnull=False,
    )  # fmt: skip
    sums, _ = period_sums(records, periods, ("allocation_id", "gpu_model_id"))
    if not sums:
        return {}
    pool_of = dict(
        Allocation.objects.filter(pk__in={a for a, _ in sums}).values_list("pk", "pool_id")
    )
    out: dict[tuple[int, int], list[Decimal]] = defaultdict(lambda: [Decimal(0)] * len(periods))
    for (allocation_id, model_id), seconds in sums.items():
        key = (pool_of[allocation_id], model_id)
        out[key] = [a + b for a, b in zip(out[key], seconds, strict=True)]
    return dict(out)


def _used_outside_costs(periods, month, capacity) -> dict[int, Decimal]:
    """Per pool: the month's used card-hours outside any allocation (``basis`` used, in
    card-seconds), at the reserved rate of the rate periods they fall in, as capacity is
    (:func:`billing.charges.period_sums` per GPU model: one ``GROUP BY``, not a row per job).

    A used record naming an allocation is usage (a Slurm job, a Kubernetes day's steps) an
    import found inside an allocation priced on use (:mod:`billing.reserved_cover`): that
    allocation's held time is already allocated, so the usage is not counted again here —
    except what it and the allocation's other usage ran beyond the allocation's cards at any
    moment (or outside its window, or of an allocation no longer charged): those card-seconds
    ran on other cards and are added (:func:`_beyond_on_use`).

    Such a record names a team and a GPU model but no pool (Slurm accounting gives a partition,
    the Prometheus meter a node, and neither is kept on the record), so it is attributed by its
    model: split over the pools holding that model's counted cards (``capacity``, (pool, model)
    → cards) in proportion to those cards — all of it to the one pool when, as usual, one pool
    holds the model. A model no pool holds now is netted nowhere."""
    holders: dict[int, dict[int, int]] = defaultdict(dict)
    for (pool_id, model_id), cards in capacity.items():
        holders[model_id][pool_id] = cards
    records = UsageRecord.objects.filter(
        month=month, basis=ChargeBasis.USED, unit=UsageUnit.CARD_SECONDS, gpu_model__isnull=False
    )
    sums, _ = period_sums(records.filter(allocation__isnull=True), periods, ("gpu_model_id",))
    for model_id, seconds in _beyond_on_use(records.filter(allocation__isnull=False), periods):
        sums[(model_id,)] = [a + b for a, b in zip(sums[(model_id,)], seconds, strict=True)]
    netted: dict[int, Decimal] = defaultdict(Decimal)
    for (model_id,), seconds in sums.items():
        if model_id not in holders:
            continue
        cost = period_cost(seconds, periods, RateKind.GPU_RESERVED, model_id)
        total = sum(holders[model_id].values())
        for pool_id, cards in holders[model_id].items():
            netted[pool_id] += cost * cards / total
    return netted


def _beyond_on_use(records, periods) -> list[tuple[int, list[Decimal]]]:
    """``(GPU model id, card-seconds per rate period)`` that the used ``records`` naming an
    allocation ran beyond it: at each moment, the cards of its records in progress (a record's
    cards: its quantity / its whole seconds) less the cards the allocation held then (its card
    timeline, :func:`pools.reclamation.card_timeline.card_pieces`, × its card share; none
    outside its window or when its status is not charged), when more; × the seconds, split
    over ``periods``. A Kubernetes record's cards are its steps' average over its stretch, so
    a peak evened out by a lull inside one day's stretch is not seen: this never counts more
    than the steps would, at a steady allocation. Two queries; the allocations' records are
    few (their jobs, their days)."""
    by_allocation: dict[int, list[tuple[datetime, datetime, Fraction]]] = defaultdict(list)
    for allocation_id, quantity, start, end in records.values_list(
        "allocation_id", "quantity", "period_start", "period_end"
    ):
        seconds = whole_seconds(start, end)
        if seconds > 0 and quantity > 0:
            by_allocation[allocation_id].append((start, end, Fraction(quantity) / seconds))
    if not by_allocation:
        return []
    allocations = Allocation.objects.filter(pk__in=list(by_allocation)).select_related("gpu_model")
    changes = card_changes(list(by_allocation))
    bounds = [(p.start, p.end) for p in periods]
    out: list[tuple[int, list[Decimal]]] = []
    for a in allocations.order_by("id"):
        held = []
        if a.status in CHARGED_STATUSES:
            held = [(p.start, p.end, Fraction(p.cards) * a.card_share)
                    for p in card_pieces(a, changes.get(a.pk, ()))]  # fmt: skip
        seconds = [Fraction(0)] * len(bounds)
        for lo, hi, cards in _steps(by_allocation[a.pk], held):
            for index, s in enumerate(seconds_in_periods(lo, hi, bounds)):
                seconds[index] += cards * s
        out.append((a.gpu_model_id, [Decimal(s.numerator) / s.denominator for s in seconds]))
    return out


def _steps(used, held):
    """``(start, end, cards)`` of the stretches where the ``used`` intervals (``(start, end,
    cards)``, overlapping freely) add up to more cards than the ``held`` ones (the same shape):
    the cards beyond. One sweep over the intervals' edges (pure)."""
    deltas: dict[datetime, Fraction] = defaultdict(Fraction)
    for sign, intervals in ((1, used), (-1, held)):
        for start, end, cards in intervals:
            deltas[start] += sign * cards
            deltas[end] -= sign * cards
    beyond, edges = Fraction(0), sorted(deltas)
    for lo, hi in zip(edges, edges[1:], strict=False):
        beyond += deltas[lo]
        if beyond > 0:
            yield lo, hi, beyond


HELD_CACHE_S = 15 * 60
"""How long a past month's held card-seconds are kept at most, whatever the allocations'
generation says (a writer that forgot :func:`pools.capacity.generation.allocations_changed` is
late by this, as the admin dashboard's plan is)."""


def _held_card_seconds(start, end, bounds, *, ended: bool) -> dict[tuple[int, int], list[Decimal]]:
    """(pool, GPU model) -> card-seconds its charged allocations held in each rate period of
    ``[start, end)`` (``bounds``: the periods clipped to it), every pricing method alike.

    A window that has ended (``ended``: a past month, whose ``end`` is its last rate period's)
    is kept in the shared cache under the allocations' generation (:mod:`pools.capacity.
    generation`, which every write of an allocation -- a reclamation or its undo among them --
    replaces), the database's path and the window, at most :data:`HELD_CACHE_S`: at 100,800
    GPUs its two queries over the month's ~100,000 allocations took ~100 ms of the finance
    month's page (issue #29 item 7). The current month's window ends now, a new key each time,
    so it is summed afresh; so is any window inside a transaction
    (:func:`pools.common.generation.cached`).

    A MIG slice holds its share of a card (:attr:`pools.capacity.models.Allocation.card_share`)
    and a reclaimed allocation the cards of its timeline (:mod:`pools.reclamation.card_timeline`),
    read in Python; on PostgreSQL the others — nearly all — are summed by
    :data:`_HELD_SQL` in one statement (``tests/billing/test_one_pricing_path.py`` checks the
    two agree)."""
    if not ended:
        return _held_card_seconds_read(start, end, bounds)
    # the vendor names the path (one SQL statement, or every allocation read), which the tests
    # compare; the window and the rate periods' bounds name what is summed
    window = ",".join(f"{a.isoformat()}/{b.isoformat()}" for a, b in [(start, end), *bounds])
    key = (  # a digest of the window: a cache key stays under 250 characters
        f"billing:held:{allocations_generation()}:{connection.vendor}:"
        f"{hashlib.sha256(window.encode()).hexdigest()}"
    )
    return cached(
        key,
        lambda: _held_card_seconds_read(start, end, bounds),
        HELD_CACHE_S,
        fits=lambda found: isinstance(found, dict),
    )


def _held_card_seconds_read(start, end, bounds) -> dict[tuple[int, int], list[Decimal]]:
    """:func:`_held_card_seconds` read from the database."""
    held: dict[tuple[int, int], list[Decimal]] = defaultdict(lambda: [Decimal(0)] * len(bounds))
    allocations = Allocation.objects.filter(status__in=CHARGED_STATUSES).overlapping(start, end)
    if connection.vendor == "postgresql":
        for pool_id, model_id, index, seconds in _held_unchanged(start, end, bounds):
            held[(pool_id, model_id)][index] += Decimal(seconds)
        changed = IdleFinding.objects.filter(
            allocation_id=OuterRef("pk"), state__in=_CARD_CHANGES, reclaimed_at__isnull=False
        )
        allocations = allocations.filter(Exists(changed) | ~Q(mig_profile=""))
    allocations = list(allocations.select_related("gpu_model"))
    changes = card_changes(a.pk for a in allocations)
    for a in allocations:
        share = a.card_share
        for piece in card_pieces(a, changes.get(a.pk, ())):
            cards = Decimal(piece.cards * share.numerator) / share.denominator
            seconds = seconds_in_periods(max(piece.start, start), min(piece.end, end), bounds)
            for index, s in enumerate(seconds):
                held[(a.pool_id, a.gpu_model_id)][index] += cards * s
    return dict(held)  # a defaultdict's factory (a lambda) cannot be pickled into the cache


_CARD_CHANGES = [IdleFindingState.RECLAIMED.value, IdleFindingState.UNDONE.value]
"""Finding states whose ``reclaimed_at`` changed an allocation's cards (what
:func:`pools.reclamation.card_timeline.card_changes` reads)."""

_HELD_SQL = """
WITH period(idx, starts, ends) AS (VALUES {values})
SELECT a.pool_id, a.gpu_model_id, period.idx, SUM(a.card_count * FLOOR(EXTRACT(EPOCH FROM
       LEAST(a.ends_at, period.ends) - GREATEST(a.starts_at, period.starts))))
  FROM {allocation} a
  JOIN period ON period.starts < a.ends_at AND period.ends > a.starts_at
 WHERE a.status = ANY(%s) AND a.starts_at < %s AND a.ends_at > %s AND a.mig_profile = ''
   AND NOT EXISTS (SELECT 1 FROM {finding} f WHERE f.allocation_id = a.id
                   AND f.state = ANY(%s) AND f.reclaimed_at IS NOT NULL)
 GROUP BY 1, 2, 3
"""
"""Whole card-seconds per pool, GPU model and rate period of the allocations whose cards never
changed (``FLOOR`` of the overlap's seconds, as :func:`billing.pricing.whole_seconds`)."""


def _held_unchanged(start, end, bounds) -> list[tuple[int, int, int, int]]:
    """``(pool, GPU model, period index, card-seconds)`` rows of :data:`_HELD_SQL`."""
    rows = [(i, a, b) for i, (a, b) in enumerate(bounds) if b > a]
    values = ", ".join(["(%s::int, %s::timestamptz, %s::timestamptz)"] * len(rows))
    sql = _HELD_SQL.format(
        values=values, allocation=Allocation._meta.db_table, finding=IdleFinding._meta.db_table
    )
    args = [v for row in rows for v in row]
    args += [[str(x) for x in CHARGED_STATUSES], end, start, _CARD_CHANGES]
    with connection.cursor() as cursor:
        cursor.execute(sql, args)
        return cursor.fetchall()


CHART_TEAMS = 10
"""The finance month's cost-by-team chart names this many dearest teams and sums the rest
into one bar (1,600 bars tell a reader nothing, and cost 20 ms to build at fleet size)."""


def finance_month(*, month: date) -> dict:
    """Every team's statement of the month (a queryset, by team name), its lines (a queryset,
    by team name and position), and the month's sums made in the database: total, count of
    statements and of lines, per cost centre, by GPU / served model, and by team (the
    :data:`CHART_TEAMS` dearest by total, ties by name, then one "N other teams" item holding
    the rest) -- the sums kept per statements' generation (:func:`_finance_sums`)."""
    statements = (
        Statement.objects.filter(month=month).select_related("team").order_by("team__name", "pk")
    )
    # Of the rows a line names, only what the lines table writes: a GPU model's whole row is
    # 40 columns, with JSON to parse, on each of the page's 100 lines. The card and its node
    # are read for the lines of the page only (one more query): joined to every line of the
    # month before the page's were picked, they hashed every card of the fleet (the page's
    # lines 2,723 -> 923 buffers at 100,800 GPUs and 20,160 lines).
    lines = (
        StatementLine.objects.filter(statement__month=month)
        .select_related("gpu_model", "statement__team")
        .prefetch_related(
            Prefetch(
                "gpu", queryset=Gpu.objects.select_related("node").only("index", "node__hostname")
            )
        )
        .only(
            *(f.name for f in StatementLine._meta.concrete_fields),
            "gpu_model__name",
            "statement__currency",
            "statement__team__name",
        )
        .order_by("statement__team__name", "statement_id", "position")
    )
    return {"statements": statements, "lines": lines, **_finance_sums(month, statements)}


FINANCE_CACHE_S = 15 * 60
"""How long a month's statement sums are kept at most, whatever the statements' generation
says (a writer that forgot :func:`billing.generation.statements_changed` is late by this)."""


def _finance_sums(month: date, statements: QuerySet[Statement]) -> dict:
    """The finance month's sums of ``statements`` (the month's) and its lines, as
    :func:`finance_month` returns them: ``statement_count``, ``line_count``, ``total``,
    ``currency``, ``by_cost_centre``, ``by_team``, ``by_gpu_model``. Six queries, or one (the
    inventory's generation) when kept: in the shared cache under the statements' generation
    (:mod:`billing.generation`, which every statement write and team save replaces) and the
    inventory's (GPU model names label the sums), at most :data:`FINANCE_CACHE_S`. At 100,800
    GPUs the six took ~120 ms of the page under load (issue #29 item 7). Not kept where the
    inventory has no generation (SQLite), nor inside a transaction
    (:func:`pools.common.generation.cached`)."""
    inventory = inventory_generation()
    if inventory is None:
        return _finance_sums_read(month, statements)
    return cached(
        f"billing:finance:{statements_generation()}:{inventory}:{month.isoformat()}",
        lambda: _finance_sums_read(month, statements),
        FINANCE_CACHE_S,
        fits=lambda found: isinstance(found, dict),
    )


def _finance_sums_read(month: date, statements: QuerySet[Statement]) -> dict:
    """:func:`_finance_sums` read from the database (six queries)."""
    sums = statements.aggregate(total=Sum("total_amount"), count=Count("pk"))
    by_centre = (
        statements.values("cost_centre")
        .annotate(amount=Sum("total_amount"))
        .order_by("cost_centre")
        .values_list("cost_centre", "amount")
    )
    centres: dict[str, Decimal] = defaultdict(Decimal)
    for centre, amount in by_centre:
        centres[centre or "—"] += amount
    top = list(
        statements.order_by("-total_amount", "team__name", "pk").values_list(
            "team__name", "total_amount"
        )[:CHART_TEAMS]
    )
    return {
        "statement_count": sums["count"],
        "total": sums["total"] or Decimal(0),
        "currency": statements.values_list("currency", flat=True).first(),
        "by_cost_centre": sorted(centres.items()),
        "by_team": _by_team(top, sums["count"], sums["total"] or Decimal(0)),
        "by_gpu_model": _cost_by_model(month),
        "line_count": StatementLine.objects.filter(statement__month=month).count(),
    }


def _by_team(top: list[tuple[str, Decimal]], count: int, total: Decimal) -> list[dict]:
    """The cost-by-team chart's items: the ``top`` (name, amount) pairs, then, when ``count``
    statements are more, one "N other teams" bar holding ``total`` minus the named bars."""
    by_team = [{"label": name, "amount": amount} for name, amount in top]
    others = count - len(top)
    if others > 0:
        rest = total - sum((amount for _, amount in top), Decimal(0))
        by_team.append({"label": f"{others} other teams", "amount": rest})
    return by_team


def finance_month_so_far(previews: list[tuple[Statement, list[StatementLine]]]) -> dict:
    """The finance month's data (:func:`finance_month`'s keys) for the month in progress, from
    every team's unsaved statement preview and its lines
    (:func:`billing.services.statements.statements_preview_month`): lists, not querysets;
    the sums made here, as the stored month's are in the database. No query."""
    statements = [s for s, _ in previews]
    lines = [line for _, team_lines in previews for line in team_lines]
    total = sum((s.total_amount for s in statements), Decimal(0))
    centres: dict[str, Decimal] = defaultdict(Decimal)
    for s in statements:
        centres[s.cost_centre or "—"] += s.total_amount
    dearest = sorted(statements, key=lambda s: (-s.total_amount, s.team.name))[:CHART_TEAMS]
    models: dict[str, Decimal] = defaultdict(Decimal)
    for line in lines:
        name = line.gpu_model.name if line.gpu_model_id else None
        models[_model_label(line.basis, name, line.served_model)] += line.amount
    return {
        "statements": statements,
        "lines": lines,
        "statement_count": len(statements),
        "total": total,
        "currency": statements[0].currency if statements else None,
        "by_cost_centre": sorted(centres.items()),
        "by_team": _by_team(
            [(s.team.name, s.total_amount) for s in dearest], len(statements), total
        ),  # fmt: skip
        "by_gpu_model": [
            {"label": k, "amount": v} for k, v in sorted(models.items(), key=lambda kv: -kv[1])
        ],
        "line_count": len(lines),
    }


def _model_label(basis: str, gpu_model_name: str | None, served_model: str) -> str:
    """A cost-by-model bar's label: storage and egress named as the team pages name them, else
    the GPU model's or served model's name ("—" for neither)."""
    if basis in (ChargeBasis.STORAGE, ChargeBasis.EGRESS):
        return ChargeBasis(basis).label
    return gpu_model_name or served_model or "—"


def _cost_by_model(month: date) -> list[dict]:
    """The month's statement lines summed per GPU model (or served model; storage and egress
    named as the team pages name them), dearest first."""
    by_model = (
        StatementLine.objects.filter(statement__month=month)
        .values("gpu_model__name", "served_model", "basis")
        .annotate(amount=Sum("amount"))
        .order_by()
    )
    models: dict[str, Decimal] = defaultdict(Decimal)
    for row in by_model:
        models[_model_label(row["basis"], row["gpu_model__name"], row["served_model"])] += row[
            "amount"
        ]
    return [{"label": k, "amount": v} for k, v in sorted(models.items(), key=lambda kv: -kv[1])]


def tokens_toward_quota(*, team_id: int, month: date) -> dict[str, int]:
    """Tokens a team used in ``month`` that count toward a token quota, by served model.

    Input (cached included) plus output tokens, counted once (C29). Tokens a gateway replayed
    from its cache (basis ``replayed``) count only in rate periods whose card says
    ``replayed_tokens_count_to_quota``; unmetered requests carry no tokens and add nothing.
    """
    periods = rate_periods(month=month, zone=billing_zone())
    counted = {p.card_id for p in periods if p.card_id is not None} & set(
        RateCard.objects.filter(replayed_tokens_count_to_quota=True).values_list("id", flat=True)
    )
    totals: dict[str, int] = defaultdict(int)
    rows = UsageRecord.objects.filter(
        team_id=team_id,
        month=month,
        basis__in=(ChargeBasis.TOKENS, ChargeBasis.REPLAYED),
        unit__in=TOKEN_UNITS,
    ).values_list("served_model", "basis", "period_start", "quantity")
    for served, basis, at, quantity in rows:
        if basis == ChargeBasis.REPLAYED:
            period = next((p for p in periods if p.start <= at < p.end), None)
            if period is None or period.card_id not in counted:
                continue
        totals[served] += int(quantity)
    return dict(totals)


@dataclass(frozen=True)
class SharedCardIdle:
    """A shared card's rate period as the idle-cost page shows it: the card's card-hours and
    amount, each tenant's ``(team, card-hours, share, amount)``, and the idle remainder's
    card-hours and amount (``None``, unknown, when the card could not be split: ``problem``)."""

    card: SharedCardPeriod
    card_hours: Decimal
    tenants: list[tuple[Team, Decimal, Decimal, Decimal]]
    idle_card_hours: Decimal | None
    idle_amount: Decimal | None


def _hours(card_seconds: Fraction) -> Decimal:
    """Card-seconds (a fraction) as card-hours to 6 places, half-up (display only)."""
    return card_seconds_hours(Decimal(card_seconds.numerator) / card_seconds.denominator).quantize(
        Decimal("0.000001"), ROUND_HALF_UP
    )


def shared_card_idle(*, month: date) -> tuple[list[SharedCardIdle], str]:
    """Every shared card of ``month`` per rate period (:func:`shared_card_splits`) with its
    tenants' teams and its idle remainder, by node and card; and the month's currency."""
    cards, currency = shared_card_splits(month=month)
    teams = Team.objects.in_bulk({t for c in cards for t in c.tenants})
    rows = []
    for card in cards:
        window = Fraction(int((card.period.end - card.period.start).total_seconds()))
        split = card.split
        if split is None:
            rows.append(SharedCardIdle(card, _hours(window), [], None, None))
            continue
        tenants = [
            (teams[p.tenant], _hours(p.card_seconds), _share(p.share), p.amount)
            for p in split.parts
        ]
        rows.append(SharedCardIdle(card, _hours(window), tenants, _hours(split.idle_seconds),
                                   split.idle_amount))  # fmt: skip
    return rows, currency


def _share(value: Fraction) -> Decimal:
    """A share of a card as a fraction to 6 places (``1/3`` -> ``0.333333``)."""
    return (Decimal(value.numerator) / value.denominator).quantize(
        Decimal("0.000001"), ROUND_HALF_UP
    )
