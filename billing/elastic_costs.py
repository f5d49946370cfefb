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
  price), in the card's currency; each amount rounded half-up to the currency's minor unit once
  (:func:`billing.pricing.round_money`). A rate change inside the period is not split: all at
  today's price, like :func:`billing.dashboards.costs.allocations_cost_so_far`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from django.db.models import OuterRef, Subquery

from billing.choices import RateKind
from billing.conf import billing_zone
from billing.pricing import format_money, round_money, unit_price_places
from billing.rate_periods import price_for, rate_period_at
from pools.capacity.arithmetic import card_seconds_hours, clip
from pools.elastic.choices import ScaleAction
from pools.elastic.metering import burst_card_seconds
from pools.elastic.models import ElasticPolicy, ScaleEvent


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
    def amount_text(self) -> str | None:
        return _money(self.amount, self.currency)


@dataclass(frozen=True)
class ElasticMoney:
    """One elastic allocation's scaling money over ``[start, end)`` (``end``: now, or the
    window's end if earlier), with every decision's own figures in ``decisions`` (event id ->
    :class:`DecisionMoney`). Amounts ``None`` and ``reason`` set when unpriced; never a 0."""

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

    @property
    def burst_amount_text(self) -> str | None:
        return _money(self.burst_amount, self.currency)

    @property
    def released_amount_text(self) -> str | None:
        return _money(self.released_amount, self.currency)

    @property
    def price_text(self) -> str | None:
        """The card-hour price as statements show it (``8.00 EUR``, ``0.0125 EUR``)."""
        price, currency = self.price_per_card_hour, self.currency
        if price is None or currency is None:
            return None
        places = unit_price_places(price, currency)
        return f"{price.quantize(Decimal(1).scaleb(-places))}\u00a0{currency}"


def _priced(hours: Decimal, price: Decimal | None, currency: str | None) -> Decimal | None:
    return None if price is None or currency is None else round_money(hours * price, currency)


def _timeline(
    policy: ElasticPolicy, events: list[ScaleEvent], before: tuple | None
) -> list[tuple[float, int, int]]:
    """``(unix s, cards held from then on, event id or 0)``: the floor from the window's start,
    then each change in effect order (the timeline burst metering bills). ``before``: the last
    change ahead of the events read, ``(id, effective_at, cards_to, cards before it)`` (``None``
    cards before: the floor), which opens the timeline instead of the window's start."""
    allocation = policy.allocation
    points = [(allocation.starts_at.timestamp(), allocation.card_count, 0)]
    if before is not None and before[0] is not None:
        event_id, at, cards, prior = before
        floor = allocation.card_count
        points = [(at.timestamp(), floor if prior is None else prior, 0)]
        points.append((at.timestamp(), cards, event_id))
    points += [(e.effective_at.timestamp(), e.cards_to, e.pk) for e in events]
    return points


def _price(period, allocation) -> tuple[Decimal | None, str | None, str]:
    """``(price per card-hour, currency, reason it is unknown)`` of the allocation's burst."""
    if period is None or period.card_id is None:
        return None, None, "no rate card is in force now"
    price = price_for(period, RateKind.GPU_BURST, allocation.gpu_model_id, "")
    if price is None:
        model = allocation.gpu_model.name
        return None, None, f"the rate card has no burst or reserved price for {model}"
    return price, period.currency, ""


def _one(policy, events, before, *, start, now, period) -> ElasticMoney:
    allocation = policy.allocation
    end = min(now, allocation.ends_at)
    price, currency, reason = _price(period, allocation)
    points = _timeline(policy, events, before)
    end_s, start_s = end.timestamp(), start.timestamp()
    decisions, released = {}, Decimal(0)
    for index, (at, cards, event_id) in enumerate(points):
        if not event_id:
            continue
        until = points[index + 1][0] if index + 1 < len(points) else max(end_s, at)
        changed = cards - points[index - 1][1]
        span = clip(at, min(until, end_s), at, end_s)
        seconds = Decimal(abs(changed)) * Decimal(int(span[1] - span[0])) if span else Decimal(0)
        hours = card_seconds_hours(seconds)
        amount = _priced(hours, price, currency)
        decisions[event_id] = DecisionMoney(changed, hours, amount, currency)
        if changed < 0 and (inside := clip(at, min(until, end_s), start_s, end_s)) is not None:
            released += Decimal(-changed) * Decimal(int(inside[1] - inside[0]))
    burst_s = burst_card_seconds(
        [(at, cards) for at, cards, _ in points],
        floor_cards=allocation.card_count,
        start=start_s,
        end=end_s,
    )
    burst = card_seconds_hours(Decimal(int(burst_s)))
    released_hours = card_seconds_hours(released)
    return ElasticMoney(
        start=start,
        end=max(start, end),
        burst_card_hours=burst,
        released_card_hours=released_hours,
        price_per_card_hour=price,
        currency=currency,
        burst_amount=_priced(burst, price, currency),
        released_amount=_priced(released_hours, price, currency),
        reason=reason,
        decisions=decisions,
    )


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
    rate card); none for no policies. One rate period, so one currency."""
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
        )
        .values_list("pk", "before_id", "before_at", "before_cards", "prior_cards")
    }
    money = {
        p.pk: _one(p, by_policy[p.pk], before.get(p.pk), start=start, now=now, period=period)
        for p in policies
    }
    return _totals(start, now, money)


def burst_whatif_money(
    *,
    gpu_model_id: int,
    burst_pool_id: int,
    home_card_hours: Decimal,
    burst_card_hours: Decimal,
    now: datetime,
) -> dict:
    """A what-if's burst priced both ways (issue 35), at the rate card in force at ``now``,
    by the statements' own prices (:func:`billing.rate_periods.price_for`) and rounding
    (:func:`billing.pricing.round_money`, once per amount): **with burst**, the home pool's
    burst card-hours at its burst price plus the burst pool's at that pool's price; **without
    burst**, the home pool's alone (the rest of the load is not served: its card-hours are
    ``unserved_card_hours``). Amounts ``None`` (with ``reason``) when a price is missing."""
    period = rate_period_at(now, zone=billing_zone())
    home_price = burst_price = None
    if period is not None and period.card_id is not None:
        home_price = price_for(period, RateKind.GPU_BURST, gpu_model_id, "")
        burst_price = price_for(period, RateKind.POOL_BURST, gpu_model_id, "", burst_pool_id)
    currency = period.currency if period is not None else None
    home_amount = _priced(home_card_hours, home_price, currency)
    burst_amount = _priced(burst_card_hours, burst_price, currency)
    with_burst = None if home_amount is None or burst_amount is None else home_amount + burst_amount
    reason = "" if with_burst is not None else "the rate card has no price for one of them"
    return {
        "currency": currency,
        "home_price": home_price,
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
    }
