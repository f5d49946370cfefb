"""Reads for pages, API and reports: who may see which statement, and the month reports."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

from django.db import connection
from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from billing.choices import TOKEN_UNITS, ChargeBasis, RateKind, ShareBasis, UsageUnit
from billing.conf import billing_zone, default_currency
from billing.models import RateCard, SharedCardUse, Statement, StatementLine, UsageRecord
from billing.pricing import hours_between, minor_unit, next_month, previous_month, round_money
from billing.services.rates import RatePeriod, price_for, rate_periods
from billing.shared_cards import (
    CardOverShared,
    CardSplit,
    CardUse,
    card_split,
    replicas_fraction,
    utilisation_fraction,
)
from pools.capacity.arithmetic import card_seconds_hours, clip
from pools.capacity.lifecycle import CHARGED_STATUSES
from pools.capacity.models import Allocation
from pools.choices import IdleFindingState
from pools.inventory.models import SCHEDULABLE_CARD, SLICED_CARD, Gpu, Pool
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
    totals = dict(qs.values("month").annotate(t=Sum("total_amount")).values_list("month", "t"))
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


def _price_over(periods: list[RatePeriod], kind: str, gpu_model_id: int, start, end) -> Decimal:
    """Σ hours of ``[start, end)`` in each period × that period's price (0 where unpriced)."""
    total = Decimal(0)
    for period in periods:
        span = clip(start, end, period.start, period.end)
        price = period.prices.get((kind, gpu_model_id, ""))
        if span is not None and price is not None:
            total += hours_between(*span) * price
    return total


def top_allocations(*, month: date, team: Team | None = None, limit: int = 10) -> list[dict]:
    """Reserved allocations by their cost in the month (cards × hours × reserved price), the
    ``limit`` dearest (ties: lowest allocation id first).

    On PostgreSQL the allocations whose cards never changed are priced and ranked in one
    statement (:data:`_TOP_RESERVED_SQL`); the few that reclamation shrank are priced here from
    their card timeline and merged in, so the page does not load every record of the month.
    """
    zone = billing_zone()
    periods = rate_periods(month=month, zone=zone)
    currency = next((p.currency for p in periods if p.currency), None) or "EUR"
    records = UsageRecord.objects.filter(
        month=month, basis=ChargeBasis.RESERVED, allocation__isnull=False
    )
    if team is not None:
        records = records.filter(team=team)
    costs: dict[int, Decimal] = {}
    if connection.vendor == "postgresql":
        costs.update(_top_unchanged_costs(month, team, periods, currency, limit))
        # MIG slice allocations are priced here too: their share is the Python rule's
        records = records.filter(
            Exists(_card_changes_of(OuterRef("allocation_id"))) | ~Q(allocation__mig_profile="")
        )
    records = list(records.select_related("allocation"))
    changes = card_changes(r.allocation_id for r in records)
    for record in records:
        costs[record.pk] = _reserved_cost(record, periods, changes.get(record.allocation_id, ()))
    amounts = {pk: round_money(cost, currency) for pk, cost in costs.items()}
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


def _reserved_cost(record: UsageRecord, periods: list[RatePeriod], changes) -> Decimal:
    """A reserved record's cost: each piece of its allocation's card timeline inside the
    record's period, priced over the rate periods it spans; a MIG slice at its share of a card
    (:attr:`pools.capacity.models.Allocation.card_share`)."""
    share = record.allocation.card_share
    return sum(
        (
            piece.cards * _price_over(periods, RateKind.GPU_RESERVED, record.gpu_model_id, *span)
            for piece in card_pieces(record.allocation, changes)
            if (span := clip(piece.start, piece.end, record.period_start, record.period_end))
        ),
        Decimal(0),
    ) * share.numerator / share.denominator  # fmt: skip


def _card_changes_of(allocation_id):
    """Findings that changed an allocation's cards (what :func:`card_changes` reads)."""
    return IdleFinding.objects.filter(
        allocation_id=allocation_id,
        state__in=[IdleFindingState.RECLAIMED, IdleFindingState.UNDONE],
        reclaimed_at__isnull=False,
    )


def _price_rows(periods: list[RatePeriod], kind: str) -> tuple[str, list]:
    """``VALUES`` rows ``(starts, ends, model, price)`` of the ``kind`` prices of each period,
    for the SQL below; ``("", [])`` when nothing is priced."""
    rows = [
        (p.start, p.end, model_id, price)
        for p in periods
        for (k, model_id, _served), price in p.prices.items()
        if k == kind and model_id is not None
    ]
    values = ", ".join(["(%s::timestamptz, %s::timestamptz, %s::bigint, %s::numeric)"] * len(rows))
    return values, [v for row in rows for v in row]


# Σ cards × whole seconds of overlap × price, the arithmetic of _price_over (whole seconds, as
# pricing.hours_between counts them) left in the database; divided by 3600 s/h afterwards.
_SECONDS = "FLOOR(EXTRACT(EPOCH FROM ({end} - {start})))"

_TOP_RESERVED_SQL = """
WITH price(starts, ends, model, price) AS (VALUES {values})
SELECT r.id, COALESCE(SUM(a.card_count * {seconds} * price.price), 0) AS cost
  FROM {usage} r
  JOIN {allocation} a ON a.id = r.allocation_id
  LEFT JOIN price ON price.model = r.gpu_model_id
       AND price.starts < LEAST(r.period_end, a.ends_at)
       AND price.ends > GREATEST(r.period_start, a.starts_at)
 WHERE r.month = %s AND r.basis = %s {team} AND a.mig_profile = ''
   AND NOT EXISTS (SELECT 1 FROM {finding} f WHERE f.allocation_id = a.id
                   AND f.state = ANY(%s) AND f.reclaimed_at IS NOT NULL)
 GROUP BY r.id, a.id
 ORDER BY ROUND(COALESCE(SUM(a.card_count * {seconds} * price.price), 0) / 3600, %s) DESC, a.id
 LIMIT %s
"""  # fmt: skip


def _top_unchanged_costs(month, team, periods, currency, limit) -> dict[int, Decimal]:
    values, params = _price_rows(periods, RateKind.GPU_RESERVED)
    if not values:  # nothing priced: every record costs 0, the lowest ids come first
        values, params = "(NULL::timestamptz, NULL::timestamptz, NULL::bigint, NULL::numeric)", []
    seconds = _SECONDS.format(
        start="GREATEST(r.period_start, a.starts_at, price.starts)",
        end="LEAST(r.period_end, a.ends_at, price.ends)",
    )
    sql = _TOP_RESERVED_SQL.format(
        values=values,
        seconds=seconds,
        usage=UsageRecord._meta.db_table,
        allocation=Allocation._meta.db_table,
        finding=IdleFinding._meta.db_table,
        team="AND r.team_id = %s" if team is not None else "",
    )
    args = [*params, month, ChargeBasis.RESERVED.value]
    args += [team.pk] if team is not None else []
    args += [[IdleFindingState.RECLAIMED.value, IdleFindingState.UNDONE.value]]
    args += [minor_unit(currency), limit]
    with connection.cursor() as cursor:
        cursor.execute(sql, args)
        return {pk: card_seconds_hours(Decimal(cost)) for pk, cost in cursor.fetchall()}


@dataclass(frozen=True)
class IdleCost:
    """One pool's month, all amounts in the rate card's currency at the reserved rate:
    ``idle_cost = capacity_cost − allocated_cost − used_outside_cost``; ``utilisation`` is
    (allocated + used outside) / capacity in per cent, ``None`` without priced capacity."""

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
    month; used card-hours outside allocations are :func:`_used_outside_costs` plus what shared
    cards' tenants are charged (:func:`shared_card_splits`), so a shared card's part of the
    pool's idle cost is its idle remainder.

    Burst pools (``Pool.burst``: rented cloud capacity, paid per use) carry no idle cost and
    are left out: their cards cost nothing while nobody uses them. The hours counted run from
    the month's start to its end or to now, whichever comes first, so the current month's
    capacity is only the hours that have happened (as its usage is).
    """
    zone = billing_zone()
    periods = rate_periods(month=month, zone=zone)
    currency = next((p.currency for p in periods if p.currency), None) or "EUR"
    start, end = periods[0].start, min(periods[-1].end, timezone.now())
    if end <= start:  # a month still to come: nothing has happened yet
        return []
    capacity: dict[tuple[int, int], int] = defaultdict(int)
    for row in (
        Gpu.objects.filter(
            SCHEDULABLE_CARD | SLICED_CARD, node__pool__isnull=False, node__pool__burst=False
        )
        .values("node__pool_id", "gpu_model_id")
        .annotate(n=Count("id"))
    ):
        capacity[(row["node__pool_id"], row["gpu_model_id"])] += row["n"]
    held: dict[int, Decimal] = defaultdict(Decimal)
    allocations = Allocation.objects.filter(status__in=CHARGED_STATUSES).overlapping(start, end)
    if connection.vendor == "postgresql":  # the unchanged ones summed in SQL, as top_allocations
        held.update(_held_unchanged_costs(periods, start, end))
        allocations = allocations.filter(
            Exists(_card_changes_of(OuterRef("pk"))) | ~Q(mig_profile="")
        )
    allocations = list(allocations.select_related("gpu_model"))
    changes = card_changes(a.pk for a in allocations)
    for a in allocations:
        share = a.card_share  # a MIG slice holds its share of a card
        for piece in card_pieces(a, changes.get(a.pk, ())):
            cards = Decimal(piece.cards * share.numerator) / share.denominator
            held[a.pool_id] += cards * _price_over(
                periods, RateKind.GPU_RESERVED, a.gpu_model_id, max(piece.start, start),
                min(piece.end, end),
            )  # fmt: skip
    full: dict[int, Decimal] = defaultdict(Decimal)
    for (pool_id, model_id), cards in capacity.items():
        full[pool_id] += cards * _price_over(periods, RateKind.GPU_RESERVED, model_id, start, end)
    outside = _used_outside_costs(periods, month, capacity)
    shared, _ = shared_card_splits(month=month, periods=periods)
    for card in shared:  # a shared card's tenants used it outside any allocation
        if card.split is not None and card.gpu.node.pool_id is not None:
            outside[card.gpu.node.pool_id] += sum(p.amount for p in card.split.parts)
    result = []
    for pool in Pool.objects.filter(pk__in=set(full) | set(held), burst=False).order_by("name"):
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


def _used_outside_costs(periods, month, capacity) -> dict[int, Decimal]:
    """Per pool: the month's used card-hours outside any allocation (``basis`` used, in
    card-seconds), priced at the reserved rate over each record's own period, as capacity is.

    Such a record names a team and a GPU model but no pool (Slurm accounting gives a partition,
    the Prometheus meter a node, and neither is kept on the record), so it is attributed by its
    model: split over the pools holding that model's counted cards (``capacity``, (pool, model)
    → cards) in proportion to those cards — all of it to the one pool when, as usual, one pool
    holds the model. A model no pool holds now is netted nowhere."""
    holders: dict[int, dict[int, int]] = defaultdict(dict)
    for (pool_id, model_id), cards in capacity.items():
        holders[model_id][pool_id] = cards
    netted: dict[int, Decimal] = defaultdict(Decimal)
    records = UsageRecord.objects.filter(
        month=month, basis=ChargeBasis.USED, unit=UsageUnit.CARD_SECONDS, quantity__gt=0,
        gpu_model__isnull=False,
    ).values_list("gpu_model_id", "quantity", "period_start", "period_end")  # fmt: skip
    for model_id, quantity, started, ended in records:
        hours = hours_between(started, ended)
        if model_id not in holders or hours <= 0:
            continue
        price_hours = _price_over(periods, RateKind.GPU_RESERVED, model_id, started, ended)
        cost = quantity / 3600 * price_hours / hours  # cards × hours × price, cards = q / s
        total = sum(holders[model_id].values())
        for pool_id, cards in holders[model_id].items():
            netted[pool_id] += cost * cards / total
    return netted


_HELD_SQL = """
WITH price(starts, ends, model, price) AS (VALUES {values})
SELECT a.pool_id, COALESCE(SUM(a.card_count * {seconds} * price.price), 0)
  FROM {allocation} a
  LEFT JOIN price ON price.model = a.gpu_model_id
       AND price.starts < LEAST(a.ends_at, %s) AND price.ends > GREATEST(a.starts_at, %s)
 WHERE a.status = ANY(%s) AND a.starts_at < %s AND a.ends_at > %s AND a.mig_profile = ''
   AND NOT EXISTS (SELECT 1 FROM {finding} f WHERE f.allocation_id = a.id
                   AND f.state = ANY(%s) AND f.reclaimed_at IS NOT NULL)
 GROUP BY a.pool_id
"""


def _held_unchanged_costs(periods, start, end) -> dict[int, Decimal]:
    """Per pool: what its allocations whose cards never changed held in ``[start, end)``,
    priced at the reserved rate (the sum :func:`pool_idle_costs` makes, in one statement)."""
    values, params = _price_rows(periods, RateKind.GPU_RESERVED)
    if not values:
        values, params = "(NULL::timestamptz, NULL::timestamptz, NULL::bigint, NULL::numeric)", []
    seconds = _SECONDS.format(
        start="GREATEST(a.starts_at, price.starts, %s)", end="LEAST(a.ends_at, price.ends, %s)"
    )
    sql = _HELD_SQL.format(
        values=values,
        seconds=seconds,
        allocation=Allocation._meta.db_table,
        finding=IdleFinding._meta.db_table,
    )
    states = [IdleFindingState.RECLAIMED.value, IdleFindingState.UNDONE.value]
    # in the order the placeholders appear: seconds (end, start), the join, the filter
    args = [*params, end, start, end, start, [str(x) for x in CHARGED_STATUSES], end, start, states]
    with connection.cursor() as cursor:
        cursor.execute(sql, args)
        return {pool: card_seconds_hours(Decimal(cost)) for pool, cost in cursor.fetchall()}


CHART_TEAMS = 10
"""The finance month's cost-by-team chart names this many dearest teams and sums the rest
into one bar (1,600 bars tell a reader nothing, and cost 20 ms to build at fleet size)."""


def finance_month(*, month: date) -> dict:
    """Every team's statement of the month (a queryset, by team name), its lines (a queryset,
    by team name and position), and the month's sums made in the database: total, count,
    per cost centre, by GPU / served model, and by team (the :data:`CHART_TEAMS` dearest by
    total, ties by name, then one "N other teams" item holding the rest)."""
    statements = (
        Statement.objects.filter(month=month).select_related("team").order_by("team__name", "pk")
    )
    # Of the rows a line names, only what the lines table writes: a GPU model's whole row is
    # 40 columns, with JSON to parse, on each of the page's 100 lines.
    lines = (
        StatementLine.objects.filter(statement__month=month)
        .select_related("gpu_model", "statement__team", "gpu__node")
        .only(
            *(f.name for f in StatementLine._meta.concrete_fields),
            "gpu_model__name",
            "gpu__index",
            "gpu__node__hostname",
            "statement__currency",
            "statement__team__name",
        )
        .order_by("statement__team__name", "statement_id", "position")
    )
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
    by_team = [{"label": name, "amount": amount} for name, amount in top]
    others = sums["count"] - len(top)
    if others > 0:  # the rest as one bar: the total minus what the named bars hold
        rest = (sums["total"] or Decimal(0)) - sum((amount for _, amount in top), Decimal(0))
        by_team.append({"label": f"{others} other teams", "amount": rest})
    by_model = (
        StatementLine.objects.filter(statement__month=month)
        .values("gpu_model__name", "served_model", "basis")
        .annotate(amount=Sum("amount"))
        .order_by()
    )
    models: dict[str, Decimal] = defaultdict(Decimal)
    for row in by_model:  # storage and egress named as the team pages name them
        if row["basis"] in (ChargeBasis.STORAGE, ChargeBasis.EGRESS):
            label = ChargeBasis(row["basis"]).label
        else:
            label = row["gpu_model__name"] or row["served_model"] or "—"
        models[label] += row["amount"]
    first = statements.values_list("currency", flat=True).first()
    return {
        "statements": statements,
        "statement_count": sums["count"],
        "lines": lines,
        "total": sums["total"] or Decimal(0),
        "currency": first,
        "by_cost_centre": sorted(centres.items()),
        "by_team": by_team,
        "by_gpu_model": [
            {"label": k, "amount": v} for k, v in sorted(models.items(), key=lambda kv: -kv[1])
        ],
    }


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
class SharedCardPeriod:
    """One shared card over one rate period of a month: its price per card-hour (reserved
    rate of its GPU model) and the split (:func:`billing.shared_cards.card_split`), or the
    ``problem`` that kept it from being billed (``unpriced``, ``over_shared``) with ``detail``."""

    gpu: Gpu
    period: RatePeriod
    price: Decimal | None
    split: CardSplit | None
    tenants: tuple[int, ...] = ()  # team ids, slug order
    problem: str = ""
    detail: str = ""


def _use_fraction(use: SharedCardUse) -> Fraction:
    if use.basis == ShareBasis.DCGM_UTILISATION:
        return utilisation_fraction(use.utilisation_pct)
    return replicas_fraction(use.parts_held, use.parts_per_card)


def shared_card_splits(
    *,
    month: date,
    team_ids: list[int] | None = None,
    pool_id: int | None = None,
    periods: list[RatePeriod] | None = None,
) -> tuple[list[SharedCardPeriod], str]:
    """Every shared card of ``month`` (a card with a :class:`~billing.models.SharedCardUse`
    in it; of those ``team_ids`` used, of those in ``pool_id``, when given) split over its
    tenants and idle remainder per rate period, and the month's currency. A card with uses is
    shared all month: its window is the month's card-seconds, cut at rate-card changes. Every
    tenant of a card is read (the cents of one depend on the others), in team slug order. Two
    queries (one when the month's ``periods`` are given)."""
    periods = periods or rate_periods(month=month, zone=billing_zone())
    currency = next((p.currency for p in periods if p.currency), None) or default_currency()
    start, end = periods[0].start, periods[-1].end
    uses = SharedCardUse.objects.filter(period_start__lt=end, period_end__gt=start)
    if team_ids is not None:
        uses = uses.filter(gpu_id__in=uses.filter(team_id__in=team_ids).values("gpu_id"))
    if pool_id is not None:
        uses = uses.filter(gpu__node__pool_id=pool_id)
    by_gpu: dict[int, list[SharedCardUse]] = defaultdict(list)
    gpus: dict[int, Gpu] = {}
    for use in uses.select_related("gpu__node", "gpu__gpu_model", "team").order_by(
        "gpu__node__hostname", "gpu__index", "period_start", "id"
    ):
        by_gpu[use.gpu_id].append(use)
        gpus[use.gpu_id] = use.gpu
    result = []
    for gpu_id, card_uses in by_gpu.items():
        gpu = gpus[gpu_id]
        rows = [CardUse(u.team_id, u.basis, u.period_start, u.period_end, _use_fraction(u))
                for u in card_uses]  # fmt: skip
        by_slug = sorted(card_uses, key=lambda u: u.team.slug)
        order = tuple(dict.fromkeys(u.team_id for u in by_slug))
        for period in periods:
            price = price_for(period, RateKind.GPU_RESERVED, gpu.gpu_model_id, "")
            if price is None:
                # a period without a price and without uses (before the first rate card) is
                # no one's charge: nothing to warn about
                if any(clip(u.start, u.end, period.start, period.end) for u in rows):
                    result.append(SharedCardPeriod(gpu, period, None, None, order, "unpriced"))
                continue
            try:
                split = card_split(start=period.start, end=period.end, uses=rows,
                                   price_per_card_hour=price, currency=currency,
                                   order=order)  # fmt: skip
            except CardOverShared as exc:
                result.append(
                    SharedCardPeriod(gpu, period, price, None, order, "over_shared", str(exc))
                )
                continue
            result.append(SharedCardPeriod(gpu, period, price, split, order))
    return result, currency


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
