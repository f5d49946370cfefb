"""Rate cards: creating one. The prices in force over a month are read in
:mod:`billing.rate_periods`."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from operator import attrgetter

from django.core.exceptions import ValidationError
from django.db import transaction

from billing.errors import RateCardConflict
from billing.locks import RATE_CARDS_LOCK, billing_lock
from billing.models import RateCard, RateCardEntry

# billing.budgets (services, enforcement) reads these here; they live in billing.rate_periods
from billing.rate_periods import PoolPriceKey, card_end, month_windows, price_for, rate_periods  # noqa: F401
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
    rate_card_check(card)  # raises on an overlap or a mixed month, rolling the new card back
    price_list_changed()
    return card


def rate_card_check(card: RateCard, *, delete: bool = False) -> None:
    """Check the stored rate cards as they would be with ``card`` as given — a new card, a
    stored one changed (its stored version set aside: the admin's form), or a stored one
    removed (``delete``) — against the rules every price reader relies on
    (:func:`billing.rate_periods.rate_periods`). The one check of :func:`rate_card_create` and
    of the admin's rate-card form and delete.

    Raises :class:`RateCardConflict` (data ``cards``) when two cards would overlap, and
    :class:`InvalidInput` (field ``currency``) when a month would hold cards of two
    currencies: a month's statements are in one currency, so such a month could be neither
    billed nor shown. A month holds two cards only if it is the later one's first month, so
    the months read are the first months of ``card`` and of the card after it, as stored and
    as changed. Reads the cards (one query); writes nothing. Call inside a transaction: it
    takes the rate-card lock (:data:`billing.locks.RATE_CARDS_LOCK`) until it ends, so a card
    written at the same time is checked after this one is stored or given up."""
    billing_lock(RATE_CARDS_LOCK)
    stored = list(RateCard.objects.order_by("effective_from", "pk"))
    others = [c for c in stored if card.pk is None or c.pk != card.pk]
    # stable: a card starting on a stored card's day sorts after it (the unique start refuses it)
    cards = others if delete else sorted([*others, card], key=attrgetter("effective_from"))
    for index in range(len(cards)):
        card_end(cards, index)  # raises RateCardConflict on an overlap
    months = _first_months_from(stored, card) | _first_months_from(cards, card)
    for month in sorted(months):
        try:
            month_windows(cards, month)
        except RateCardConflict as exc:
            message = (
                f"{card.currency} differs from the currency of a rate card in force in "
                f"{month:%Y-%m}: a month is billed in one currency. {exc}"
                if not delete
                else f"Without {card}, {month:%Y-%m} would be billed in two currencies. {exc}"
            )
            raise InvalidInput(message, errors={"currency": [message]}) from None


def _first_months_from(cards: list[RateCard], card: RateCard) -> set[date]:
    """The first months (first days) of ``card`` and of the card after it in ``cards`` (sorted
    by start; ``card`` found as itself, or by id when stored); empty when it is not there."""
    for index, item in enumerate(cards):
        if item is card or (card.pk is not None and item.pk == card.pk):
            return {c.effective_from.replace(day=1) for c in cards[index : index + 2]}
    return set()
