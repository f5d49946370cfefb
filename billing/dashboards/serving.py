"""Serving efficiency in money: the effective cost per million output tokens of an allocation,
priced from its own card-hours at the rate card's reserved price for its GPU model (the prices
of :func:`billing.services.rates.rate_periods`, looked up with
:func:`~billing.services.rates.price_for`; nothing restated here).

Only the card-hours of buckets where the engine reported tokens are priced against those
tokens (a bucket without token series would otherwise make the tokens look dearer). The
figure is showback: what holding the cards cost per million tokens they produced, not a
charge. ``None`` where there is no price for part of that time, or no token was counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from billing.choices import RateKind
from billing.conf import billing_zone
from billing.pricing import month_bounds, round_money
from billing.services.rates import price_for, rate_periods
from pools.capacity.models import Allocation
from pools.serving.efficiency import Usage, cost_per_million
from pools.serving.selectors import merge_usage, serving_usage


@dataclass(frozen=True)
class ServingEfficiency:
    """One allocation's (or group's) month: its :class:`Usage`, the cost of its token-covered
    card-hours (``currency``), that cost per million output tokens, and the rate card's own
    output-token price when it has one (beside it, for comparison)."""

    usage: Usage
    cost: Decimal | None
    currency: str
    cost_per_million_output: Decimal | None
    token_output_price: Decimal | None


def serving_efficiency(
    *, allocations: Iterable[Allocation], month: date
) -> dict[int, ServingEfficiency]:
    """Per allocation id, the month's efficiency (module docstring). One usage query per rate
    period of the month (one, unless the rate card changed within it)."""
    allocations = list(allocations)
    zone = billing_zone()
    start, end = month_bounds(month, zone)
    periods = [p for p in rate_periods(month=month, zone=zone) if p.end > start and p.start < end]
    currency = next((p.currency for p in periods if p.currency), None) or "EUR"
    models = {a.pk: a.gpu_model_id for a in allocations}
    parts: dict[int, list[Usage]] = {}
    costs: dict[int, Decimal | None] = {}
    for period in periods:
        usage = serving_usage(allocation_ids=models, start=period.start, end=period.end)
        for allocation_id, used in usage.items():
            parts.setdefault(allocation_id, []).append(used)
            price = price_for(period, RateKind.GPU_RESERVED, models[allocation_id], "")
            if allocation_id not in costs:
                costs[allocation_id] = Decimal(0)
            if not used.token_card_hours:
                continue
            previous = costs[allocation_id]
            costs[allocation_id] = (
                None
                if price is None or previous is None
                else previous + used.token_card_hours * price
            )
    output_price = _token_output_price(periods)
    out = {}
    for allocation_id, items in parts.items():
        usage = merge_usage(items)
        cost = costs.get(allocation_id)
        per_million = cost_per_million(cost, usage.output_tokens)
        out[allocation_id] = ServingEfficiency(
            usage=usage,
            cost=None if cost is None else round_money(cost, currency),
            currency=currency,
            cost_per_million_output=(
                None if per_million is None else round_money(per_million, currency)
            ),
            token_output_price=output_price,
        )
    return out


def _token_output_price(periods) -> Decimal | None:
    """The month's default output-token price (no GPU model, no served model named), when one
    rate card covers the month with one; else ``None``."""
    prices = {p.prices.get((RateKind.TOKEN_OUTPUT, None, "")) for p in periods if p.card_id}
    return prices.pop() if len(prices) == 1 else None
