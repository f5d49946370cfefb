"""Placement shapes against the inventory: which cards of a pool × GPU model are free for a
window, node by node, and whether a request's shape fits there (the read side of the
shape-aware invariant; :func:`pools.capacity.services.requests.capacity_request_approve` calls it
under the pool's lock).

Cards counted are the schedulable ones (:mod:`pools.capacity.availability`: node up, card not in
error, a driver supporting the CUDA version asked). NVLink domains are the node's imported ones
(``Node.nvlink_domains``, from ``nvidia-smi topo -m``), else the catalogue's facts
(:func:`pools.inventory.topology.catalogue_domains`), else unknown. Held cards are the placements
of holding allocations overlapping the window; allocations without a placement (granted
without a shape, or before shapes existed) are laid on the nodes together, as "any N cards" by
best fit where N is the most they hold at once in the window (the count the card invariant
uses), for the whole window: the scheduler decides where such cards really run, so this counts
them somewhere rather than nowhere, and never twice.

Two queries whatever the pool's size: the cards, grouped by node, and the overlapping holding
allocations with their placements.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from django.contrib.postgres.aggregates import ArrayAgg
from django.db import connection

from pools.capacity.arithmetic import peak_cards
from pools.capacity.availability import holding_allocations
from pools.capacity.models import CapacityRequest
from pools.capacity.placement import FitResult, NodeCards, NodeFree, Shape, fit_shape
from pools.choices import GpuHealth, NodeState
from pools.inventory.driver_versions import parse_cuda_version
from pools.inventory.models import Gpu, GpuModel, Pool
from pools.inventory.topology import catalogue_domains


def request_shape(request: CapacityRequest, cards: int | None = None) -> Shape | None:
    """The request's shape, ``None`` when it has none (then only the card count matters).
    ``cards`` (a grant of fewer cards) must be the shape's total: a shape is granted whole."""
    if request.cards_per_node is None or request.node_count is None:
        return None
    return Shape(
        cards_per_node=request.cards_per_node,
        nodes=request.node_count,
        one_nvlink_domain=request.one_nvlink_domain,
        shared_nodes=request.shared_nodes,
    )


def pool_node_cards(*, pool: Pool, gpu_model: GpuModel, cuda: str | None = None) -> list[NodeCards]:
    """Schedulable cards of ``gpu_model`` in ``pool`` by node (sorted by hostname), each with
    its NVLink domains restricted to those cards (one query)."""
    gpus = Gpu.objects.filter(
        node__pool=pool, node__state=NodeState.UP, gpu_model=gpu_model
    ).exclude(health=GpuHealth.ERROR)
    wanted = parse_cuda_version(cuda) if cuda else None
    cards: dict[str, set[int]] = defaultdict(set)
    recorded: dict[str, list[list[int]] | None] = {}
    if connection.vendor == "postgresql":
        # one row per node, not per card: 2,000 rows for a 16,000-card pool
        rows = (
            gpus.values("node__hostname", "node__nvlink_domains", "node__driver_group__max_cuda")
            .annotate(indices=ArrayAgg("index"))
            .values_list(
                "node__hostname", "indices", "node__nvlink_domains", "node__driver_group__max_cuda"
            )
        )
    else:
        rows = (
            (host, [index], domains, max_cuda)
            for host, index, domains, max_cuda in gpus.values_list(
                "node__hostname", "index", "node__nvlink_domains", "node__driver_group__max_cuda"
            )
        )
    for hostname, indices, domains, max_cuda in rows:
        if wanted is not None:
            supported = parse_cuda_version(max_cuda or "")
            if supported is None or supported < wanted:
                continue
        cards[hostname].update(indices)
        recorded[hostname] = domains
    nodes = []
    # most nodes of a pool look alike (eight cards, one NVSwitch domain): read and check each
    # distinct (cards, domains) once, not once per node
    seen: dict[tuple, tuple[frozenset[int], tuple[frozenset[int], ...] | None]] = {}
    for hostname in sorted(cards):
        recorded_here = recorded[hostname]
        key = (tuple(sorted(cards[hostname])), repr(recorded_here))
        if key not in seen:
            indices = frozenset(cards[hostname])
            seen[key] = (indices, node_domains(indices, recorded_here, gpu_model))
            NodeCards(hostname, *seen[key])  # checks the card set and domains
        nodes.append(NodeCards.trusted(hostname, *seen[key]))
    return nodes


def node_domains(
    indices: frozenset[int], recorded: list[list[int]] | None, gpu_model: GpuModel
) -> tuple[frozenset[int], ...] | None:
    """A node's NVLink domains over ``indices`` (its cards that count): the imported ones
    (``recorded``), else the catalogue's facts, else ``None`` (unknown)."""
    if recorded is not None:
        try:
            domains = [frozenset(int(i) for i in group) & indices for group in recorded]
        except (TypeError, ValueError):
            domains = None  # a malformed value reads as unknown, never as joined
        if domains is not None:
            covered = frozenset().union(*domains) if domains else frozenset()
            # a card the capture did not list (added since) is a domain of its own: unknown
            # links are never assumed, and a card alone is a fact about what it can join
            extra = [frozenset({i}) for i in sorted(indices - covered)]
            return tuple(d for d in domains if d) + tuple(extra)
    nvlink = gpu_model.nvlink_gbps
    return catalogue_domains(
        indices,
        form_factor=gpu_model.form_factor,
        nvlink_gbps=None if nvlink is None else int(nvlink),
    )


def pool_free_nodes(
    *,
    pool: Pool,
    gpu_model: GpuModel,
    start: datetime,
    end: datetime,
    cuda: str | None = None,
    exclude_allocation: int | None = None,
) -> list[NodeFree]:
    """Per node, the cards free for the whole window ``[start, end)`` (module docstring)."""
    nodes = pool_node_cards(pool=pool, gpu_model=gpu_model, cuda=cuda)
    holds = holding_allocations(
        pool=pool, gpu_model=gpu_model, start=start, end=end, exclude_allocation=exclude_allocation
    )
    taken: dict[str, set[int]] = defaultdict(set)
    unplaced: list[tuple[datetime, datetime, int]] = []
    for cards, placement, starts_at, ends_at in holds.values_list(
        "card_count", "placement", "starts_at", "ends_at"
    ):
        if placement:
            for entry in placement:
                taken[entry["node"]].update(entry["gpus"])
        else:
            unplaced.append((starts_at, ends_at, cards))
    free = [
        NodeFree._trusted(node.name, node.gpus - frozenset(taken[node.name]), node.domains)
        if node.name in taken
        else NodeFree._trusted(node.name, node.gpus, node.domains)
        for node in nodes
    ]
    return lay_unplaced(free, peak_cards(unplaced, start, end))


def lay_unplaced(free: list[NodeFree], cards: int) -> list[NodeFree]:
    """Take ``cards`` cards (the peak that unplaced allocations hold at once in the window) off
    ``free`` where "any N cards" would go by best fit; all of them when fewer are left."""
    if cards <= 0:
        return free
    laid = fit_shape(free, Shape.any(cards))
    if not laid.fits:  # more granted than is left (over-commit): nothing is free any more
        return [NodeFree._trusted(n.name, frozenset(), n.domains) for n in free]
    used: dict[str, set[int]] = defaultdict(set)
    for spot in laid.placements:
        used[spot.node].update(spot.gpus)
    return [
        NodeFree._trusted(n.name, n.free - frozenset(used[n.name]), n.domains)
        if n.name in used
        else n
        for n in free
    ]


def shape_fit(
    *,
    pool: Pool,
    gpu_model: GpuModel,
    shape: Shape,
    start: datetime,
    end: datetime,
    cuda: str | None = None,
    exclude_allocation: int | None = None,
) -> FitResult:
    """Whether ``shape`` fits on the pool's cards free for the window, and where."""
    nodes = pool_free_nodes(
        pool=pool,
        gpu_model=gpu_model,
        start=start,
        end=end,
        cuda=cuda,
        exclude_allocation=exclude_allocation,
    )
    return fit_shape(nodes, shape)


def placement_record(result: FitResult) -> list[dict[str, object]]:
    """``Allocation.placement`` for a fitted shape: the nodes and cards counted on."""
    return [{"node": spot.node, "gpus": list(spot.gpus)} for spot in result.placements]


def shape_data(shape: Shape | None) -> dict[str, object] | None:
    """A shape as plain data for error bodies and the API."""
    if shape is None:
        return None
    if shape.is_any:
        return {"any_cards": shape.any_cards, "text": shape.describe()}
    return {
        "cards_per_node": shape.cards_per_node,
        "node_count": shape.nodes,
        "one_nvlink_domain": shape.one_nvlink_domain,
        "shared_nodes": shape.shared_nodes,
        "text": shape.describe(),
    }
