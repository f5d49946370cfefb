"""Serving efficiency in money: the effective cost per million output tokens of an allocation,
priced from its own card-hours at the rate card's reserved price for its GPU model (the prices
of :func:`billing.rate_periods.rate_periods`, looked up with
:func:`~billing.rate_periods.price_for`; nothing restated here).

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
from billing.rate_periods import RatePeriod, price_for, rate_periods_or_unpriced
from pools.capacity.models import Allocation
from pools.serving.efficiency import Usage, cost_per_million
from pools.serving.selectors import (
    RollupState,
    allocations_served,
    merge_usage,
    serving_current,
    serving_state,
    serving_usage,
)


@dataclass(frozen=True)
class ServingEfficiency:
    """One allocation's (or group's) month: its :class:`Usage`; ``cost``, what holding its
    cards cost (held card-hours x the reserved price, whether or not tokens were counted);
    ``token_cost``, the cost of its token-covered card-hours and that per million output
    tokens (``cost_per_million_output``), all in ``currency``, ``None`` where part of the time
    has no price; and the rate card's own output-token price when it has one (beside it, for
    comparison)."""

    usage: Usage
    cost: Decimal | None
    token_cost: Decimal | None
    currency: str
    cost_per_million_output: Decimal | None
    token_output_price: Decimal | None


def _add_cost(total: Decimal | None, card_hours: Decimal, price: Decimal | None):
    """``total`` plus ``card_hours`` x ``price``; ``None`` (unknown) once some card-hours
    have no price. No card-hours cost nothing, priced or not."""
    if not card_hours:
        return total
    return None if price is None or total is None else total + card_hours * price


def serving_efficiency(
    *, allocations: Iterable[Allocation], month: date, periods: list[RatePeriod] | None = None
) -> dict[int, ServingEfficiency]:
    """Per allocation id, the month's efficiency (module docstring). One usage query per rate
    period of the month (one, unless the rate card changed within it). ``periods``: the
    month's :func:`~billing.rate_periods.rate_periods` if the caller read them (the rate cards
    are not read again), else read here; a month whose cards mix currencies has no cost
    (:func:`~billing.rate_periods.rate_periods_or_unpriced`), its usage is still counted."""
    allocations = list(allocations)
    zone = billing_zone()
    start, end = month_bounds(month, zone)
    if periods is None:
        periods = rate_periods_or_unpriced(month=month, zone=zone)
    periods = [p for p in periods if p.end > start and p.start < end]
    currency = next((p.currency for p in periods if p.currency), None) or "EUR"
    models = {a.pk: a.gpu_model_id for a in allocations}
    parts: dict[int, list[Usage]] = {}
    held_costs: dict[int, Decimal | None] = {}
    token_costs: dict[int, Decimal | None] = {}
    for period in periods:
        usage = serving_usage(allocation_ids=models, start=period.start, end=period.end)
        for allocation_id, used in usage.items():
            parts.setdefault(allocation_id, []).append(used)
            price = price_for(period, RateKind.GPU_RESERVED, models[allocation_id], "")
            held_costs[allocation_id] = _add_cost(
                held_costs.get(allocation_id, Decimal(0)), used.held_card_hours, price
            )
            token_costs[allocation_id] = _add_cost(
                token_costs.get(allocation_id, Decimal(0)), used.token_card_hours, price
            )
    output_price = _token_output_price(periods)
    out = {}
    for allocation_id, items in parts.items():
        usage = merge_usage(items)
        held, token = held_costs[allocation_id], token_costs[allocation_id]
        per_million = cost_per_million(token, usage.output_tokens)
        out[allocation_id] = ServingEfficiency(
            usage=usage,
            cost=None if held is None else round_money(held, currency),
            token_cost=None if token is None else round_money(token, currency),
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


# ------------------------------------------------------------------------- dashboard tables

# Sort keys of the serving table (?serving_sort=<key>, "-<key>" descending); unknown last.
SORT_KEYS = {
    "allocation": lambda r: r["allocation"].pk,
    "waiting": lambda r: r["now"].get("requests_waiting"),
    "kv": lambda r: r["now"].get("kv_cache_usage_pct"),
    "ttft": lambda r: r["now"].get("ttft_p95_s"),
    "output": lambda r: r["now"].get("generation_tokens"),
    "per_card_hour": lambda r: (
        r["efficiency"] and r["efficiency"].usage.output_tokens_per_card_hour
    ),
    "busy": lambda r: r["efficiency"] and r["efficiency"].usage.busy_share,
    "cost": lambda r: r["efficiency"] and r["efficiency"].cost_per_million_output,
}


# The table's columns: (sort key or "", header, numeric)
HEADERS = (
    ("allocation", "#", False), ("", "Pool", False), ("", "Cards", False), ("", "Engine", False),
    ("waiting", "Waiting", True), ("kv", "KV cache", True), ("ttft", "TTFT p95", True),
    ("output", "Output tok/s", True), ("per_card_hour", "Output tok / card-h (month)", True),
    ("busy", "Busy", True), ("cost", "Cost / 1M output", True),
)  # fmt: skip


def serving_rows(
    *,
    allocations: Iterable[Allocation],
    month: date,
    now,
    state: RollupState | None = None,
    periods: list[RatePeriod] | None = None,
) -> list[dict]:
    """One row per allocation with stored rollups: its newest values (``now``: field -> value,
    empty when it has none in the newest bucket) and the month's :class:`ServingEfficiency`
    (``None`` without rollups this month). Constant queries whatever the number. ``state``:
    the rollups' :func:`~pools.serving.selectors.serving_state` at ``now`` if the caller read
    it already (two queries less), else read here; ``periods`` likewise the month's rate
    periods (:func:`serving_efficiency`)."""
    allocations = list(allocations)
    state = state or serving_state(now=now)
    current = serving_current(allocation_ids=[a.pk for a in allocations], state=state)
    efficiency = serving_efficiency(allocations=allocations, month=month, periods=periods)
    return [
        {
            "allocation": a,
            "now": current.get(a.pk, {}),
            "efficiency": efficiency.get(a.pk),
            "stale": state.stale,
        }
        for a in allocations
        if a.pk in current or a.pk in efficiency
    ]


def sort_rows(rows: list[dict], key: str) -> tuple[list[dict], str]:
    """``rows`` sorted by ``key`` (:data:`SORT_KEYS`, ``-`` for descending), unknown values last
    either way; an unknown key sorts by allocation. Returns the rows and the key used."""
    name = key.removeprefix("-")
    if name not in SORT_KEYS:
        key, name = "allocation", "allocation"
    read = SORT_KEYS[name]
    known = [r for r in rows if read(r) is not None]
    unknown = [r for r in rows if read(r) is None]
    known.sort(key=read, reverse=key.startswith("-"))
    return known + unknown, key


def _sum_known(amounts: Iterable[Decimal | None]) -> Decimal | None:
    """The amounts added up; ``None`` (unknown) if any is."""
    amounts = list(amounts)
    return None if any(a is None for a in amounts) else sum(amounts, Decimal(0))


def serving_groups(rows: list[dict]) -> list[dict]:
    """The rows' month efficiency added up per pool x GPU model x team: held and busy
    card-hours, tokens, tokens per card-hour, what holding the cards cost (``cost``) and the
    cost per million output tokens (of the token-covered card-hours)."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        if row["efficiency"] is None:
            continue
        a = row["allocation"]
        groups.setdefault((a.pool.name, a.gpu_model.name, a.team.name), []).append(row)
    out = []
    for (pool, gpu_model, team), items in sorted(groups.items()):
        usage = merge_usage(r["efficiency"].usage for r in items)
        cost, token_cost = (_sum_known(r["efficiency"].cost for r in items),
                            _sum_known(r["efficiency"].token_cost for r in items))  # fmt: skip
        currency = items[0]["efficiency"].currency
        per_million = cost_per_million(token_cost, usage.output_tokens)
        out.append(
            {
                "pool": pool,
                "gpu_model": gpu_model,
                "team": team,
                "allocations": len(items),
                "usage": usage,
                "cost": cost,
                "currency": currency,
                "cost_per_million_output": (
                    None if per_million is None else round_money(per_million, currency)
                ),
            }
        )
    return out


def team_showback(*, team_id: int, month: date) -> list[dict]:
    """The statement's showback section: each of the team's allocations with rollups in the
    month and its :class:`ServingEfficiency` (not a charge; the statement's lines are)."""
    start, end = month_bounds(month, billing_zone())
    allocations = list(allocations_served(start=start, end=end).filter(team_id=team_id))
    efficiency = serving_efficiency(allocations=allocations, month=month)
    return [
        {"allocation": a, "efficiency": efficiency[a.pk]} for a in allocations if a.pk in efficiency
    ]
