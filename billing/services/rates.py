"""Rate cards: creating one. The prices in force over a month are read in
:mod:`billing.rate_periods`."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db import transaction

from billing.conf import billing_zone
from billing.errors import RateCardConflict
from billing.models import RateCard, RateCardEntry

# billing.budgets (services, enforcement) reads these here; they live in billing.rate_periods
from billing.rate_periods import PoolPriceKey, card_end, price_for, rate_periods  # noqa: F401
from billing.services.versions import price_list_changed
from pools.common.errors import InvalidInput
from pools.common.validators import single_line_text_validator


@transaction.atomic
def rate_card_create(
    *,
    name: str,
    currency: str,
    effective_from: date,
    effective_to: date | None = None,
    gpu_prices: dict[tuple[int, str], Decimal] | None = None,
    token_prices: dict[tuple[str, str], Decimal] | None = None,
    pool_prices: dict[PoolPriceKey, Decimal] | None = None,
) -> RateCard:
    """A card with its entries. ``gpu_prices``: ``{(gpu_model_id, RateKind): price per
    card-hour}``; ``token_prices``: ``{(served_model, RateKind): price per million}``;
    ``pool_prices`` (issue 35): ``{(RateKind, pool_id, gpu_model_id): price}`` — a burst pool's
    card-hour (pool and GPU model), storage per GB-month and egress per GB (pool or ``None``
    for every pool, no GPU model).

    Raises :class:`InvalidInput` (field ``name`` or ``served_model``) for a name with control
    characters or bidirectional marks (shown on statements: one line, left to right), and
    (field ``currency``) for a card whose currency differs from a card it shares a month with:
    a month's statements are in one currency, so such a month could be neither billed nor
    shown (:func:`billing.rate_periods.rate_periods` refuses it). Nothing is written then."""
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
        + [
            RateCardEntry(
                rate_card=card, kind=kind, pool_id=pool_id, gpu_model_id=model_id, price=Decimal(p)
            )  # fmt: skip
            for (kind, pool_id, model_id), p in (pool_prices or {}).items()
        ]
    )
    cards = list(RateCard.objects.order_by("effective_from"))
    for index in range(len(cards)):
        card_end(cards, index)  # raises on overlap, rolling the new card back
    _check_one_currency_a_month(card, card_end(cards, cards.index(card)))
    price_list_changed()
    return card


def _check_one_currency_a_month(card: RateCard, end: date | None) -> None:
    """Raise :class:`InvalidInput` (field ``currency``) when the new ``card`` (in force from its
    ``effective_from`` to ``end``, ``None`` open) shares a month with a card of another
    currency. Only its first and last months can hold another card: the ones between are its
    own."""
    months = {card.effective_from.replace(day=1)}
    if end is not None:
        months.add((end - timedelta(days=1)).replace(day=1))
    for month in sorted(months):
        try:
            rate_periods(month=month, zone=billing_zone())
        except RateCardConflict as exc:
            message = (
                f"{card.currency} differs from the currency of a rate card in force in "
                f"{month:%Y-%m}: a month is billed in one currency. {exc}"
            )
            raise InvalidInput(message, errors={"currency": [message]}) from None
