"""Money of elastic scaling (issue #37): what each scale decision added or released, and the
period's burst, priced as the statements price burst (``settings.ELASTIC_SCALE_COSTS``).

``pools`` sits below ``billing`` and cannot import it; the elastic pages and API read
:func:`elastic_scale_costs` by the name the setting gives.

- A decision's card-hours: the cards it changed (``cards_to`` less the cards held before it, from
  the scale events' timeline that burst metering bills,
  :func:`pools.elastic.selectors.held_timelines`) × the hours from its ``effective_at`` to the
  next change, or to ``now`` (the window's end, if earlier) for the newest. Up: card-hours
  *added*; down (or a hand-back): card-hours *released*. A decision not yet in effect has 0.
- The period's burst: card-hours held above the floor in ``[start, now)``
  (:func:`pools.elastic.metering.burst_card_seconds`, the statement's burst line), and the
  card-hours released by the down decisions inside it (each clipped to the period).
- Price: the rate card's burst card-hour price for the GPU model in force at ``now``
  (:func:`billing.rate_periods.price_for`: the reserved price when the card has no burst
  price), in the card's currency. Cards placed in a burst pool (issue 35: the events'
  ``burst_cards_to`` in their ``burst_pool``) are priced at the card's price for that pool and
  GPU model (``pool-burst``), as the statement's burst-pool line charges them; the home pool's
  burst keeps the rest (total above the floor less them, as
  :func:`billing.services.usage_import.usage_import_elastic_burst` splits it). The period's
  burst is rounded half-up to the currency's minor unit once per part (the home part and each
  burst pool's, like the statement's lines; :func:`billing.pricing.round_money`), a decision's
  and the period's released amount once. A rate change inside the period is not split: all at
  today's price, like :func:`billing.dashboards.costs.allocations_cost_so_far`.
- An allocation priced on use pays its usage, once: its statement has no home burst line (the
  usage on those cards is its used line, :func:`billing.services.usage_import.
  usage_import_elastic_burst`), so its home burst is priced at 0 (``on_use``, the pages say
  why); cards it placed in a burst pool keep that pool's price, as its burst-pool line. So
  does an allocation priced by tokens (``by_tokens``): its tokens pay for its cards at home.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import NamedTuple

from django.db.models import OuterRef, Subquery

from billing.choices import RateKind
from billing.conf import billing_zone
from billing.pricing import format_money, round_money, unit_price_places
from billing.rate_periods import price_for, rate_period_at
from pools.capacity.arithmetic import card_seconds_hours, clip
from pools.common.choices import PricingMethod
from pools.elastic.choices import ScaleAction
from pools.elastic.metering import burst_card_seconds
from pools.elastic.models import ElasticPolicy, ScaleEvent
from pools.inventory.models import GpuModel, Pool
from pools.web.numbers import card_hours_text


def _money(amount: Decimal | None, currency: str | None) -> str | None:
    return None if amount is None or currency is None else format_money(amount, currency)


@dataclass(frozen=True)
class DecisionMoney:
    """One decision's ``cards`` changed (+ added, - released), ``card_hours`` they made (or
    saved) so far, and their ``amount`` (``None``: unpriced)."""

    cards: int
    card_hours: Decimal
    amount: Decimal | None
    currency: str | None

    @property
    def added(self) -> bool:
        return self.cards > 0

    @property
    def card_hours_text(self) -> str:
        """``card_hours`` as every page shows card-hours (:func:`pools.web.numbers.card_hours_text`)
        with its sign and what the decision did: ``+1.250 card-h added``, ``−0.500 card-h
        released``; no sign on a figure that rounds to 0.000 (a decision taken moments ago), so
        never "−0.000"."""
        shown = card_hours_text(self.card_hours)
        sign = "" if shown == "0.000" else ("+" if self.added else "\u2212")
        return f"{sign}{shown}\u00a0card-h {'added' if self.added else 'released'}"

    @property
    def amount_text(self) -> str | None:
        return _money(self.amount, self.currency)


@dataclass(frozen=True)
class BurstPoolMoney:
    """The period's cards placed in one burst pool: ``card_hours`` of them (part of the
    allocation's ``burst_card_hours``) at that pool's ``price_per_card_hour`` (``None``:
    unpriced)."""

    pool_slug: str
    pool_name: str
    card_hours: Decimal
    price_per_card_hour: Decimal | None
    currency: str | None

    @property
    def price_text(self) -> str | None:
        return _price_text(self.price_per_card_hour, self.currency)


def _price_text(price: Decimal | None, currency: str | None) -> str | None:
    """A card-hour price as statements show it (``8.00 EUR``, ``0.0125 EUR``)."""
    if price is None or currency is None:
        return None
    places = unit_price_places(price, currency)
    return f"{price.quantize(Decimal(1).scaleb(-places))}\u00a0{currency}"


@dataclass(frozen=True)
class ElasticMoney:
    """One elastic allocation's scaling money over ``[start, end)`` (``end``: now, or the
    window's end if earlier), with every decision's own figures in ``decisions`` (event id ->
    :class:`DecisionMoney`). ``burst_card_hours`` counts every card above the floor, those
    placed in burst pools included (``burst_pools``, each at its own price);
    ``price_per_card_hour`` is the home pool's burst price. Amounts ``None`` and ``reason``
    set when unpriced; never a 0."""

    start: datetime
    end: datetime
    burst_card_hours: Decimal
    released_card_hours: Decimal
    price_per_card_hour: Decimal | None
    currency: str | None
    burst_amount: Decimal | None
    released_amount: Decimal | None
    reason: str = ""
    decisions: dict[int, DecisionMoney] = field(default_factory=dict)
    burst_pools: tuple[BurstPoolMoney, ...] = ()
    on_use: bool = False  # priced on use: home burst at 0, its usage is the used line
    by_tokens: bool = False  # priced by tokens: home burst at 0, its tokens pay for the cards

    @property
    def burst_amount_text(self) -> str | None:
        return _money(self.burst_amount, self.currency)

    @property
    def released_amount_text(self) -> str | None:
        return _money(self.released_amount, self.currency)

    @property
    def price_text(self) -> str | None:
        """The home pool's burst card-hour price as statements show it."""
        return _price_text(self.price_per_card_hour, self.currency)


def _priced(hours: Decimal, price: Decimal | None, currency: str | None) -> Decimal | None:
    return None if price is None or currency is None else round_money(hours * price, currency)


class _Point(NamedTuple):
    """The cards held from ``at`` (Unix s) on, ``burst`` of them in burst pool ``pool_id``;
    ``event_id`` the decision that set them (0: the window's start or a change before the
    events read)."""

    at: float
    cards: int
    event_id: int
    pool_id: int | None = None
    burst: int = 0

    def in_pool(self, pool_id: int) -> int:
        return self.burst if self.pool_id == pool_id else 0


def _timeline(policy: ElasticPolicy, events: list[ScaleEvent], before: tuple | None):
    """The floor from the window's start, then each change in effect order (the timeline
    burst metering bills), as :class:`_Point`. ``before``: the last change ahead of the events
    read, ``(id, effective_at, cards_to, cards before it, its burst pool, its burst cards, the
    burst pool and cards before it)`` (``None`` cards before: the floor), which opens the
    timeline instead of the window's start."""
    allocation = policy.allocation
    points = [_Point(allocation.starts_at.timestamp(), allocation.card_count, 0)]
    if before is not None and before[0] is not None:
        event_id, at, cards, prior, pool, burst, prior_pool, prior_burst = before
        floor = allocation.card_count
        points = [
            _Point(at.timestamp(), floor if prior is None else prior, 0, prior_pool,
                   prior_burst or 0),
            _Point(at.timestamp(), cards, event_id, pool, burst or 0),
        ]  # fmt: skip
    points += [
        _Point(e.effective_at.timestamp(), e.cards_to, e.pk, e.burst_pool_id, e.burst_cards_to)
        for e in events
    ]
    return points


@dataclass(frozen=True)
class _Prices:
    """The period's prices for one allocation: the home pool's burst ``home``, each burst
    pool's (``pools``: pool id -> price), the ``currency`` and why they are unknown (``reason``,
    empty when all are known)."""

    home: Decimal | None
    pools: dict[int, Decimal | None]
    currency: str | None
    reason: str

    def cost(self, home_hours: Decimal, pool_hours: dict[int, Decimal]) -> Decimal | None:
        """Unrounded money of card-hours at home and in burst pools; ``None`` when unpriced."""
        if self.reason:
            return None
        total = home_hours * self.home
        for pool_id, hours in pool_hours.items():
            total += hours * self.pools[pool_id]
        return total


def _prices(period, allocation, pool_ids, pools: dict[int, tuple[str, str]]) -> _Prices:
    """The home burst price (reserved when the card has none; 0 for an allocation priced on
    use or by tokens, which pays its usage or its tokens on those cards instead) and each burst
    pool's price for the allocation's GPU model, with the first reason one of them is
    unknown."""
    if period is None or period.card_id is None:
        return _Prices(None, {}, None, "no rate card is in force now")
    model_id, model = allocation.gpu_model_id, allocation.gpu_model.name
    home = price_for(period, RateKind.GPU_BURST, model_id, "")
    if allocation.pricing_method != PricingMethod.RESERVED:
        home = Decimal(0)
    by_pool = {
        pool_id: price_for(period, RateKind.POOL_BURST, model_id, "", pool_id)
        for pool_id in sorted(pool_ids)
    }
    reason = "" if home is not None else f"the rate card has no burst or reserved price for {model}"
    for pool_id, price in by_pool.items():
        if price is None and not reason:
            reason = f"the rate card has no price for {model} in burst pool {pools[pool_id][1]}"
    return _Prices(home, by_pool, period.currency, reason)


def _pool_deltas(point: _Point, previous: _Point) -> dict[int, int]:
    """Cards a change moved into (+) or out of (-) each burst pool."""
    pools = {p for p in (point.pool_id, previous.pool_id) if p is not None}
    return {p: point.in_pool(p) - previous.in_pool(p) for p in pools}


def _change_cost(prices: _Prices, point, previous, seconds: int) -> Decimal | None:
    """The unrounded money of a change's cards held (or not) for ``seconds``: the cards it
    moved in each burst pool at that pool's price, the rest at the home burst price."""
    deltas = _pool_deltas(point, previous)
    home = point.cards - previous.cards - sum(deltas.values())
    pool_hours = {p: card_seconds_hours(Decimal(abs(d) * seconds)) for p, d in deltas.items()}
    return prices.cost(card_seconds_hours(Decimal(abs(home) * seconds)), pool_hours)


def _pool_seconds(points: list[_Point], start_s: float, end_s: float) -> dict[int, int]:
    """Card-seconds placed in each burst pool in ``[start_s, end_s)`` (floor 0)."""
    pools = {p.pool_id for p in points if p.pool_id is not None and p.burst}
    return {
        pool: int(burst_card_seconds([(p.at, p.in_pool(pool)) for p in points], floor_cards=0,
                                     start=start_s, end=end_s))
        for pool in sorted(pools)
    }  # fmt: skip


def _decisions(points: list[_Point], prices: _Prices, currency, start_s: float, end_s: float):
    """Each decision's :class:`DecisionMoney` (its cards held, or not, until the next change
    or ``end_s``), and the card-seconds and unrounded money the down decisions released inside
    ``[start_s, end_s)``."""
    decisions, released, released_cost = {}, 0, Decimal(0)
    for index, point in enumerate(points):
        if not point.event_id:
            continue
        previous = points[index - 1]
        until = min(points[index + 1].at if index + 1 < len(points) else end_s, end_s)
        changed = point.cards - previous.cards
        span = clip(point.at, until, point.at, end_s)
        seconds = int(span[1] - span[0]) if span else 0
        cost = _change_cost(prices, point, previous, seconds)
        decisions[point.event_id] = DecisionMoney(
            changed,
            card_seconds_hours(Decimal(abs(changed) * seconds)),
            None if cost is None else round_money(abs(cost), currency),
            currency,
        )
        inside = clip(point.at, until, start_s, end_s)
        if changed < 0 and inside is not None:
            kept = int(inside[1] - inside[0])
            released += -changed * kept
            cost = _change_cost(prices, point, previous, kept)
            released_cost += abs(cost) if cost is not None else 0
    return decisions, released, released_cost


def _one(policy, events, before, *, start, now, period, pools) -> ElasticMoney:
    allocation = policy.allocation
    end = min(now, allocation.ends_at)
    points = _timeline(policy, events, before)
    placed = {p.pool_id for p in points if p.pool_id is not None and p.burst}
    prices = _prices(period, allocation, placed, pools)
    currency = prices.currency if not prices.reason else None
    end_s, start_s = end.timestamp(), start.timestamp()
    decisions, released, released_cost = _decisions(points, prices, currency, start_s, end_s)
    burst_s = int(burst_card_seconds([(p.at, p.cards) for p in points],
                                     floor_cards=allocation.card_count, start=start_s,
                                     end=end_s))  # fmt: skip
    in_pools = _pool_seconds(points, start_s, end_s)
    home_hours = card_seconds_hours(Decimal(max(0, burst_s - sum(in_pools.values()))))
    burst_amount = _priced(home_hours, prices.home, currency)
    for pool_id, seconds in in_pools.items():
        # .get: without a rate card in force no pool is priced (prices.pools is empty)
        part = _priced(card_seconds_hours(Decimal(seconds)), prices.pools.get(pool_id), currency)
        burst_amount = None if burst_amount is None or part is None else burst_amount + part
    return ElasticMoney(
        start=start,
        end=max(start, end),
        burst_card_hours=card_seconds_hours(Decimal(burst_s)),
        released_card_hours=card_seconds_hours(Decimal(released)),
        price_per_card_hour=prices.home,
        currency=currency,
        burst_amount=burst_amount,
        released_amount=None if currency is None else round_money(released_cost, currency),
        reason=prices.reason,
        decisions=decisions,
        burst_pools=tuple(
            BurstPoolMoney(pools[pool_id][0], pools[pool_id][1],
                           card_seconds_hours(Decimal(in_pools.get(pool_id, 0))),
                           prices.pools.get(pool_id), prices.currency)
            for pool_id in sorted(placed)
        ),
        on_use=allocation.pricing_method == PricingMethod.USED,
        by_tokens=allocation.pricing_method == PricingMethod.TOKENS,
    )  # fmt: skip


@dataclass(frozen=True)
class ElasticScaleCosts:
    """Several elastic allocations' scaling money over one period: ``by_policy`` (policy id ->
    :class:`ElasticMoney`) and their sums; an amount sum is ``None`` when no allocation is
    priced, and leaves out the ``unpriced`` ones otherwise (the page says how many)."""

    start: datetime
    now: datetime
    by_policy: dict[int, ElasticMoney]
    burst_card_hours: Decimal = Decimal(0)
    released_card_hours: Decimal = Decimal(0)
    burst_amount: Decimal | None = None
    released_amount: Decimal | None = None
    currency: str | None = None
    unpriced: int = 0

    def get(self, policy_id: int) -> ElasticMoney | None:
        return self.by_policy.get(policy_id)

    @property
    def burst_amount_text(self) -> str | None:
        return _money(self.burst_amount, self.currency)

    @property
    def released_amount_text(self) -> str | None:
        return _money(self.released_amount, self.currency)


def _totals(start: datetime, now: datetime, by_policy: dict[int, ElasticMoney]):
    rows = list(by_policy.values())
    priced = [m for m in rows if m.currency is not None]
    currency = priced[0].currency if priced else None
    return ElasticScaleCosts(
        start=start,
        now=now,
        by_policy=by_policy,
        burst_card_hours=sum((m.burst_card_hours for m in rows), Decimal(0)),
        released_card_hours=sum((m.released_card_hours for m in rows), Decimal(0)),
        burst_amount=sum((m.burst_amount for m in priced), Decimal(0)) if priced else None,
        released_amount=sum((m.released_amount for m in priced), Decimal(0)) if priced else None,
        currency=currency,
        unpriced=len(rows) - len(priced),
    )


def elastic_scale_costs(
    *,
    policies: Iterable[ElasticPolicy],
    start: datetime,
    now: datetime,
    since: datetime | None = None,
) -> ElasticScaleCosts:
    """The policies' :class:`ElasticMoney` over ``[start, now)`` (the module's rules) and their
    sums. ``decisions`` covers the changes in effect from ``since`` (default ``start``; earlier
    to price older decisions a page lists) and the last one before it, whose cards (and the
    ones before them) open the timeline, so a long history is not read. The policies need
    their allocation (and its GPU model) joined. Three queries (events, the changes before,
    rate card), a fourth for the burst pools' names when any holds cards; none for no
    policies. One rate period, so one currency."""
    policies = list(policies)
    if not policies:
        return _totals(start, now, {})
    since = min(start, since) if since is not None else start
    period = rate_period_at(now, zone=billing_zone())
    by_policy: dict[int, list[ScaleEvent]] = {p.pk: [] for p in policies}
    changes = ScaleEvent.objects.exclude(action=ScaleAction.HOLD)
    events = changes.filter(policy_id__in=list(by_policy), effective_at__gte=since).order_by(
        "effective_at", "id"
    )
    for event in events:
        by_policy[event.policy_id].append(event)
    last = changes.filter(policy_id=OuterRef("pk"), effective_at__lt=since).order_by(
        "-effective_at", "-id"
    )
    before = {
        row[0]: row[1:]
        for row in ElasticPolicy.objects.filter(pk__in=list(by_policy))
        .annotate(
            before_id=Subquery(last.values("pk")[:1]),
            before_at=Subquery(last.values("effective_at")[:1]),
            before_cards=Subquery(last.values("cards_to")[:1]),
            prior_cards=Subquery(last.values("cards_to")[1:2]),
            before_pool=Subquery(last.values("burst_pool_id")[:1]),
            before_burst=Subquery(last.values("burst_cards_to")[:1]),
            prior_pool=Subquery(last.values("burst_pool_id")[1:2]),
            prior_burst=Subquery(last.values("burst_cards_to")[1:2]),
        )
        .values_list(
            "pk",
            "before_id",
            "before_at",
            "before_cards",
            "prior_cards",
            "before_pool",
            "before_burst",
            "prior_pool",
            "prior_burst",
        )  # fmt: skip
    }
    pool_ids = {e.burst_pool_id for rows in by_policy.values() for e in rows}
    pool_ids |= {b[i] for b in before.values() for i in (4, 6)}
    pool_ids.discard(None)
    pools = (
        {pk: (slug, name) for pk, slug, name in
         Pool.objects.filter(pk__in=pool_ids).values_list("pk", "slug", "name")}
        if pool_ids else {}
    )  # fmt: skip
    money = {
        p.pk: _one(p, by_policy[p.pk], before.get(p.pk), start=start, now=now, period=period,
                   pools=pools)
        for p in policies
    }  # fmt: skip
    return _totals(start, now, money)


WHATIF_HOME_PRICES = {
    PricingMethod.RESERVED: (RateKind.GPU_BURST, "burst price"),
    PricingMethod.USED: (RateKind.GPU_USED, "on-use price"),
}
"""The price a what-if's home burst card-hours are charged at, by the allocation's pricing
method, as its statement charges them (:func:`billing.services.usage_import.
usage_import_elastic_burst`): priced by reserved card-hours, the burst line at the burst price
(the reserved price when the card has none); priced on use, the used line at the on-use price
(the what-if's burst cards are there to serve its load: used). An allocation priced by tokens
is absent: its tokens pay for those cards (:data:`WHATIF_BY_TOKENS`)."""

WHATIF_BY_TOKENS = "paid by its tokens"
"""The label of a token-priced allocation's home burst card-hours in a what-if: priced 0."""


def _whatif_home_price(period, pricing_method: str, gpu_model_id: int):
    """``(price, basis, label)`` of the home burst card-hours (:data:`WHATIF_HOME_PRICES`):
    ``basis`` the rate kind read (``gpu-burst``, ``gpu-used``) or ``tokens`` (price 0);
    ``price`` ``None`` without a rate card in force or that price on it."""
    if pricing_method == PricingMethod.TOKENS:
        return Decimal(0), PricingMethod.TOKENS.value, WHATIF_BY_TOKENS
    kind, label = WHATIF_HOME_PRICES.get(pricing_method, WHATIF_HOME_PRICES[PricingMethod.RESERVED])
    price = None
    if period is not None and period.card_id is not None:
        price = price_for(period, kind, gpu_model_id, "")
    return price, kind.value, label


def burst_whatif_money(
    *,
    gpu_model_id: int,
    burst_pool_id: int,
    home_card_hours: Decimal,
    burst_card_hours: Decimal,
    now: datetime,
    pricing_method: str = PricingMethod.RESERVED,
) -> dict:
    """A what-if's burst priced both ways (issue 35), at the rate card in force at ``now``,
    by the statements' own prices (:func:`billing.rate_periods.price_for`) and rounding
    (:func:`billing.pricing.round_money`, once per amount): **with burst**, the home pool's
    burst card-hours at the price the allocation's ``pricing_method`` charges them
    (:data:`WHATIF_HOME_PRICES`: the burst price, the on-use price, or 0 when its tokens pay)
    plus the burst pool's at that pool's price (under every method, as the statement's
    burst-pool line); **without burst**, the home pool's alone (the rest of the load is not
    served: its card-hours are ``unserved_card_hours``). ``home_price_basis`` (``gpu-burst``,
    ``gpu-used``, ``tokens``) and ``home_price_label`` (``burst price``, ``on-use price``,
    ``paid by its tokens``) say which price the home card-hours got. Amounts ``None`` (with
    ``reason``) when a price is missing; ``texts`` has the prices and amounts as pages show
    them (``2.90 EUR``, ``43.60 EUR``; ``None`` when unknown)."""
    period = rate_period_at(now, zone=billing_zone())
    home_price, basis, label = _whatif_home_price(period, pricing_method, gpu_model_id)
    burst_price = None
    if period is not None and period.card_id is not None:
        burst_price = price_for(period, RateKind.POOL_BURST, gpu_model_id, "", burst_pool_id)
    currency = period.currency if period is not None else None
    home_amount = _priced(home_card_hours, home_price, currency)
    burst_amount = _priced(burst_card_hours, burst_price, currency)
    with_burst = None if home_amount is None or burst_amount is None else home_amount + burst_amount
    reason = "" if with_burst is not None else "the rate card has no price for one of them"
    if home_price is None and burst_price is not None:
        missing = "burst or reserved price" if basis == RateKind.GPU_BURST else label
        reason = f"the rate card has no {missing} for this GPU model"
    return {
        "currency": currency,
        "home_price": home_price,
        "home_price_basis": basis,
        "home_price_label": label,
        "burst_pool_price": burst_price,
        "with_burst": {
            "home_card_hours": home_card_hours,
            "burst_pool_card_hours": burst_card_hours,
            "amount": with_burst,
        },
        "without_burst": {
            "home_card_hours": home_card_hours,
            "unserved_card_hours": burst_card_hours,
            "amount": home_amount,
        },
        "reason": reason,
        # as pages show them: prices per card-hour and amounts with the currency
        "texts": {
            "home_price": _price_text(home_price, currency),
            "home_price_label": label,
            "burst_pool_price": _price_text(burst_price, currency),
            "with_burst": _money(with_burst, currency),
            "without_burst": _money(home_amount, currency),
        },
    }


@dataclass(frozen=True)
class BurstPoolPrice:
    """A burst pool's card-hour price for one GPU model on the rate card in force (issue 35)."""

    gpu_model: str
    price_per_card_hour: Decimal
    currency: str

    @property
    def shown_price(self) -> Decimal:
        """The price to the places statements show it: the currency's minor unit, or more when
        finer (``2.900000`` -> ``2.90``, :func:`billing.pricing.unit_price_places`)."""
        places = unit_price_places(self.price_per_card_hour, self.currency)
        return self.price_per_card_hour.quantize(Decimal(1).scaleb(-places))

    @property
    def text(self) -> str:
        """``NVIDIA L40S 2.90 EUR / card-hour`` (the price as statements show it)."""
        return (
            f"{self.gpu_model} {_price_text(self.price_per_card_hour, self.currency)} / card-hour"
        )


def burst_pool_prices(*, pool_ids: Iterable[int], now: datetime) -> dict[int, list[BurstPoolPrice]]:
    """Each burst pool's card-hour prices on the rate card in force at ``now``
    (``pool-burst`` entries, :func:`billing.rate_periods.price_for`'s table): pool id ->
    one :class:`BurstPoolPrice` per GPU model the card prices there, by model name; a pool
    the card prices nothing for is absent (unknown, never 0). Two queries (rate card, model
    names)."""
    pool_ids = set(pool_ids)
    period = rate_period_at(now, zone=billing_zone())
    if not pool_ids or period is None or period.currency is None:
        return {}
    entries = [
        (pool_id, model_id, price)
        for (kind, pool_id, model_id), price in period.pool_prices.items()
        if kind == RateKind.POOL_BURST and pool_id in pool_ids and model_id is not None
    ]
    names = dict(
        GpuModel.objects.filter(pk__in={m for _, m, _ in entries}).values_list("pk", "name")
    )
    out: dict[int, list[BurstPoolPrice]] = {}
    for pool_id, model_id, price in entries:
        out.setdefault(pool_id, []).append(BurstPoolPrice(names[model_id], price, period.currency))
    return {pool: sorted(rows, key=lambda r: r.gpu_model) for pool, rows in out.items()}
