"""The one pricing path: usage quantities per rate period, and what they cost.

Every charge the portal shows is priced here: a statement's lines
(:mod:`billing.services.statements` writes them), a budget's consumption and the dashboards'
cost so far (:func:`usage_lines_by_team`), the finance month's top allocations and idle cost
(:mod:`billing.selectors`). Two steps, nothing restated elsewhere:

1. **Quantities per rate period** (:func:`period_sums`): usage records' quantities (card-seconds,
   tokens, GB) summed per key and per rate period of the month
   (:func:`billing.rate_periods.rate_periods`). A record inside one period counts whole in it:
   one SQL ``GROUP BY`` over the month's records, however many. A record that straddles a rate
   change (rate cards change at local midnights, so few do) is split in Python by
   :func:`billing.pricing.prorate`, by its whole seconds in each period.
2. **Money**: each period's quantity at that period's price
   (:func:`billing.rate_periods.price_for`), card-seconds per 3,600 s card-hour, tokens per
   million; a statement line is rounded once (:func:`lines_from_sums`), a showback figure
   (:func:`period_cost`) is left unrounded for its caller to round once.

The only money reckoned in SQL is the ranking of :func:`with_cost` (the month's dearest records
are found without loading every record): the same quantity × the same period's price.
``tests/billing/test_one_pricing_path.py`` checks the SQL sums against
:func:`billing.pricing.prorate` applied record by record, over random records, rate changes
and daylight-saving months.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from typing import Any

from django.db.models import (
    Case,
    DecimalField,
    ExpressionWrapper,
    F,
    Func,
    IntegerField,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from billing.choices import ChargeBasis, LineKind, RateKind, ShareBasis, UsageFlag, UsageUnit
from billing.conf import billing_zone, default_currency
from billing.models import SharedCardUse, UsageRecord
from billing.pricing import (
    card_hour_amount,
    card_hours_rounded,
    extra_amount,
    minor_unit,
    prorate,
    token_amount,
)
from billing.rate_periods import RatePeriod, month_currency, price_for, rate_kind, rate_periods
from billing.shared_cards import (
    CardOverShared,
    CardSplit,
    CardUse,
    card_split,
    replicas_fraction,
    utilisation_fraction,
)
from pools.capacity.arithmetic import clip
from pools.capacity.models import overlap_q
from pools.inventory.models import Gpu

CARD_HOURS = "card-hours"
CHARGED = Q(quantity__gt=0) & ~Q(basis=ChargeBasis.INCLUDED)
#: A usage row's window columns, for :func:`pools.capacity.models.overlap_q`.
PERIOD = ("period_start", "period_end")
"""Records a statement charges: a quantity, and not GPU time a reserved allocation covers."""
STATEMENT_KEY = ("gpu_model_id", "served_model", "basis", "unit", "pool_id")
"""What a statement line is per (with the rate period and its price)."""


@dataclass(frozen=True)
class LineData:
    kind: str
    period: date
    gpu_model_id: int | None
    served_model: str
    basis: str
    unit: str
    raw_quantity: Decimal  # card-seconds or tokens, unrounded
    quantity: Decimal  # card-hours (6 places) or tokens
    unit_price: Decimal
    amount: Decimal
    rate_from: date
    rate_to: date
    rate_card_id: int | None
    # shared-card lines only (basis ``shared``): the card, its share and what it is read from
    gpu_id: int | None = None
    card_share: Decimal | None = None
    share_basis: str = ""
    # Issue 35: the burst pool of burst-pool card-hours, the pool of storage / egress.
    pool_id: int | None = None

    @property
    def key(self) -> tuple:
        return (self.gpu_model_id, self.served_model, self.basis, self.unit, self.unit_price,
                self.rate_from, self.rate_to, self.gpu_id, self.share_basis,
                self.pool_id)  # fmt: skip


def priced_line(period: date, key: tuple, raw: Decimal, rate: RatePeriod, price: Decimal,
            currency: str) -> LineData:  # fmt: skip
    gpu_model_id, served, basis, unit, pool_id = key
    if unit == UsageUnit.CARD_SECONDS:
        quantity, amount, shown = (
            card_hours_rounded(raw),
            card_hour_amount(raw, price, currency),
            CARD_HOURS,
        )
    elif unit in (UsageUnit.GB_MONTHS, UsageUnit.GB):
        quantity, amount, shown = raw, extra_amount(raw, price, currency), unit
    else:
        quantity, amount, shown = raw, token_amount(raw, price, currency), unit
    return LineData(LineKind.USAGE, period, gpu_model_id, served, basis, shown, raw, quantity,
                    price, amount, rate.rate_from, rate.rate_to, rate.card_id,
                    pool_id=pool_id)  # fmt: skip


def _cuts(periods: list[RatePeriod]) -> list:
    return [p.start for p in periods[1:]]


def straddling(periods: list[RatePeriod]) -> Q:
    """Records that cross a rate change of the month (``Q()`` matches all: callers test
    ``len(periods) > 1`` first)."""
    straddles = Q()
    for cut in _cuts(periods):
        straddles |= overlap_q(cut, cut, fields=PERIOD)  # starts before the cut, ends after
    return straddles


def segment(periods: list[RatePeriod]) -> Case | Value:
    """The rate period (its index) a record lies in, by its start: the last period starting at
    or before it (a record of the month never starts before its first period)."""
    cuts = _cuts(periods)
    if not cuts:
        return Value(0, output_field=IntegerField())
    return Case(
        *[When(period_start__lt=c, then=Value(i)) for i, c in enumerate(cuts)],
        default=Value(len(cuts)),
        output_field=IntegerField(),
    )


def period_sums(
    records: QuerySet[UsageRecord], periods: list[RatePeriod], keys: Sequence[str],
    charged: Q = CHARGED,
) -> tuple[dict[tuple, list[Decimal]], set[tuple]]:  # fmt: skip
    """Raw quantity per ``keys`` value (a tuple of the records' fields, e.g.
    :data:`STATEMENT_KEY`) and rate period index, of the ``charged`` records; and every key
    value some record has, charged or not.

    One ``GROUP BY`` (key, period) of the records inside one period; the records that straddle a
    rate change, read in ``(period_start, id)`` order, split by :func:`billing.pricing.prorate`.
    Two queries (one in a month of one period)."""
    sums: dict[tuple, list[Decimal]] = defaultdict(lambda: [Decimal(0)] * len(periods))
    cut = len(periods) > 1
    rows = (
        records.annotate(segment=segment(periods))
        .values_list(*keys, "segment")
        .annotate(total=Sum("quantity", filter=charged & ~straddling(periods) if cut else charged))
        .order_by()
    )
    seen: set[tuple] = set()
    for *key, index, total in rows:
        seen.add(tuple(key))
        if total is not None:
            sums[tuple(key)][index] += Decimal(total)
    if cut:
        bounds = [(p.start, p.end) for p in periods]
        crossing = records.filter(charged & straddling(periods)).order_by("period_start", "id")
        for *key, quantity, start, end in crossing.values_list(
            *keys, "quantity", "period_start", "period_end"
        ):
            for index, part in enumerate(prorate(quantity, start, end, bounds)):
                if part:
                    sums[tuple(key)][index] += part
    return sums, seen


def priced_seconds(
    quantities: Sequence[Decimal], periods: list[RatePeriod], kind: str, gpu_model_id: int | None
) -> Decimal:
    """``Σ quantity_i × price_i``: card-seconds in each rate period at that period's ``kind``
    price of the GPU model (a period without the price adds 0: showback of what is not
    billed). Money × 3,600 s, exact: what :func:`with_cost` reckons in SQL."""
    total = Decimal(0)
    for quantity, period in zip(quantities, periods, strict=True):
        price = price_for(period, kind, gpu_model_id, "") if quantity else None
        if price is not None:
            total += quantity * price
    return total


def period_cost(
    quantities: Sequence[Decimal], periods: list[RatePeriod], kind: str, gpu_model_id: int | None
) -> Decimal:
    """The money of :func:`priced_seconds`, unrounded: ``Σ quantity_i × price_i / 3,600 s``.
    The caller rounds once (:func:`billing.pricing.round_money`)."""
    return priced_seconds(quantities, periods, kind, gpu_model_id) / 3600


class _HalfUpUnits(Func):
    """``floor(a / b)`` exactly where it can be: PostgreSQL's ``div`` truncates the quotient of
    two ``numeric`` without rounding it first (equal to ``floor`` for ``a, b >= 0``); SQLite,
    the demo's database, casts its floating quotient."""

    function = "DIV"
    output_field = DecimalField(max_digits=40, decimal_places=0)

    def as_sqlite(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, template="CAST((%(expressions)s) AS INTEGER)",
                           arg_joiner=" / ", **extra_context)  # fmt: skip


def with_cost(
    records: QuerySet[UsageRecord], periods: list[RatePeriod], kind: str, currency: str
) -> QuerySet:
    """``records`` that lie inside one rate period, annotated ``cost``: quantity (card-seconds)
    × that period's ``kind`` price of the record's GPU model (0 where unpriced), as
    :func:`priced_seconds` reckons it, exact in the database's ``numeric``; and ``units``: that
    money rounded once, half-up, in the currency's minor units, ``floor((cost × 10^places +
    1,800) / 3,600)`` (:func:`billing.pricing.round_money` in integers, so a ranking by amount
    in SQL is the one Python makes). The records that straddle a rate change are priced with
    :func:`record_costs`."""
    price = Case(
        *[
            When(segment=index, gpu_model_id=model_id, then=Value(amount))
            for index, period in enumerate(periods)
            for (k, model_id, served), amount in period.prices.items()
            if k == kind and model_id is not None and not served
        ],
        default=Value(Decimal(0)),
        output_field=DecimalField(max_digits=14, decimal_places=6),
    )
    inside = records.exclude(straddling(periods)) if len(periods) > 1 else records
    scale = Value(Decimal(10) ** minor_unit(currency))
    return (
        inside.annotate(segment=segment(periods))
        .annotate(
            cost=ExpressionWrapper(
                F("quantity") * Coalesce(price, Value(Decimal(0))),
                output_field=DecimalField(max_digits=40, decimal_places=12),
            )
        )
        .annotate(units=_HalfUpUnits(F("cost") * scale + Value(Decimal(1800)), Value(3600)))
    )


def record_costs(
    records: QuerySet[UsageRecord], periods: list[RatePeriod], kind: str
) -> dict[int, Decimal]:
    """Record id -> quantity × price as :func:`with_cost` annotates it, for the ``records`` that
    straddle a rate change (split by :func:`billing.pricing.prorate`); one query."""
    if len(periods) < 2:
        return {}
    bounds = [(p.start, p.end) for p in periods]
    out = {}
    for pk, model_id, quantity, start, end in records.filter(straddling(periods)).values_list(
        "pk", "gpu_model_id", "quantity", "period_start", "period_end"
    ):
        parts = prorate(quantity, start, end, bounds)
        out[pk] = priced_seconds(parts, periods, kind, model_id)
    return out


def segment_sums_by_team(
    month: date,
    periods: list[RatePeriod],
    team_ids: list[int] | None = None,
    pool_id: int | None = None,
) -> tuple[dict[int, dict[tuple, list[Decimal]]], set[int]]:
    """Raw quantity per team, :data:`STATEMENT_KEY` and rate period index (:func:`period_sums`
    of the month's records: of ``team_ids``, or of every team; of the allocations in
    ``pool_id`` only, when given), and the teams with any usage record in the month (charged
    or not)."""
    records = UsageRecord.objects.filter(month=month)
    if team_ids is not None:
        records = records.filter(team_id__in=team_ids)
    if pool_id is not None:
        records = records.filter(allocation__pool_id=pool_id)
    sums, seen = period_sums(records, periods, ("team_id", *STATEMENT_KEY))
    by_team: dict[int, dict[tuple, list[Decimal]]] = defaultdict(dict)
    for (team_id, *key), per_period in sums.items():
        by_team[team_id][tuple(key)] = per_period
    return by_team, {key[0] for key in seen}


def lines_from_sums(
    month: date, periods: list[RatePeriod], currency: str, sums: dict[tuple, list[Decimal]]
) -> tuple[list[LineData], list[dict]]:
    """Price one team's segment sums: one line per key and rate period (adjacent periods
    with the same price merge), rounded once; unpriced usage becomes a warning."""
    lines: list[LineData] = []
    warnings: list[dict[str, Any]] = []
    for key, per_period in sums.items():
        gpu_model_id, served, basis, unit, pool_id = key
        kind = rate_kind(basis, unit)
        current: LineData | None = None
        for period, raw in zip(periods, per_period, strict=True):
            if not raw:
                continue
            if unit == UsageUnit.UNMETERED_REQUESTS:
                # Counted and shown, never priced as 0 tokens: the gateway sent no usage.
                warnings.append({"code": "unmetered_requests", "served_model": served,
                                 "requests": str(raw), "from": period.rate_from.isoformat(),
                                 "to": period.rate_to.isoformat()})  # fmt: skip
                continue
            price = price_for(period, kind, gpu_model_id, served, pool_id) if kind else None
            if basis == ChargeBasis.REPLAYED and not period.replayed_tokens_charged:
                price = Decimal(0)  # shown for showback; this card does not charge replays
            if price is None:
                warnings.append({"code": "unpriced", "gpu_model_id": gpu_model_id,
                                 "served_model": served, "basis": basis, "unit": unit,
                                 **({"pool_id": pool_id} if pool_id else {}),
                                 "quantity": str(raw), "from": period.rate_from.isoformat(),
                                 "to": period.rate_to.isoformat()})  # fmt: skip
                continue
            if (
                current is not None
                and current.unit_price == price
                and current.rate_to == period.rate_from
            ):  # noqa: E501
                raw_total = current.raw_quantity + raw
                merged = priced_line(month, key, raw_total, period, price, currency)
                current = replace(
                    merged, rate_from=current.rate_from, rate_card_id=current.rate_card_id
                )  # noqa: E501
                lines[-1] = current
                continue
            current = priced_line(month, key, raw, period, price, currency)
            lines.append(current)
    return lines, warnings


def ambiguous_time_notes(month: date, team_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """Per team, one statement warning per usage record of ``month`` metered from a wall-clock
    time that happened twice (flag ``ambiguous_time``): both readings, the billed first one
    and the other, as ISO 8601 times and card-hours (6 places), with the line's GPU model and
    basis so a page can put it on that line. One query for all ``team_ids``."""
    notes: dict[int, list[dict[str, Any]]] = defaultdict(list)
    records = UsageRecord.objects.filter(
        month=month, team_id__in=team_ids, flag=UsageFlag.AMBIGUOUS_TIME
    ).order_by("period_start", "id")
    for r in records:
        other = r.other_reading_quantity
        notes[r.team_id].append({
            "code": "ambiguous_time", "gpu_model_id": r.gpu_model_id, "basis": r.basis,
            "source_id": r.source_id, "job_id": r.source_id.split(":")[1],
            "billed_start": r.period_start.isoformat(), "billed_end": r.period_end.isoformat(),
            "billed_card_hours": str(card_hours_rounded(r.quantity)),
            "other_start": r.other_reading_start.isoformat(),
            "other_end": r.other_reading_end.isoformat(),
            "other_card_hours": None if other is None else str(card_hours_rounded(other)),
        })  # fmt: skip
    return notes


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
    uses = SharedCardUse.objects.filter(overlap_q(start, end, fields=PERIOD))
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


def shared_card_lines(
    month: date,
    team_ids: list[int] | None = None,
    pool_id: int | None = None,
    periods: list[RatePeriod] | None = None,
) -> tuple[dict[int, list[LineData]], dict[int, list[dict]]]:
    """Per team, one line per shared card, share basis and rate period: the team's card-hours
    of the card and its cents of the card's amount (:func:`shared_card_splits`:
    the tenants and the idle remainder add up to the card's amount exactly); and per team the
    warnings of its cards that could not be billed (``shared_card_unpriced``,
    ``shared_card_over_shared``). Of ``team_ids`` only, of cards in ``pool_id``, when given."""
    lines: dict[int, list[LineData]] = defaultdict(list)
    warnings: dict[int, list[dict]] = defaultdict(list)
    cards, _ = shared_card_splits(month=month, team_ids=team_ids, pool_id=pool_id,
                                  periods=periods)  # fmt: skip
    for card in cards:
        period = card.period
        if card.split is None:
            for tenant in card.tenants:
                warnings[tenant].append({
                    "code": f"shared_card_{card.problem}", "gpu_id": card.gpu.pk,
                    "gpu_model_id": card.gpu.gpu_model_id, "detail": card.detail,
                    "from": period.rate_from.isoformat(), "to": period.rate_to.isoformat(),
                })  # fmt: skip
            continue
        for part in card.split.parts:
            raw = Decimal(part.card_seconds.numerator) / Decimal(part.card_seconds.denominator)
            share = Decimal(part.share.numerator) / Decimal(part.share.denominator)
            lines[part.tenant].append(
                LineData(
                    LineKind.USAGE,
                    month,
                    card.gpu.gpu_model_id,
                    "",
                    ChargeBasis.SHARED,
                    CARD_HOURS,
                    raw,
                    card_hours_rounded(raw),
                    card.price,
                    part.amount,
                    period.rate_from,
                    period.rate_to,
                    period.card_id,
                    card.gpu.pk,
                    share.quantize(Decimal("0.000001"), ROUND_HALF_UP),
                    part.basis,
                )  # fmt: skip
            )
    if team_ids is not None:
        wanted = set(team_ids)
        return (
            {t: x for t, x in lines.items() if t in wanted},
            {t: x for t, x in warnings.items() if t in wanted},
        )
    return dict(lines), dict(warnings)


def statement_lines_compute(*, team_id: int, month: date) -> tuple[list[LineData], list[dict], str]:
    """The usage lines of a team's month (its shared-card lines among them), its warnings
    (unpriced usage, usage metered from an ambiguous time, shared cards not billed) and
    currency."""
    periods = rate_periods(month=month, zone=billing_zone())
    currency = month_currency(periods)
    sums = segment_sums_by_team(month, periods, [team_id])[0].get(team_id, {})
    lines, warnings = lines_from_sums(month, periods, currency, sums)
    warnings += ambiguous_time_notes(month, [team_id]).get(team_id, [])
    shared, shared_warnings = shared_card_lines(month, [team_id], periods=periods)
    lines += shared.get(team_id, [])
    warnings += shared_warnings.get(team_id, [])
    return lines, warnings, currency


def usage_lines_by_team(
    *, month: date, team_ids: list[int] | None = None, pool_id: int | None = None
) -> tuple[dict[int, list[LineData]], str]:
    """The usage lines each team's statement for ``month`` would charge (team id -> lines,
    teams without charged usage absent) and the month's currency: the lines of
    :func:`statement_lines_compute`, for many teams in one ``GROUP BY``.

    ``pool_id`` keeps the usage of allocations in that pool (reserved and burst card-hours,
    and used card-hours metered against one) and the shared cards in it; usage tied to no
    allocation has no pool.
    """
    periods = rate_periods(month=month, zone=billing_zone())
    currency = month_currency(periods)
    sums, _ = segment_sums_by_team(month, periods, team_ids, pool_id)
    lines = {
        team_id: lines_from_sums(month, periods, currency, team_sums)[0]
        for team_id, team_sums in sums.items()
    }
    shared, _ = shared_card_lines(month, team_ids, pool_id, periods)
    for team_id, team_lines in shared.items():
        lines.setdefault(team_id, []).extend(team_lines)
    return lines, currency
