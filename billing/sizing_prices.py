"""The rate card's prices for the sizing page and API (``settings.SIZING_CARD_HOUR_PRICES``).

``pools`` sits below ``billing`` and cannot import it;
:func:`pools.sizing.services.card_hour_prices` reads this function by the name the setting gives,
so the sizing page prices cards as the statements will: the reserved card-hour rate of the rate
card in force now, in its currency.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.utils import timezone

from billing.choices import RateKind
from billing.conf import billing_zone
from billing.pricing import unit_price_places
from billing.rate_periods import rate_period_at
from pools.inventory.models import GpuModel


def reserved_card_hour_prices(
    *, gpu_slugs: list[str], now: datetime | None = None
) -> tuple[str | None, dict[str, Decimal]]:
    """``(currency, {gpu model slug: price per card-hour})`` of the reserved rate in force at
    ``now``; ``(None, {})`` without a rate card (or with currencies mixed in the month). Models
    the card has no reserved price for are left out (unknown, never 0)."""
    period = rate_period_at(now or timezone.now(), zone=billing_zone())
    if period is None or period.currency is None:
        return None, {}
    ids = dict(GpuModel.objects.filter(slug__in=gpu_slugs).values_list("slug", "pk"))
    prices = {}
    for slug, pk in ids.items():
        price = period.prices.get((RateKind.GPU_RESERVED, pk, ""))
        if price is not None:  # as statements show it: 1.200000 -> 1.20, 0.012500 -> 0.0125
            places = unit_price_places(price, period.currency)
            prices[slug] = price.quantize(Decimal(1).scaleb(-places))
    return (period.currency, prices) if prices else (None, {})
