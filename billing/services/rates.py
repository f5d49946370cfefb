"""Rate cards: creating one. The prices in force over a month are read in
:mod:`billing.rate_periods`."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db import transaction

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
    price_list_changed()
    return card
