"""Rate cards: creating one, and the prices in force over a month.

An open-ended card ends where the next card starts, so a price change is simply a new card
with a later ``effective_from``. Cards with an explicit end must not overlap the next one, and
all cards touching one month must share a currency.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, tzinfo
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db import transaction

from billing.choices import ChargeBasis, RateKind, UsageUnit
from billing.errors import RateCardConflict
from billing.models import RateCard, RateCardEntry
from billing.pricing import local_midnight, month_of, next_month
from pools.capacity.arithmetic import clip
from pools.errors import InvalidInput
from pools.validators import single_line_text_validator

PriceKey = tuple[str, int | None, str]  # (rate kind, gpu model id, served model)


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


def rate_kind(basis: str, unit: str) -> str | None:
    """Which price a usage record is charged at; ``None`` for ``included`` (not charged) and
    for unmetered requests (no tokens to price). Replayed tokens name their token price; the
    period's ``replayed_tokens_charged`` decides whether it applies."""
    if unit == UsageUnit.CARD_SECONDS:
        return {
            ChargeBasis.RESERVED: RateKind.GPU_RESERVED,
            ChargeBasis.USED: RateKind.GPU_USED,
            ChargeBasis.BURST: RateKind.GPU_BURST,
        }.get(basis)
    return {
        UsageUnit.INPUT_TOKENS: RateKind.TOKEN_INPUT,
        UsageUnit.CACHED_INPUT_TOKENS: RateKind.TOKEN_CACHED_INPUT,
        UsageUnit.OUTPUT_TOKENS: RateKind.TOKEN_OUTPUT,
    }.get(unit)


def price_for(
    period: RatePeriod, kind: str, gpu_model_id: int | None, served: str
) -> Decimal | None:  # noqa: E501
    """The period's price; cached input falls back to the input price when the card has none
    (a model served without prefix caching discounts), and elastic burst to the reserved price
    of the GPU model (issue #19: burst is priced like reserved cards unless the card says)."""
    price = period.prices.get((kind, gpu_model_id, served))
    if price is None and kind == RateKind.TOKEN_CACHED_INPUT:
        price = period.prices.get((RateKind.TOKEN_INPUT, gpu_model_id, served))
    if price is None and kind == RateKind.GPU_BURST:
        price = period.prices.get((RateKind.GPU_RESERVED, gpu_model_id, served))
    return price


def _card_end(cards: list[RateCard], index: int) -> date | None:
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


def rate_periods(*, month: date, zone: tzinfo) -> list[RatePeriod]:
    """The month cut into periods of constant prices (gaps without a card included)."""
    month_end = next_month(month)
    cards = list(RateCard.objects.filter(effective_from__lt=month_end).order_by("effective_from"))
    windows: list[tuple[date, date, RateCard | None]] = []
    for index, card in enumerate(cards):
        end = _card_end(cards, index)
        if (span := clip(card.effective_from, end or month_end, month, month_end)) is not None:
            windows.append((*span, card))
    currencies = {card.currency for _, _, card in windows if card}
    if len(currencies) > 1:
        raise RateCardConflict(
            f"Rate cards of {month:%Y-%m} mix currencies {sorted(currencies)}.",
            cards=[card.pk for _, _, card in windows if card],
        )
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
    card_ids = [card.pk for _, _, card in filled if card]
    for entry in RateCardEntry.objects.filter(rate_card_id__in=card_ids):
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
        )
        for a, b, card in filled
    ]


@transaction.atomic
def rate_card_create(
    *,
    name: str,
    currency: str,
    effective_from: date,
    effective_to: date | None = None,
    gpu_prices: dict[tuple[int, str], Decimal] | None = None,
    token_prices: dict[tuple[str, str], Decimal] | None = None,
) -> RateCard:
    """A card with its entries. ``gpu_prices``: ``{(gpu_model_id, RateKind): price per
    card-hour}``; ``token_prices``: ``{(served_model, RateKind): price per million}``.

    Raises :class:`InvalidInput` (field ``name`` or ``served_model``) for a name with control
    characters or bidirectional marks (shown on statements: one line, left to right)."""
    for field, value in [("name", name)] + [("served_model", s) for s, _ in token_prices or {}]:
        try:
            single_line_text_validator(value)
        except ValidationError as exc:
            raise InvalidInput(exc.messages[0], errors={field: exc.messages}) from None
    card = RateCard.objects.create(
        name=name, currency=currency, effective_from=effective_from, effective_to=effective_to
    )
    RateCardEntry.objects.bulk_create(
        [
            RateCardEntry(rate_card=card, kind=kind, gpu_model_id=model_id, price=Decimal(p))
            for (model_id, kind), p in (gpu_prices or {}).items()
        ]
        + [
            RateCardEntry(rate_card=card, kind=kind, served_model=served, price=Decimal(p))
            for (served, kind), p in (token_prices or {}).items()
        ]
    )
    cards = list(RateCard.objects.order_by("effective_from"))
    for index in range(len(cards)):
        _card_end(cards, index)  # raises on overlap, rolling the new card back
    return card


def rate_period_at(instant: datetime, *, zone: tzinfo) -> RatePeriod | None:
    """The period of prices in force at ``instant`` (aware); ``None`` when the month's cards
    mix currencies (no single price list to read)."""
    try:
        periods = rate_periods(month=month_of(instant, zone), zone=zone)
    except RateCardConflict:
        return None
    return next((p for p in periods if p.start <= instant < p.end), None)
