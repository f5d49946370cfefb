"""Read-side queries of elastic policies and scale events: who may see which."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db.models import F, Q, QuerySet, Sum
from django.utils.module_loading import import_string

from pools.capacity.models import at_q, holding_q
from pools.elastic.choices import ScaleAction
from pools.elastic.models import BurstOptIn, ElasticPolicy, ElasticWhatIf, ScaleEvent, SignalReading
from pools.elastic.policy import MetricSample
from pools.inventory.models import Gpu, Pool


def elastic_policy_list(*, user) -> QuerySet[ElasticPolicy]:
    """Policies the user may see (their teams', all for pool admins), with the allocation's
    team, pool and model joined; by allocation."""
    qs = ElasticPolicy.objects.select_related(
        "allocation__team", "allocation__pool", "allocation__gpu_model"
    ).order_by("allocation_id")
    return qs.visible_to(user)


def elastic_whatif_list(*, user) -> QuerySet[ElasticWhatIf]:
    """Queued what-ifs of the policies the user may see, newest first, with the policy's
    allocation and team joined."""
    qs = ElasticWhatIf.objects.select_related("policy__allocation__team")
    return qs.visible_to(user)


def scale_event_list(*, user) -> QuerySet[ScaleEvent]:
    """Scale events the user may see, newest first, with their policy's allocation joined."""
    qs = ScaleEvent.objects.select_related(
        "policy__allocation__team", "policy__allocation__pool", "policy__allocation__gpu_model"
    ).order_by("-decided_at", "-id")
    return qs.visible_to(user)


def borrowed_cards_by_pool(*, now) -> list[tuple[str, int]]:
    """``(pool name, cards)`` elastic allocations hold above their floors now (burst borrowed
    from the pool's free cards), pools without any left out; one query."""
    rows = (
        ElasticPolicy.objects.filter(
            holding_q(via="allocation"),
            at_q(now, via="allocation"),
            cards_held__gt=F("allocation__card_count"),
        )
        .values_list("allocation__pool__name")
        .annotate(cards=Sum(F("cards_held") - F("allocation__card_count")))
        .order_by("allocation__pool__name")
    )
    return [(name, int(cards)) for name, cards in rows]


def borrowed_cards_by_team(*, team_ids, now) -> dict[int, int]:
    """Team id -> cards its elastic allocations hold above their floors now (the floors are
    the allocations' ``card_count``, counted as held already); teams without any left out; one
    query."""
    rows = (
        ElasticPolicy.objects.filter(
            holding_q(via="allocation"),
            at_q(now, via="allocation"),
            allocation__team_id__in=team_ids,
            cards_held__gt=F("allocation__card_count"),
        )
        .values_list("allocation__team_id")
        .annotate(cards=Sum(F("cards_held") - F("allocation__card_count")))
        .order_by()
    )
    return {team_id: int(cards) for team_id, cards in rows}


def elastic_cards_by_allocation(*, allocation_ids) -> dict[int, tuple[int, int]]:
    """Allocation id -> ``(cards held now, ceiling)`` for the elastic ones of
    ``allocation_ids`` (their floor is the allocation's ``card_count``); others absent; one
    query."""
    rows = ElasticPolicy.objects.filter(allocation_id__in=list(allocation_ids)).values_list(
        "allocation_id", "cards_held", "ceiling_cards"
    )
    return {allocation_id: (held, ceiling) for allocation_id, held, ceiling in rows}


def elastic_ceiling_bound(*, allocation) -> int:
    """The most cards ``allocation`` could ever hold: the cards of its GPU model in its pool
    and in the burst pools (where scale-up goes when the home pool is full), whatever their
    nodes' state; one query."""
    return (
        Gpu.objects.filter(gpu_model_id=allocation.gpu_model_id)
        .filter(Q(node__pool_id=allocation.pool_id) | Q(node__pool__burst=True))
        .count()
    )


def recorded_samples(*, policy_id: int, start: datetime, end: datetime) -> list[MetricSample]:
    """The loop's recorded readings of one policy in ``[start, end]`` as the policy reads
    signals (Unix s, %, ms; an unknown reading keeps ``None``), in time order; one query."""
    rows = SignalReading.objects.filter(
        policy_id=policy_id, read_at__gte=start, read_at__lte=end
    ).order_by("read_at")
    return [
        MetricSample(at.timestamp(), util, latency)
        for at, util, latency in rows.values_list("read_at", "util_pct", "latency_ms")
    ]


def reading_timeline(
    *, policy_id: int, start: datetime, end: datetime, points: int = 300
) -> list[SignalReading]:
    """Recorded readings of one policy in ``[start, end]`` for a chart, thinned to every k-th
    (k chosen so at most ``points`` remain, the newest always kept), in time order."""
    rows = list(
        SignalReading.objects.filter(
            policy_id=policy_id, read_at__gte=start, read_at__lte=end
        ).order_by("read_at")
    )
    every = -(-len(rows) // points)  # ceiling division
    return [r for i, r in enumerate(rows) if (len(rows) - 1 - i) % every == 0]


def held_timelines(*, allocation_ids) -> dict[int, list[tuple[float, int]]]:
    """The cards each *elastic* allocation of ``allocation_ids`` held over time: allocation id
    -> ``[(unix s, cards held from then on), ...]`` in time order, starting at its window's
    start with its floor (``card_count``), then every scale event that is not a hold, at its
    ``effective_at`` with its ``cards_to``. The timeline burst metering bills
    (:func:`pools.elastic.metering.burst_card_seconds`) and the serving rollup stores as
    cards held. Allocations that are not elastic are absent. Two queries."""
    rows = ElasticPolicy.objects.filter(allocation_id__in=list(allocation_ids)).values_list(
        "pk", "allocation_id", "allocation__starts_at", "allocation__card_count"
    )
    policies, out = {}, {}
    for policy_id, allocation_id, starts_at, floor in rows:
        policies[policy_id] = allocation_id
        out[allocation_id] = [(starts_at.timestamp(), floor)]
    if not policies:
        return {}
    events = (
        ScaleEvent.objects.filter(policy_id__in=list(policies))
        .exclude(action=ScaleAction.HOLD)
        .order_by("effective_at", "id")
        .values_list("policy_id", "effective_at", "cards_to")
    )
    for policy_id, effective_at, cards_to in events:
        out[policies[policy_id]].append((effective_at.timestamp(), cards_to))
    return out


def burst_pool_timelines(*, allocation_ids) -> dict[int, dict[int, list[tuple[float, int]]]]:
    """The cards each elastic allocation of ``allocation_ids`` placed in burst pools over time
    (issue 35): allocation id -> burst pool id -> ``[(unix s, cards there from then on), ...]``
    in time order, from the scale events that are not holds (``burst_cards_to`` in their
    ``burst_pool``; 0 in every other pool). Allocations that never burst are absent. One
    query. Metered by :func:`pools.elastic.metering.burst_card_seconds` with a floor of 0."""
    events = (
        ScaleEvent.objects.filter(policy__allocation_id__in=list(allocation_ids))
        .exclude(action=ScaleAction.HOLD)
        .order_by("effective_at", "id")
        .values_list("policy__allocation_id", "effective_at", "burst_pool_id", "burst_cards_to")
    )
    steps: dict[int, list[tuple[float, int | None, int]]] = {}
    for allocation_id, effective_at, pool_id, cards in events:
        steps.setdefault(allocation_id, []).append((effective_at.timestamp(), pool_id, cards))
    out: dict[int, dict[int, list[tuple[float, int]]]] = {}
    for allocation_id, rows in steps.items():
        pools = {pool_id for _, pool_id, cards in rows if pool_id is not None and cards}
        if pools:
            out[allocation_id] = {
                pool: [(at, cards if pool_id == pool else 0) for at, pool_id, cards in rows]
                for pool in pools
            }
    return out


SCALE_COST_SPAN_DAYS = 7  # the elastic pages' and API's period: the last 7 days


def scale_costs(policies, *, start: datetime, now: datetime, since: datetime | None = None):
    """The policies' scaling money over ``[start, now)``: an object with the period's sums
    (``burst_card_hours``, ``released_card_hours``, ``*_amount`` / ``*_amount_text``,
    ``currency``, ``unpriced``) and ``get(policy id)`` -> the same for one allocation plus its
    ``reason`` when unpriced and ``decisions`` (event id -> ``cards``, ``card_hours``,
    ``amount``, ``amount_text``). From the function ``settings.ELASTIC_SCALE_COSTS`` names
    (billing's, priced as the statements' burst line; pools do not import billing); ``None``
    without one. ``decisions`` covers the changes in effect from ``since`` (default
    ``start``)."""
    provider = getattr(settings, "ELASTIC_SCALE_COSTS", "")
    if not provider:
        return None
    return import_string(provider)(policies=policies, start=start, now=now, since=since)


def burst_opt_in_list(*, user) -> QuerySet[BurstOptIn]:
    """Opt-ins to burst pools the user may see (their teams'; all for pool admins), with the
    team, the pool and its cluster joined; by team, then pool."""
    return (
        BurstOptIn.objects.visible_to(user)
        .select_related("team", "pool__cluster")
        .order_by("team__name", "pool__name", "pk")
    )


def burst_pool_prices(*, pool_ids, now: datetime) -> dict:
    """Each burst pool's card-hour prices on the rate card in force at ``now``: pool id -> a
    list of objects with ``gpu_model``, ``price_per_card_hour`` (``shown_price``: to the places
    statements show), ``currency`` and ``text``
    (``NVIDIA L40S 2.90 EUR / card-hour``), from the function
    ``settings.ELASTIC_BURST_POOL_PRICES`` names (billing's; pools do not import billing);
    ``{}`` without one or without a rate card."""
    provider = getattr(settings, "ELASTIC_BURST_POOL_PRICES", "")
    if not provider:
        return {}
    return import_string(provider)(pool_ids=pool_ids, now=now)


def burst_pool_list() -> QuerySet[Pool]:
    """The pools marked burst (issue 35) with their cluster, by name."""
    return Pool.objects.filter(burst=True).select_related("cluster").order_by("name", "pk")


def burst_cards_held(*, team_id: int, pool_id: int) -> int:
    """Cards ``team_id``'s elastic allocations hold in burst pool ``pool_id`` now; one query."""
    held = ElasticPolicy.objects.filter(
        allocation__team_id=team_id, burst_pool_id=pool_id
    ).aggregate(cards=Sum("burst_cards"))["cards"]
    return int(held or 0)
