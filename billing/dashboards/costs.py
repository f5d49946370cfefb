"""Cost reads for the capacity dashboards: spend per team and month, used vs held card-hours.

Each function runs a fixed number of queries. Money is what the statements say (built by
``statement_build``); a month without statements has "no cost data", never a zero.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal

from django.db.models import Sum

from billing.choices import RateKind, UsageSource, UsageUnit
from billing.conf import billing_zone
from billing.models import Statement, UsageRecord
from billing.pricing import previous_month, round_money
from billing.services.rates import rate_period_at
from pools.capacity.arithmetic import card_seconds_hours, clip
from pools.capacity.models import Allocation
from pools.dashboards.stranded import StrandedRow
from pools.reclamation.card_timeline import card_pieces


@dataclass(frozen=True)
class TeamCost:
    team: str
    slug: str
    amount: Decimal
    currency: str


def top_teams_by_cost(*, month: date, team: str | None = None, limit: int = 10) -> list[TeamCost]:
    """Teams by their statement total for ``month``, largest first; ``[]`` when no statement
    of the month exists. One query."""
    qs = Statement.objects.filter(month=month).select_related("team")
    if team:
        qs = qs.filter(team__slug=team)
    return [
        TeamCost(s.team.name, s.team.slug, s.total_amount, s.currency)
        for s in qs.order_by("-total_amount", "team__name")[:limit]
    ]


@dataclass(frozen=True)
class Spend:
    month: date
    amount: Decimal | None  # None: no statement for the month
    currency: str | None
    final: bool


def team_spend(*, team_id: int, month: date) -> tuple[Spend, Spend]:
    """The team's statement totals for ``month`` and the month before. One query."""
    before = previous_month(month)
    found = {
        s.month: s for s in Statement.objects.filter(team_id=team_id, month__in=[month, before])
    }

    def spend(m: date) -> Spend:
        s = found.get(m)
        if s is None:
            return Spend(m, None, None, False)
        return Spend(m, s.total_amount, s.currency, s.finalized_at is not None)

    return spend(month), spend(before)


def used_card_hours(*, allocation_ids: list[int]) -> dict[int, Decimal]:
    """Card-hours Slurm accounting metered inside each allocation (jobs' GPU TRES × elapsed),
    by allocation id; allocations with no metered job are absent. One query."""
    rows = (
        UsageRecord.objects.filter(
            allocation_id__in=allocation_ids,
            source=UsageSource.SLURM_ACCOUNTING,
            unit=UsageUnit.CARD_SECONDS,
        )
        .values("allocation_id")
        .annotate(seconds=Sum("quantity"))
        .order_by()
    )
    return {r["allocation_id"]: card_seconds_hours(r["seconds"]) for r in rows}


def team_used_card_hours(*, team_id: int, month: date) -> Decimal:
    """Card-hours Slurm accounting metered for the team in ``month`` (inside allocations or
    not). One query."""
    seconds = UsageRecord.objects.filter(
        team_id=team_id,
        month=month,
        source=UsageSource.SLURM_ACCOUNTING,
        unit=UsageUnit.CARD_SECONDS,
    ).aggregate(s=Sum("quantity"))["s"]
    return card_seconds_hours(seconds or 0)


def held_card_hours(
    allocation: Allocation, start: datetime, end: datetime, changes: Iterable = ()
) -> Decimal:
    """Cards × hours of the allocation's window inside ``[start, end)`` (0 when apart), with the
    cards held at each moment; ``changes`` from
    :func:`pools.reclamation.card_timeline.card_changes`. MIG slices count their share of a
    card (:attr:`pools.capacity.models.Allocation.card_share`)."""
    total = Decimal(0)
    for piece in card_pieces(allocation, changes):
        if (span := clip(piece.start, piece.end, start, end)) is not None:
            total += Decimal(piece.cards) * Decimal((span[1] - span[0]).total_seconds())
    share = allocation.card_share
    return card_seconds_hours(total * share.numerator / share.denominator)


@dataclass(frozen=True)
class StrandedCost:
    """Stranded capacity of one pool × GPU model priced at the reserved card-hour rate in force
    now (``amount`` rounded half-up to the currency's minor unit; ``None`` when unpriced)."""

    row: StrandedRow
    price_per_card_hour: Decimal | None
    currency: str | None
    amount: Decimal | None


def stranded_costs(rows: list[StrandedRow], *, now) -> list[StrandedCost]:
    """Price each row's stranded card-hours at today's reserved rate for its GPU model (the
    rate card in force at ``now``; the horizon's later rate changes are not applied)."""
    period = rate_period_at(now, zone=billing_zone())
    priced = []
    for row in rows:
        price = None
        if period is not None:
            price = period.prices.get((RateKind.GPU_RESERVED, row.gpu_model_id, ""))
        currency = period.currency if period is not None and price is not None else None
        amount = (
            round_money(row.stranded_card_hours * price, currency)
            if price is not None and currency
            else None
        )
        priced.append(StrandedCost(row, price, currency, amount))
    return priced
