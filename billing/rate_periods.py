"""Rate periods: the prices in force over a month, read from the rate cards.

An open-ended card ends where the next card starts, so a price change is simply a new card
with a later ``effective_from``. Cards with an explicit end must not overlap the next one, and
all cards touching one month must share a currency. Cards are written by
:func:`billing.services.rates.rate_card_create`; everything that prices usage reads them here.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import date, datetime, tzinfo
from decimal import Decimal

from billing.choices import EXTRA_RATE_KINDS, ChargeBasis, RateKind, UsageUnit
from billing.conf import default_currency
from billing.errors import RateCardConflict
from billing.models import RateCard, RateCardEntry
from billing.pricing import local_midnight, month_of, next_month
from pools.capacity.arithmetic import clip

PriceKey = tuple[str, int | None, str]  # (rate kind, gpu model id, served model)
PoolPriceKey = tuple[str, int | None, int | None]  # (rate kind, pool id, gpu model id)
POOL_RATE_KINDS = (RateKind.POOL_BURST, *EXTRA_RATE_KINDS)


@dataclass(frozen=True)
class RatePeriod:
    """Prices in force over ``[start, end)`` (local midnights), from ``card`` (None: a gap)."""

    start: datetime
    end: datetime
    rate_from: date
    rate_to: date
    card_id: int | None
    currency: str | None
    prices: dict[PriceKey, Decimal]
    # The card's policy for tokens a gateway replayed from its cache (basis "replayed").
    replayed_tokens_charged: bool = False
    # Issue 35: burst-pool card-hour, storage and egress prices (pool None: every pool's).
    pool_prices: dict[PoolPriceKey, Decimal] = dataclass_field(default_factory=dict)


def rate_kind(basis: str, unit: str) -> str | None:
    """Which price a usage record is charged at; ``None`` for ``included`` (not charged) and
    for unmetered requests (no tokens to price). Replayed tokens name their token price; the
    period's ``replayed_tokens_charged`` decides whether it applies."""
    if unit == UsageUnit.CARD_SECONDS:
        return {
            ChargeBasis.RESERVED: RateKind.GPU_RESERVED,
            ChargeBasis.USED: RateKind.GPU_USED,
            ChargeBasis.BURST: RateKind.GPU_BURST,
            ChargeBasis.BURST_POOL: RateKind.POOL_BURST,
        }.get(basis)
    if unit == UsageUnit.GB_MONTHS:
        return RateKind.STORAGE_GB_MONTH
    if unit == UsageUnit.GB:
        return RateKind.EGRESS_GB
    return {
        UsageUnit.INPUT_TOKENS: RateKind.TOKEN_INPUT,
        UsageUnit.CACHED_INPUT_TOKENS: RateKind.TOKEN_CACHED_INPUT,
        UsageUnit.OUTPUT_TOKENS: RateKind.TOKEN_OUTPUT,
    }.get(unit)


def price_for(
    period: RatePeriod,
    kind: str,
    gpu_model_id: int | None,
    served: str,
    pool_id: int | None = None,
) -> Decimal | None:  # noqa: E501
    """The period's price; cached input falls back to the input price when the card has none
    (a model served without prefix caching discounts), and elastic burst to the reserved price
    of the GPU model (issue #19: burst is priced like reserved cards unless the card says).

    A burst pool's card-hour is the card's price for that pool and GPU model, never another's
    (rented capacity has its own price; issue 35); storage and egress are the pool's own
    price, else the card's price for every pool."""
    if kind in POOL_RATE_KINDS:
        price = period.pool_prices.get((kind, pool_id, gpu_model_id))
        if price is None and kind in EXTRA_RATE_KINDS:
            price = period.pool_prices.get((kind, None, None))
        return price
    price = period.prices.get((kind, gpu_model_id, served))
    if price is None and kind == RateKind.TOKEN_CACHED_INPUT:
        price = period.prices.get((RateKind.TOKEN_INPUT, gpu_model_id, served))
    if price is None and kind == RateKind.GPU_BURST:
        price = period.prices.get((RateKind.GPU_RESERVED, gpu_model_id, served))
    return price


def card_end(cards: list[RateCard], index: int) -> date | None:
    card = cards[index]
    following = cards[index + 1].effective_from if index + 1 < len(cards) else None
    if card.effective_to is None:
        return following
    if following is not None and card.effective_to > following:
        raise RateCardConflict(
            f"Rate card {card} overlaps {cards[index + 1]}.",
            cards=[card.pk, cards[index + 1].pk],
        )
    return card.effective_to


def month_windows(cards: list[RateCard], month: date) -> list[tuple[date, date, RateCard]]:
    """The days ``[from, to)`` each of ``cards`` is in force within ``month`` (its first day),
    in order, cards not in force in it left out. ``cards``: rate cards sorted by
    ``effective_from``, as stored or as a change would leave them
    (:func:`billing.services.rates.rate_card_check`); those starting after the month are
    ignored. Raises :class:`RateCardConflict` (data ``cards``) when two of them overlap
    (:func:`card_end`) or the month's cards mix currencies: a month is billed in one. No
    query."""
    month_end = next_month(month)
    cards = [card for card in cards if card.effective_from < month_end]
    windows: list[tuple[date, date, RateCard]] = []
    for index, card in enumerate(cards):
        end = card_end(cards, index)
        if (span := clip(card.effective_from, end or month_end, month, month_end)) is not None:
            windows.append((*span, card))
    currencies = {card.currency for _, _, card in windows}
    if len(currencies) > 1:
        raise RateCardConflict(
            f"Rate cards of {month:%Y-%m} mix currencies {sorted(currencies)}.",
            cards=[card.pk for _, _, card in windows],
        )
    return windows


def rate_periods(*, month: date, zone: tzinfo) -> list[RatePeriod]:
    """The month cut into periods of constant prices (gaps without a card included)."""
    month_end = next_month(month)
    cards = list(RateCard.objects.filter(effective_from__lt=month_end).order_by("effective_from"))
    windows: list[tuple[date, date, RateCard | None]] = list(month_windows(cards, month))
    filled: list[tuple[date, date, RateCard | None]] = []
    cursor = month
    for start_day, end_day, card in windows:
        if start_day > cursor:
            filled.append((cursor, start_day, None))
        filled.append((start_day, end_day, card))
        cursor = end_day
    if cursor < month_end:
        filled.append((cursor, month_end, None))
    entries: dict[int, dict[PriceKey, Decimal]] = {}
    pool_entries: dict[int, dict[PoolPriceKey, Decimal]] = {}
    card_ids = [card.pk for _, _, card in filled if card]
    for entry in RateCardEntry.objects.filter(rate_card_id__in=card_ids):
        if entry.kind in POOL_RATE_KINDS:
            pool_entries.setdefault(entry.rate_card_id, {})[
                (entry.kind, entry.pool_id, entry.gpu_model_id)
            ] = entry.price
            continue
        entries.setdefault(entry.rate_card_id, {})[
            (entry.kind, entry.gpu_model_id, entry.served_model)
        ] = entry.price
    return [
        RatePeriod(
            start=local_midnight(a, zone),
            end=local_midnight(b, zone),
            rate_from=a,
            rate_to=b,
            card_id=card.pk if card else None,
            currency=card.currency if card else None,
            prices=entries.get(card.pk, {}) if card else {},
            replayed_tokens_charged=bool(card and card.replayed_tokens_charged),
            pool_prices=pool_entries.get(card.pk, {}) if card else {},
        )
        for a, b, card in filled
    ]


def rate_period_at(instant: datetime, *, zone: tzinfo) -> RatePeriod | None:
    """The period of prices in force at ``instant`` (aware); ``None`` when the month's cards
    mix currencies (no single price list to read)."""
    try:
        periods = rate_periods(month=month_of(instant, zone), zone=zone)
    except RateCardConflict:
        return None
    return period_in(periods, instant)


def rate_periods_or_unpriced(*, month: date, zone: tzinfo) -> list[RatePeriod]:
    """:func:`rate_periods`; when the month's cards mix currencies (no single price list to
    read), one period without a card over the whole month instead: nothing in it is priced, as
    in a gap between cards, where :func:`rate_period_at` answers ``None``."""
    try:
        return rate_periods(month=month, zone=zone)
    except RateCardConflict:
        end = next_month(month)
        start_at, end_at = local_midnight(month, zone), local_midnight(end, zone)
        return [RatePeriod(start_at, end_at, month, end, None, None, {})]


def period_in(periods: list[RatePeriod], instant: datetime) -> RatePeriod | None:
    """Of ``periods`` (:func:`rate_periods` of ``instant``'s month, read by the caller), the one
    in force at ``instant`` (aware); ``None`` when none covers it. No query."""
    return next((p for p in periods if p.start <= instant < p.end), None)


def month_currency(periods: list[RatePeriod]) -> str:
    """The currency of a month's rate periods: its cards' one currency, else the configured
    default (no card covers the month)."""
    return next((p.currency for p in periods if p.currency), None) or default_currency()


_KEPT_PERIODS: dict[tuple[date, str, int], list[RatePeriod]] = {}
_KEPT_MAX = 256


def rate_periods_kept(*, month: date, zone: tzinfo, version: int) -> list[RatePeriod]:
    """:func:`rate_periods`, kept in this process under the price list's ``version``
    (:class:`billing.models.PriceListVersion`, read by the caller in a query it makes anyway):
    every rate-card write draws a new random version, never reused, so a kept list is the one
    of its version. Version 0 (no change went through the services) is read every time. Up to
    :data:`_KEPT_MAX` lists are kept (then all are dropped): a process asks for few months.
    Treat the answer as read-only."""
    if not version:
        return rate_periods(month=month, zone=zone)
    key = (month, str(zone), version)
    periods = _KEPT_PERIODS.get(key)
    if periods is None:
        periods = rate_periods(month=month, zone=zone)
        if len(_KEPT_PERIODS) >= _KEPT_MAX:
            _KEPT_PERIODS.clear()
        _KEPT_PERIODS[key] = periods
    return periods
