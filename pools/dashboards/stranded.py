"""Stranded capacity for the admin dashboard (issue #20): per pool × GPU model, free cards that
no common shape (1, 2, 4, 8 cards on one node in one NVLink domain) can use over the next
weeks, in card-hours, with the nodes whose fragments cost most and what would win a whole
group back.

The rule is :func:`pools.capacity.placement.stranded_card_hours`: per NVLink domain, free cards
outside whole groups of the largest common shape the domain allows are stranded (an 8-card
NVSwitch node with 6 free cards strands 6 for the hours it stays so). Cards are the schedulable
ones (:data:`pools.inventory.models.SCHEDULABLE_CARD`: node up, card not in error, not in MIG
mode); domains as the shape check reads them (:func:`pools.capacity.node_kinds.node_domains`:
imported, else catalogue facts about the node's whole board, cards in error or MIG mode
included, else unknown).
Held cards are the placements of holding allocations; allocations without a placement are laid
together by best fit, at their peak, for the whole horizon (see ``_holds``).
Four queries whatever the fleet's size (PostgreSQL: the cards one row per node, then the nodes).

The dashboard reads a **snapshot** (:func:`stranded_for_dashboard`): the whole fleet's report,
stored in the cache by a beat task every :data:`SNAPSHOT_EVERY` (and on *Recompute*), served up
to :data:`SNAPSHOT_MAX_AGE` old with the time it was computed; the report over 2,000 nodes and
10,000 allocations takes a few hundred milliseconds, more than a page may spend (issue #16).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from functools import lru_cache

from django.contrib.postgres.aggregates import ArrayAgg
from django.core.cache import cache
from django.db import connection
from django.db.models import BooleanField, ExpressionWrapper, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from pools.capacity.arithmetic import clip, peak_cards
from pools.capacity.models import Allocation
from pools.capacity.node_kinds import node_domains
from pools.capacity.placement import (
    COMMON_CARDS_PER_NODE,
    Hold,
    NodeCards,
    free_for_window,
    group_nodes,
    stranded_card_hours,
    stranded_cards,
)
from pools.capacity.shapes import lay_unplaced
from pools.common.choices import NodeState
from pools.dashboards.capacity import DashboardFilters, pooled_gpus
from pools.inventory.models import WHOLE_CARD, GpuModel, Node

HORIZON = timedelta(weeks=4)
SNAPSHOT_KEY = "dashboard:stranded:v1"  # bump the version when StrandedRow changes shape
SNAPSHOT_EVERY = timedelta(minutes=10)  # the beat schedule (portal.settings)
SNAPSHOT_MAX_AGE = timedelta(hours=1)  # older (beat stopped): computed again by the page


@dataclass
class WinBack:
    """A node where moving (or letting end) ``cards_to_free`` allocated cards frees one more
    whole group of ``target_cards``; ``stranded`` its free cards outside whole groups now."""

    node: str
    stranded: int
    target_cards: int
    cards_to_free: int


@dataclass
class StrandedRow:
    """One pool × GPU model over ``[start, end)``; card-hours are ``Decimal``."""

    pool: str
    pool_slug: str
    gpu_model: str
    gpu_model_slug: str
    gpu_model_id: int
    cards: int
    free_card_hours: Decimal
    stranded_card_hours: Decimal
    card_hours_for: dict[int, Decimal]
    unknown_topology_card_hours: Decimal
    worst_nodes: list[tuple[str, Decimal]] = field(default_factory=list)
    win_back: list[WinBack] = field(default_factory=list)

    @property
    def for_8(self) -> Decimal:
        """Card-hours no 1 × 8 one-domain group can use."""
        return self.card_hours_for.get(8, Decimal(0))

    @property
    def for_4(self) -> Decimal:
        return self.card_hours_for.get(4, Decimal(0))

    @property
    def stranded_share(self) -> Decimal | None:
        """Stranded of free card-hours, %, one decimal; ``None`` when nothing is free."""
        if not self.free_card_hours:
            return None
        return (self.stranded_card_hours / self.free_card_hours * 100).quantize(Decimal("0.1"))


def stranded_capacity(
    *, filters: DashboardFilters, now: datetime, horizon: timedelta = HORIZON
) -> list[StrandedRow]:
    """Stranded capacity per pool × GPU model from ``now`` over ``horizon`` (module docstring),
    sorted by stranded card-hours, most first."""
    end = now + horizon
    # every card of a recognised model on an up node: the schedulable ones are counted, all of
    # them are the board the catalogue's NVLink facts describe (as the shape check reads it)
    gpus = pooled_gpus(filters).filter(node__state=NodeState.UP, gpu_model__isnull=False)
    if connection.vendor == "postgresql":
        # one row per node and model, grouped on small keys; then the nodes, their domains as
        # text decoded once per distinct value (most nodes share one)
        cards = (
            gpus.values("node_id", "gpu_model_id")
            .annotate(
                indices=ArrayAgg("index", filter=WHOLE_CARD, default=[]),
                board=ArrayAgg("index"),
            )
            .values_list("node_id", "gpu_model_id", "indices", "board")
            .order_by()
        )
        about = {
            pk: (pool_id, pool_name, pool_slug, host, _decoded(domains))
            for pk, pool_id, pool_name, pool_slug, host, domains in Node.objects.filter(
                pk__in=gpus.values("node_id")
            )
            .annotate(domains=Cast("nvlink_domains", TextField()))
            .values_list("pk", "pool_id", "pool__name", "pool__slug", "hostname", "domains")
            .order_by()
        }
        rows = (
            (pool_id, pool_name, pool_slug, model_id, host, indices, board, domains)
            for node_id, model_id, indices, board in cards
            for pool_id, pool_name, pool_slug, host, domains in (about[node_id],)
        )
    else:
        rows = (
            (pool_id, pool_name, pool_slug, model_id, host, [index] if whole else [], [index],
             domains)
            for pool_id, pool_name, pool_slug, model_id, host, index, whole, domains in gpus
            .annotate(whole=ExpressionWrapper(WHOLE_CARD, output_field=BooleanField()))
            .values_list(
                "node__pool_id", "node__pool__name", "node__pool__slug", "gpu_model_id",
                "node__hostname", "index", "whole", "node__nvlink_domains"
            )
        )  # fmt: skip
    groups: dict[tuple[int, int], dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    boards: dict[tuple[str, int], set[int]] = defaultdict(set)  # (host, model) -> indices
    recorded: dict[str, list | None] = {}
    pools: dict[int, tuple[str, str]] = {}
    for pool_id, pool_name, pool_slug, model_id, hostname, indices, board, domains in rows:
        boards[(hostname, model_id)].update(board)
        if indices:  # a node none of whose cards of the model counts offers none
            groups[(pool_id, model_id)][hostname].update(indices)
            recorded[hostname] = domains
            pools[pool_id] = (pool_name, pool_slug)
    if not groups:
        return []
    models = {m.pk: m for m in GpuModel.objects.filter(pk__in={k[1] for k in groups})}
    allocations = (
        Allocation.objects.holding()
        .whole_cards()  # MIG slices hold no whole card (issue 38)
        .overlapping(now, end)
        .filter(
            pool_id__in={k[0] for k in groups},
            gpu_model_id__in={k[1] for k in groups},
        )
        .order_by("id")
        .values_list("pool_id", "gpu_model_id", "card_count", "starts_at", "ends_at", "placement")
    )
    by_group: dict[tuple[int, int], list[tuple]] = defaultdict(list)
    for pool_id, model_id, cards, starts_at, ends_at, placement in allocations:
        by_group[(pool_id, model_id)].append((cards, starts_at, ends_at, placement))
    result = []
    for (pool_id, model_id), hosts in groups.items():
        model = models[model_id]
        nodes = _node_cards(hosts, recorded, model, {h: boards[(h, model_id)] for h in hosts})
        holds = _holds(nodes, by_group.get((pool_id, model_id), []), now, end)
        hours = stranded_card_hours(nodes, holds, now, end, COMMON_CARDS_PER_NODE)
        current = stranded_cards(free_for_window(nodes, holds, now, now + timedelta(seconds=1)))
        win_back = [
            WinBack(n.node, n.stranded, n.target_cards, n.cards_to_free)
            for n in current.nodes
            if n.cards_to_free is not None and n.target_cards and n.target_cards > 1
        ][:5]
        pool_name, pool_slug = pools[pool_id]
        result.append(
            StrandedRow(
                pool=pool_name,
                pool_slug=pool_slug,
                gpu_model=model.name,
                gpu_model_slug=model.slug,
                gpu_model_id=model.pk,
                cards=sum(len(n.gpus) for n in nodes),
                free_card_hours=hours.free_card_hours,
                stranded_card_hours=hours.card_hours,
                card_hours_for=dict(hours.card_hours_for),
                unknown_topology_card_hours=hours.unknown_topology_card_hours,
                worst_nodes=list(hours.by_node[:5]),
                win_back=win_back,
            )
        )
    result.sort(key=lambda r: (-r.stranded_card_hours, r.pool, r.gpu_model))
    return result


@lru_cache(maxsize=256)
def _decoded(text: str | None) -> list | None:
    return None if text is None else json.loads(text)


def _node_cards(
    hosts: dict[str, set[int]],
    recorded: dict[str, list | None],
    model: GpuModel,
    boards: dict[str, set[int]],
) -> list[NodeCards]:
    """The nodes by hostname, each distinct (cards, board, recorded domains) read and checked
    once; ``boards`` all of a node's cards of the model (those that do not count included)."""
    seen: dict[tuple, tuple[frozenset[int], tuple[frozenset[int], ...] | None]] = {}
    nodes = []
    for host in sorted(hosts):
        key = (tuple(sorted(hosts[host])), tuple(sorted(boards[host])), repr(recorded[host]))
        if key not in seen:
            cards = frozenset(hosts[host])
            domains = node_domains(cards, recorded[host], model, board=frozenset(boards[host]))
            seen[key] = (cards, domains)
            NodeCards(host, *seen[key])  # raises on a bad card set or domains
        nodes.append(NodeCards.trusted(host, *seen[key]))
    return nodes


def _holds(nodes: list[NodeCards], allocations: list[tuple], start, end) -> list[Hold]:
    """Placed allocations as holds on their cards; the unplaced ones laid on the cards placed
    holds leave free, span by span: unplaced allocations whose windows overlap (chained) form
    one span, laid together at their peak for that span only (:func:`_unplaced_spans`). Inside
    a span this is conservative (a fragment they might not really occupy counts as held, so
    stranding is never overstated by them); outside it their cards are free."""
    names = {n.name for n in nodes}
    placed: list[Hold] = []
    unplaced = []
    for cards, starts_at, ends_at, placement in allocations:
        if placement:
            placed.extend(
                Hold(spot["node"], frozenset(spot["gpus"]), starts_at, ends_at)
                for spot in placement
                if spot["node"] in names
            )
        else:
            unplaced.append((starts_at, ends_at, cards))
    holds = list(placed)
    for lo, hi, peak in _unplaced_spans(unplaced, start, end):
        free = free_for_window(nodes, placed, lo, hi)
        left = {name: g.free for g in lay_unplaced(group_nodes(free), peak) for name in g.names}
        for node in free:
            if node.free - left[node.name]:
                holds.append(Hold(node.name, node.free - left[node.name], lo, hi))
    return holds


def _unplaced_spans(
    intervals: list[tuple[datetime, datetime, int]], start: datetime, end: datetime
) -> list[tuple[datetime, datetime, int]]:
    """``(lo, hi, peak)`` per span of ``intervals`` (``(starts_at, ends_at, cards)``) clipped to
    ``[start, end)``: windows that overlap, directly or through others, make one span; windows
    that only touch (one ends as the next starts) do not. ``peak`` is the most cards held at
    once inside the span (:func:`pools.capacity.arithmetic.peak_cards`)."""
    clipped = sorted(
        (*span, n) for s, e, n in intervals if n and (span := clip(s, e, start, end)) is not None
    )
    spans: list[list] = []
    for lo, hi, cards in clipped:
        if spans and lo < spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], hi)
            spans[-1][2].append((lo, hi, cards))
        else:
            spans.append([lo, hi, [(lo, hi, cards)]])
    return [(lo, hi, peak_cards(members, lo, hi)) for lo, hi, members in spans]


@dataclass(frozen=True)
class StrandedSnapshot:
    """The report as computed at ``computed_at`` (aware), over ``[computed_at, + HORIZON)``."""

    computed_at: datetime
    rows: list[StrandedRow]


def stranded_snapshot_refresh(*, now: datetime | None = None) -> StrandedSnapshot:
    """Compute the whole fleet's report now and store it for the dashboard."""
    now = now or timezone.now()
    snapshot = StrandedSnapshot(now, stranded_capacity(filters=DashboardFilters(), now=now))
    cache.set(SNAPSHOT_KEY, snapshot, int(SNAPSHOT_MAX_AGE.total_seconds()))
    return snapshot


def stranded_for_dashboard(*, filters: DashboardFilters, now: datetime) -> StrandedSnapshot:
    """The stored snapshot narrowed to the filters' pool and model (each row depends only on
    its own pool × model, so narrowing equals computing narrowed); computed and stored when
    there is none. A driver-branch filter changes the cards counted: computed for it, now."""
    if filters.driver_branch:
        return StrandedSnapshot(now, stranded_capacity(filters=filters, now=now))
    snapshot = cache.get(SNAPSHOT_KEY)
    if not isinstance(snapshot, StrandedSnapshot):
        snapshot = stranded_snapshot_refresh(now=now)
    rows = [
        row
        for row in snapshot.rows
        if (not filters.pool or row.pool_slug == filters.pool)
        and (not filters.gpu_model or row.gpu_model_slug == filters.gpu_model)
    ]
    return StrandedSnapshot(snapshot.computed_at, rows)
