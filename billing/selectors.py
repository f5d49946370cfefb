"""Reads for pages, API and reports: who may see which statement, and the month reports."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from django.db.models import Count, QuerySet, Sum

from billing.choices import TOKEN_UNITS, ChargeBasis, LineKind, RateKind
from billing.conf import billing_zone
from billing.models import RateCard, Statement, StatementLine, UsageRecord
from billing.pricing import hours_between, next_month, previous_month, round_money
from billing.services.rates import RatePeriod, rate_periods
from pools.capacity.arithmetic import card_seconds_hours
from pools.capacity.lifecycle import CHARGED_STATUSES
from pools.capacity.models import Allocation
from pools.inventory.models import Gpu, Pool
from pools.reclamation.card_timeline import card_changes, card_pieces
from pools.tenancy.models import Team


def statement_list(*, user) -> QuerySet[Statement]:
    """Statements the user may see: all for staff (finance, pool admins), else their teams'."""
    qs = Statement.objects.select_related("team").annotate(line_count=Count("lines"))
    return qs if user.is_staff else qs.filter(team__memberships__user=user)


def statement_lines(*, statement: Statement) -> QuerySet[StatementLine]:
    return statement.lines.select_related("gpu_model", "statement").order_by("position")


def team_visible(*, user, team: Team) -> bool:
    return user.is_staff or team.memberships.filter(user=user).exists()


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
        a, b = max(start, period.start), min(end, period.end)
        price = period.prices.get((kind, gpu_model_id, ""))
        if b > a and price is not None:
            total += hours_between(a, b) * price
    return total


def top_allocations(*, month: date, team: Team | None = None, limit: int = 10) -> list[dict]:
    """Reserved allocations by their cost in the month (cards × hours × reserved price)."""
    zone = billing_zone()
    periods = rate_periods(month=month, zone=zone)
    currency = next((p.currency for p in periods if p.currency), None) or "EUR"
    records = UsageRecord.objects.filter(
        month=month, basis=ChargeBasis.RESERVED, allocation__isnull=False
    ).select_related("allocation__team", "allocation__pool", "gpu_model")
    if team is not None:
        records = records.filter(team=team)
    records = list(records)
    changes = card_changes(r.allocation_id for r in records)
    rows = []
    for record in records:
        allocation = record.allocation
        cost = sum(
            (
                piece.cards
                * _price_over(
                    periods, RateKind.GPU_RESERVED, record.gpu_model_id,
                    max(piece.start, record.period_start), min(piece.end, record.period_end),
                )
                for piece in card_pieces(allocation, changes.get(allocation.pk, ()))
            ),
            Decimal(0),
        )  # fmt: skip
        rows.append(
            {
                "allocation": allocation,
                "card_hours": card_seconds_hours(record.quantity),
                "amount": round_money(cost, currency),
            }
        )
    rows.sort(key=lambda r: (-r["amount"], r["allocation"].pk))
    return rows[:limit]


@dataclass(frozen=True)
class IdleCost:
    pool: Pool
    capacity_cost: Decimal
    allocated_cost: Decimal
    idle_cost: Decimal
    utilisation: Decimal | None


def pool_idle_costs(*, month: date) -> list[IdleCost]:
    """Showback per pool: capacity × hours × reserved rate − what allocations held, per model.

    Capacity is the pool's current inventory (cards with a recognised model); allocations of
    every pricing method count as held for their wall time inside the month.
    """
    zone = billing_zone()
    periods = rate_periods(month=month, zone=zone)
    currency = next((p.currency for p in periods if p.currency), None) or "EUR"
    start, end = periods[0].start, periods[-1].end
    capacity: dict[tuple[int, int], int] = defaultdict(int)
    for row in (
        Gpu.objects.filter(node__pool__isnull=False, gpu_model__isnull=False)
        .values("node__pool_id", "gpu_model_id")
        .annotate(n=Count("id"))
    ):
        capacity[(row["node__pool_id"], row["gpu_model_id"])] += row["n"]
    held: dict[int, Decimal] = defaultdict(Decimal)
    allocations = list(
        Allocation.objects.filter(status__in=CHARGED_STATUSES, starts_at__lt=end, ends_at__gt=start)
    )
    changes = card_changes(a.pk for a in allocations)
    for a in allocations:
        for piece in card_pieces(a, changes.get(a.pk, ())):
            held[a.pool_id] += piece.cards * _price_over(
                periods, RateKind.GPU_RESERVED, a.gpu_model_id, max(piece.start, start),
                min(piece.end, end),
            )  # fmt: skip
    full: dict[int, Decimal] = defaultdict(Decimal)
    for (pool_id, model_id), cards in capacity.items():
        full[pool_id] += cards * _price_over(periods, RateKind.GPU_RESERVED, model_id, start, end)
    result = []
    for pool in Pool.objects.filter(pk__in=set(full) | set(held)).order_by("name"):
        cap, used = full[pool.pk], held[pool.pk]
        result.append(
            IdleCost(
                pool=pool,
                capacity_cost=round_money(cap, currency),
                allocated_cost=round_money(used, currency),
                idle_cost=round_money(cap - used, currency),
                utilisation=(used / cap * 100).quantize(Decimal("0.1")) if cap else None,
            )
        )
    return result


def finance_month(*, month: date) -> dict:
    """Every team's statement of the month, totals per cost centre, cost by team and model."""
    statements = list(
        Statement.objects.filter(month=month).select_related("team").order_by("team__name")
    )
    lines = list(
        StatementLine.objects.filter(statement__month=month)
        .select_related("gpu_model", "statement__team")
        .order_by("statement__team__name", "position")
    )
    by_centre: dict[str, Decimal] = defaultdict(Decimal)
    for s in statements:
        by_centre[s.cost_centre or "—"] += s.total_amount
    return {
        "statements": statements,
        "lines": lines,
        "total": sum((s.total_amount for s in statements), Decimal(0)),
        "currency": statements[0].currency if statements else None,
        "by_cost_centre": sorted(by_centre.items()),
        "by_team": [{"label": s.team.name, "amount": s.total_amount} for s in statements],
        "by_gpu_model": cost_by_gpu_model(lines),
    }


def usage_lines_of(statement: Statement) -> list[StatementLine]:
    return [x for x in statement.lines.all() if x.kind == LineKind.USAGE]


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
