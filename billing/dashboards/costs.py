"""Cost reads for the capacity dashboards: spend per team and month, used vs held card-hours.

Each function runs a fixed number of queries. Money of a past month is what the statements say
(built by ``statement_build``); a month without statements has "no cost data", never a zero.
This month's money is the cost so far, priced by the statements' own path.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal

from django.db.models import Max, OuterRef, Q, Subquery, Sum

from billing.charges import usage_lines_by_team
from billing.choices import ChargeBasis, RateKind, UsageSource, UsageUnit
from billing.conf import billing_zone
from billing.models import Statement, UsageImport, UsageRecord
from billing.pricing import (
    card_hour_amount,
    format_money,
    local_midnight,
    month_of,
    next_month,
    previous_month,
    round_money,
    unit_price_places,
)
from billing.rate_periods import RatePeriod, period_in, price_for, rate_period_at
from pools.capacity.arithmetic import card_seconds_hours, clip
from pools.capacity.lifecycle import CHARGED_STATUSES
from pools.capacity.models import Allocation
from pools.common.choices import PricingMethod
from pools.dashboards.stranded import StrandedRow
from pools.reclamation.card_timeline import card_changes, card_pieces
from pools.tenancy.models import Team
from pools.web.numbers import grouped


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


def top_teams_by_cost_so_far(
    *, now: datetime, team: str | None = None, limit: int = 10
) -> list[TeamCost]:
    """Teams by their money so far this month (the month of ``now`` in the billing zone),
    largest first, ties by name: each team's ``to_date`` of :func:`teams_cost_so_far` (the
    lines :func:`billing.charges.usage_lines_by_team` prices, summed), the figure its own
    dashboard shows, whether or not a statement of the month is built. Teams without charged
    usage are absent; ``[]`` when none has any or no rate card is in force at ``now`` (money
    unknown). ``team`` a slug keeps that team only. The statement path's queries plus two (the
    team filter's id, the names), however many teams and allocations there are."""
    zone = billing_zone()
    period = rate_period_at(now, zone=zone)
    if period is None:
        return []
    team_ids = None
    if team:
        team_ids = list(Team.objects.filter(slug=team).values_list("pk", flat=True))
        if not team_ids:
            return []
    lines, _ = usage_lines_by_team(month=month_of(now, zone), team_ids=team_ids)
    amounts = {tid: _to_date(team_lines) for tid, team_lines in lines.items() if team_lines}
    names = Team.objects.filter(pk__in=list(amounts)).values_list("pk", "name", "slug")
    rows = [TeamCost(name, slug, amounts[pk], period.currency) for pk, name, slug in names]
    rows.sort(key=lambda t: (-t.amount, t.team))
    return rows[:limit]


def _to_date(lines) -> Decimal:
    """A team's money so far: Σ of its statement lines' amounts (each already rounded as the
    statement rounds it)."""
    return sum((line.amount for line in lines), Decimal(0))


@dataclass(frozen=True)
class Spend:
    """A team's money of one month: its statement's total (``final`` when the statement is), or
    for the month in progress without a statement its cost so far (``so_far``,
    :func:`spend_so_far`); ``amount`` ``None``: no cost data (no statement, and no rate card in
    force for a month in progress)."""

    month: date
    amount: Decimal | None
    currency: str | None
    final: bool
    so_far: bool = False


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


def spend_so_far(spend: Spend, cost: CostSoFar) -> Spend:
    """``spend``, or, when its month has no statement and is ``cost``'s month (the month in
    progress), that month's cost so far (``cost.to_date``, the team dashboard's "… so far", with
    ``so_far`` set); unchanged when the cost so far is unknown (no rate card in force)."""
    if spend.amount is not None or cost.to_date is None or cost.month != spend.month:
        return spend
    return Spend(spend.month, cost.to_date, cost.currency, final=False, so_far=True)


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


def team_used_card_hours(
    *, team_id: int, month: date, allocation_ids: list[int]
) -> tuple[Decimal, Decimal]:
    """Card-hours Slurm accounting metered for the team in ``month``: ``(inside, outside)``,
    ``inside`` the jobs' card-hours inside the allocations ``allocation_ids`` (a team's
    held allocations: compare it with their held card-hours), ``outside`` those of jobs that
    ran in no allocation (charged on use; nothing held to compare them with). One query."""
    rows = UsageRecord.objects.filter(
        team_id=team_id,
        month=month,
        source=UsageSource.SLURM_ACCOUNTING,
        unit=UsageUnit.CARD_SECONDS,
    ).aggregate(
        inside=Sum("quantity", filter=Q(allocation_id__in=allocation_ids)),
        outside=Sum("quantity", filter=Q(allocation__isnull=True)),
    )
    return card_seconds_hours(rows["inside"] or 0), card_seconds_hours(rows["outside"] or 0)


@dataclass(frozen=True)
class UsedShare:
    """A team's used / held card-hours in the month so far, over the allocations whose usage is
    known only: ``used`` (card-hours Slurm accounting metered inside them) of ``held`` (what
    they held). ``unknown`` allocations held ``unknown_held`` card-hours whose usage nobody
    imported (Kubernetes meters no job; a Slurm allocation before accounting reached it):
    left out, never counted as idle."""

    used: Decimal
    held: Decimal
    unknown: int
    unknown_held: Decimal

    @property
    def percent(self) -> int | None:
        """``used / held`` in whole per cent, half to even; ``None`` when nothing known was
        held (unknown, or nothing held at all)."""
        return round(self.used / self.held * 100) if self.held else None


def used_share(*, used: Decimal, held: Iterable[tuple[Decimal, bool]]) -> UsedShare:
    """Sum ``held`` pairs ``(card-hours held in the month, usage known)`` apart by whether the
    allocation's usage is known; an allocation that held nothing this month is not counted as
    unknown. ``used``: card-hours metered inside the known ones (:func:`team_used_card_hours`
    over their ids). No query."""
    known_held, unknown, unknown_held = Decimal(0), 0, Decimal(0)
    for hours, known in held:
        if known:
            known_held += hours
        elif hours > 0:
            unknown, unknown_held = unknown + 1, unknown_held + hours
    return UsedShare(used=used, held=known_held, unknown=unknown, unknown_held=unknown_held)


def slurm_accounting_read_until() -> datetime | None:
    """The end of the newest window Slurm accounting was imported for (``UsageImport``), the
    moment up to which a Slurm allocation without a metered job is known to have used 0
    card-hours; ``None`` when it was never imported. One query."""
    return UsageImport.objects.filter(source=UsageSource.SLURM_ACCOUNTING).aggregate(
        until=Max("window_end")
    )["until"]


def held_card_hours(
    allocation: Allocation, start: datetime, end: datetime, changes: Iterable = ()
) -> Decimal:
    """Cards × hours of the allocation's window inside ``[start, end)`` (0 when apart), with the
    cards held at each moment; ``changes`` from
    :func:`pools.reclamation.card_timeline.card_changes`. MIG slices count their share of a
    card (:attr:`pools.capacity.models.Allocation.card_share`)."""
    return card_seconds_hours(held_card_seconds(allocation, start, end, changes))


def held_card_seconds(
    allocation: Allocation, start: datetime, end: datetime, changes: Iterable = ()
) -> Decimal:
    """:func:`held_card_hours` in card-seconds, as the reservation import counts them."""
    total = Decimal(0)
    for piece in card_pieces(allocation, changes):
        if (span := clip(piece.start, piece.end, start, end)) is not None:
            total += Decimal(piece.cards) * Decimal((span[1] - span[0]).total_seconds())
    share = allocation.card_share
    return total * share.numerator / share.denominator


@dataclass(frozen=True)
class StrandedCost:
    """Stranded capacity of one pool × GPU model priced at the reserved card-hour rate in force
    now (``amount`` rounded half-up to the currency's minor unit; ``None`` when unpriced)."""

    row: StrandedRow
    price_per_card_hour: Decimal | None
    currency: str | None
    amount: Decimal | None


def stranded_costs(
    rows: list[StrandedRow], *, now, periods: list[RatePeriod] | None = None
) -> list[StrandedCost]:
    """Price each row's stranded card-hours at today's reserved rate for its GPU model (the
    rate card in force at ``now``; the horizon's later rate changes are not applied).
    ``periods``: ``now``'s month's :func:`~billing.rate_periods.rate_periods` if the caller
    read them (no query here), else read here (unpriced when that month's cards mix
    currencies)."""
    if periods is None:
        period = rate_period_at(now, zone=billing_zone())
    else:
        period = period_in(periods, now)
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


@dataclass(frozen=True)
class CostSoFar:
    """A team's money this month: ``to_date`` what its statement would charge now, ``forecast``
    that plus its reserved cards' card-hours from where the reservation import stopped to the
    month's end (``reserved_ahead_card_hours``) at the reserved price in force now; both in
    ``currency``, ``None`` when unknown (no rate card in force, or a GPU model the card has no
    reserved price for: ``unpriced`` names them)."""

    month: date
    to_date: Decimal | None
    forecast: Decimal | None
    currency: str | None
    reserved_ahead_card_hours: Decimal
    unpriced: tuple[str, ...] = ()

    @property
    def to_date_text(self) -> str | None:
        """``to_date`` in the pages' one money format (``570.00 EUR``); ``None`` unknown."""
        return None if self.to_date is None else format_money(self.to_date, self.currency)

    @property
    def forecast_text(self) -> str | None:
        return None if self.forecast is None else format_money(self.forecast, self.currency)


def _reserved_ahead_amount(
    lines, period: RatePeriod, model_id: int, price: Decimal, seconds: Decimal, currency: str
) -> Decimal:
    """What ``seconds`` card-seconds reserved ahead of GPU model ``model_id`` add to the month's
    money at ``price`` (the rate ``period`` in force now): they join that period's reserved line
    of the model in ``lines`` (the statement rounds a line once, from its raw card-seconds:
    :func:`billing.pricing.card_hour_amount`), so the addition is the line rounded with them
    less the line rounded without; without such a line, their own amount rounded. The forecast
    is then what the month's line will be, whichever hour the reservation import ran to (1 card
    × 480 h at 0.013 EUR: 6.24 EUR, not 0.46 + 5.79 = 6.25 after an import to hour 35)."""
    for line in lines:
        if (
            line.basis == ChargeBasis.RESERVED and line.gpu_model_id == model_id
            and line.unit_price == price and line.rate_card_id == period.card_id
            and line.rate_from == period.rate_from and line.pool_id is None
            and line.gpu_id is None
        ):  # fmt: skip
            raw = line.raw_quantity + seconds
            return card_hour_amount(raw, price, currency) - line.amount
    return card_hour_amount(seconds, price, currency)


def teams_cost_so_far(*, team_ids: list[int], now: datetime) -> dict[int, CostSoFar]:
    """This month's money per team, from the statements' own pricing path.

    - ``to_date``: Σ of the line amounts :func:`billing.charges.usage_lines_by_team`
      prices for the month now (each line rounded as the statement rounds it): reserved
      card-hours as the reservation import has accrued them (beat ``usage-import``, hourly),
      used card-hours outside reservations, elastic burst, tokens.
    - ``forecast``: ``to_date`` + for every charged, reserved-priced allocation of the team, its
      cards × hours from where the reservation import stopped for it (its month's record's
      ``period_end``; without one, its start in the month: it began after the last import) to
      the earlier of its window's end and the month's end — not from ``now``, which between
      two hourly imports would skip the time since the last one (or, for an import whose clock
      ran ahead, count it twice) — with the cards it held at each moment as the import counts
      them (:func:`held_card_seconds`: a reclamation's shrink at 06:00 after an import at 05:00
      counts the cards before it until 06:00, those kept after; MIG slices their share of a
      card), so the hours ahead are at the cards it holds now, at the rate card's reserved
      price in force now
      (:func:`billing.rate_periods.price_for`),
      priced with the reserved line of that model and price they will join, rounded half-up
      to the currency's minor unit once (:func:`_reserved_ahead_amount`: the forecast does not
      move by a cent from one hourly import to the next). Burst ahead is not forecast (it
      depends on traffic).

    Four queries plus the statement path's (one of them the allocations' reclamations and
    undos); ``{}`` for no teams."""
    if not team_ids:
        return {}
    zone = billing_zone()
    month = month_of(now, zone)
    month_start = local_midnight(month, zone)
    month_end = local_midnight(next_month(month), zone)
    period = rate_period_at(now, zone=zone)
    currency = period.currency if period is not None else None
    lines, _ = usage_lines_by_team(month=month, team_ids=list(team_ids))
    ahead: dict[tuple[int, int], Decimal] = {}
    names: dict[int, str] = {}
    imported = UsageRecord.objects.filter(
        source=UsageSource.RESERVATION, allocation_id=OuterRef("pk"), month=month
    ).order_by("-period_end")
    allocations = list(
        Allocation.objects.filter(
            team_id__in=team_ids,
            pricing_method=PricingMethod.RESERVED,
            status__in=CHARGED_STATUSES,
        )
        .overlapping(month_start, month_end)
        .annotate(imported_to=Subquery(imported.values("period_end")[:1]))
        .select_related("gpu_model")
    )
    changes = card_changes(a.pk for a in allocations)
    for a in allocations:
        span = clip(a.starts_at, a.ends_at, a.imported_to or month_start, month_end)
        if span is None:
            continue
        seconds = held_card_seconds(a, *span, changes.get(a.pk, ()))
        key = (a.team_id, a.gpu_model_id)
        ahead[key] = ahead.get(key, Decimal(0)) + seconds
        names[a.gpu_model_id] = a.gpu_model.name
    out = {}
    for team_id in team_ids:
        to_date = None
        if currency is not None:
            to_date = _to_date(lines.get(team_id, []))
        forecast, unpriced, card_hours = to_date, [], Decimal(0)
        for (owner, model_id), seconds in sorted(ahead.items()):
            if owner != team_id:
                continue
            card_hours += card_seconds_hours(seconds)
            price = price_for(period, RateKind.GPU_RESERVED, model_id, "") if period else None
            if price is None or forecast is None:
                unpriced.append(names[model_id])
                forecast = None
                continue
            forecast += _reserved_ahead_amount(
                lines.get(team_id, []), period, model_id, price, seconds, currency
            )
        out[team_id] = CostSoFar(
            month, to_date, forecast, currency, card_hours, tuple(dict.fromkeys(unpriced))
        )
    return out


@dataclass(frozen=True)
class AllocationCost:
    """One allocation's reserved money so far: ``card_hours`` held from its window's start to
    ``now`` (or its end, if earlier) × ``price_per_card_hour`` (the rate card's reserved
    card-hour price for its GPU model in force at ``now``), rounded half-up to the currency's
    minor unit once. ``amount`` ``None`` when unknown, and ``reason`` says why (no rate card in
    force, no reserved price for the model, priced by use or tokens instead): never a 0."""

    card_hours: Decimal
    price_per_card_hour: Decimal | None
    currency: str | None
    amount: Decimal | None
    reason: str = ""

    @property
    def amount_text(self) -> str | None:
        """``amount`` in the pages' one money format (``570.00 EUR``); ``None`` unknown."""
        return None if self.amount is None else format_money(self.amount, self.currency)

    @property
    def price_plain(self) -> str | None:
        """The card-hour price as a plain decimal without trailing zeros (``1.25``, not the
        stored ``1.250000``); ``None`` unknown."""
        price = self.price_per_card_hour
        return None if price is None else format(price.normalize(), "f")

    @property
    def price_text(self) -> str | None:
        """The card-hour price as pages show a unit price: the currency's minor unit or finer
        when the price is finer (:func:`billing.pricing.unit_price_places`), then the code
        after a no-break space: ``1.9`` -> ``1.90 EUR``, ``0.0125`` -> ``0.0125 EUR``; ``None``
        unknown. The API and CSVs keep :attr:`price_plain`."""
        price = self.price_per_card_hour
        if price is None:
            return None
        places = unit_price_places(price, self.currency)
        return f"{grouped(price, places)}\u00a0{self.currency}"


def allocations_cost_so_far(
    *, allocations: Iterable[Allocation], now: datetime
) -> dict[int, AllocationCost]:
    """Allocation id -> its reserved cost so far (:class:`AllocationCost`), with the statements'
    price lookup (:func:`billing.rate_periods.price_for` on the period
    :func:`billing.rate_periods.rate_period_at` gives for ``now``). Card-hours are those of
    :func:`held_card_hours` over ``[starts_at, min(now, ends_at))`` with the cards held at each
    moment, as the reservation import charges them (a reclamation's shrink, end or undo:
    :func:`pools.reclamation.card_timeline.card_changes`); an allocation released, reclaimed or
    never charged counts as its statuses' charging says (``CHARGED_STATUSES``: cancelled ones
    hold nothing). A rate change inside the window is not split: the whole is at today's price,
    like the forecast of :func:`teams_cost_so_far`. Two queries: the card changes, the rate
    card."""
    allocations = list(allocations)
    if not allocations:
        return {}
    changes = card_changes(a.pk for a in allocations)
    period = rate_period_at(now, zone=billing_zone())
    out = {}
    for a in allocations:
        end = min(now, a.ends_at)
        hours = (
            held_card_hours(a, a.starts_at, end, changes.get(a.pk, ()))
            if a.status in CHARGED_STATUSES and end > a.starts_at
            else Decimal(0)
        )
        if a.pricing_method != PricingMethod.RESERVED:
            out[a.pk] = AllocationCost(
                hours,
                None,
                None,
                None,
                f"priced by {a.get_pricing_method_display().lower()}, not reserved card-hours: "
                "the team's statement has the lines",
            )
            continue
        if period is None or period.card_id is None:
            out[a.pk] = AllocationCost(hours, None, None, None, "no rate card is in force now")
            continue
        price = price_for(period, RateKind.GPU_RESERVED, a.gpu_model_id, "")
        if price is None:
            reason = f"the rate card has no reserved card-hour price for {a.gpu_model.name}"
            out[a.pk] = AllocationCost(hours, None, None, None, reason)
            continue
        amount = round_money(hours * price, period.currency)
        out[a.pk] = AllocationCost(hours, price, period.currency, amount)
    return out
