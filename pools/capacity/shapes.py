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
them somewhere rather than nowhere, and never twice. A node a planned maintenance window takes
out at any time in the window has no card free (:mod:`pools.capacity.window`: the window names
its nodes, so its cards are not "any N"), and a refusal names it ("node inf-02 away for
maintenance R570 upgrade (#7) until …", :func:`pools.capacity.placement.away_reason`).

One statement per check whatever the pool's size (issue #20): the held side
(:func:`pools.capacity.window.window_holds`: the cards placed allocations hold on each node, a
``bit_or`` over :class:`pools.capacity.models.PlacedCards`, and the peak of the unplaced ones);
the inventory side (nodes alike in cards, domains and driver) is read once per inventory change
(:mod:`pools.capacity.node_kinds`). Python work grows with the kinds of node and the nodes
held, not the nodes; the fitter works on groups of alike nodes
(:func:`pools.capacity.placement.fit_groups`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from datetime import datetime

from pools.capacity.models import Allocation, CapacityRequest, PlacedCards
from pools.capacity.node_kinds import pool_nodes
from pools.capacity.placement import (
    FitResult,
    NodeGroup,
    Shape,
    fit_groups,
    take_cards,
    with_away,
)
from pools.capacity.window import WindowHolds, gpu_mask, mask_gpus, window_holds_reusing
from pools.inventory.models import GpuModel, Pool


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


def pool_free_groups(
    *,
    pool: Pool,
    gpu_model: GpuModel,
    start: datetime,
    end: datetime,
    cuda: str | None = None,
    exclude_allocation: int | None = None,
    holds: WindowHolds | None = None,
) -> list[NodeGroup]:
    """The pool's nodes of ``gpu_model`` as groups of alike ones (:class:`NodeGroup`: same
    cards free for the whole window ``[start, end)``, same domains), unplaced allocations laid
    (module docstring). ``holds``: what :func:`pools.capacity.window.window_holds` read with
    ``per_node`` (the approval reads it once for the card count and the shape); otherwise one
    statement here. Python work grows with the kinds of node and the nodes held, not the
    nodes."""
    holds = window_holds_reusing(
        holds,
        pool=pool,
        gpu_model=gpu_model,
        start=start,
        end=end,
        exclude_allocation=exclude_allocation,
        per_node=True,
    )
    held, unplaced = holds.held, holds.unplaced_peak
    assert held is not None and unplaced is not None  # read with per_node
    nodes = pool_nodes(pool=pool, gpu_model=gpu_model, generation=holds.generation)
    usable = dict(nodes.kinds_for(cuda))
    touched: dict[tuple[int, int], list[str]] = defaultdict(list)
    for hostname, mask in held.items():
        at = nodes.kind_of.get(hostname)
        if at in usable:  # cards held on a node down or filtered out: nothing to take
            touched[(at, mask)].append(hostname)
    kinds_touched = {at for at, _ in touched}
    groups = []
    for at, kind in usable.items():
        names = kind.hostnames
        if at in kinds_touched:
            names = tuple(name for name in names if name not in held)
        if names:
            groups.append(NodeGroup(names, kind.placeable, kind.domains))
    for (at, mask), names in touched.items():
        kind = usable[at]
        free = kind.placeable - mask_gpus(mask)
        groups.append(NodeGroup(tuple(sorted(names)), free, kind.domains))
    return lay_unplaced(groups, unplaced)


def lay_unplaced(groups: list[NodeGroup], cards: int) -> list[NodeGroup]:
    """Take ``cards`` cards (the peak that unplaced allocations hold at once in the window) off
    ``groups`` where "any N cards" would go by best fit; all of them when fewer are left."""
    if cards <= 0:
        return groups
    laid = fit_groups(groups, Shape.any(cards))
    if not laid.fits:  # more granted than is left (over-commit): nothing is free any more
        return [NodeGroup(g.names, frozenset(), g.domains) for g in groups]
    return take_cards(groups, {spot.node: spot.gpus for spot in laid.placements})


def shape_fit(
    *,
    pool: Pool,
    gpu_model: GpuModel,
    shape: Shape,
    start: datetime,
    end: datetime,
    cuda: str | None = None,
    exclude_allocation: int | None = None,
    holds: WindowHolds | None = None,
) -> FitResult:
    """Whether ``shape`` fits on the pool's cards free for the window, and where (``holds``
    as for :func:`pool_free_groups`); when it does not, the reason names the nodes of the
    model away for maintenance in the window (:func:`pools.capacity.placement.with_away`)."""
    holds = window_holds_reusing(
        holds,
        pool=pool,
        gpu_model=gpu_model,
        start=start,
        end=end,
        exclude_allocation=exclude_allocation,
        per_node=True,
    )
    groups = pool_free_groups(
        pool=pool, gpu_model=gpu_model, start=start, end=end, cuda=cuda, holds=holds
    )
    fit = fit_groups(groups, shape)
    if fit.fits or not holds.away:
        return fit
    names = {name for group in groups for name in group.names}
    return with_away(fit, (spot for spot in holds.away if spot.node in names))


def placement_taken(
    *,
    pool: Pool,
    gpu_model: GpuModel,
    placement: list[dict],
    start: datetime,
    end: datetime,
    cuda: str | None = None,
    exclude_allocation: int | None = None,
    holds: WindowHolds | None = None,
) -> list[dict[str, object]]:
    """The cards of ``placement`` (``Allocation.placement``: ``[{"node": hostname, "gpus":
    [index, ...]}, ...]``) that are not free for the whole window ``[start, end)``, in the
    same form and order; empty when all are. Without ``exclude_allocation``'s holds;
    ``holds`` as for :func:`pool_free_groups`.

    A card is free when it is schedulable (node up, card not in error, driver as asked) and no
    placed allocation holds it in the window. Unplaced allocations are not laid first (they
    could go elsewhere): instead the cards left once ``placement`` is taken must still take
    their peak as "any N cards", else all of ``placement`` counts as taken. The check
    :func:`shape_fit` makes, for cards fixed in advance: an extension keeping its job's cards
    (:func:`pools.capacity.services.requests.capacity_request_approve`), a reclamation undone
    (:func:`pools.reclamation.services.scan.reclamation_undo`)."""
    holds = window_holds_reusing(
        holds,
        pool=pool,
        gpu_model=gpu_model,
        start=start,
        end=end,
        exclude_allocation=exclude_allocation,
        per_node=True,
    )
    unplaced = holds.unplaced_peak
    assert unplaced is not None  # read with per_node
    groups = pool_free_groups(
        pool=pool,
        gpu_model=gpu_model,
        start=start,
        end=end,
        cuda=cuda,
        holds=replace(holds, unplaced_peak=0),
    )
    free = {name: group.free for group in groups for name in group.names}
    taken = []
    wanted: dict[str, set[int]] = defaultdict(set)
    for spot in placement:
        gpus = [g for g in spot["gpus"] if g not in free.get(spot["node"], ())]
        if gpus:
            taken.append({"node": spot["node"], "gpus": gpus})
        wanted[spot["node"]].update(spot["gpus"])
    if taken or unplaced <= 0:
        return taken
    laid = fit_groups(take_cards(groups, wanted), Shape.any(unplaced))
    if laid.fits:
        return []
    return [dict(spot) for spot in placement]


def placement_kept(placement: list[dict], cards: int) -> list[dict[str, object]]:
    """The part of ``placement`` an allocation shrunk to ``cards`` cards keeps: its first
    ``cards`` cards in placement order (the order the fitter chose its groups in), so whole
    entries (a shape's groups of cards per node) first, then the lowest-listed GPUs of the
    next; the entries after that are dropped. ``placement`` as ``Allocation.placement``."""
    kept: list[dict[str, object]] = []
    left = cards
    for spot in placement:
        if left <= 0:
            break
        gpus = list(spot["gpus"])[:left]
        left -= len(gpus)
        if gpus:
            kept.append({"node": spot["node"], "gpus": gpus})
    return kept


def placement_record(result: FitResult) -> list[dict[str, object]]:
    """``Allocation.placement`` for a fitted shape: the nodes and cards counted on."""
    return [{"node": spot.node, "gpus": list(spot.gpus)} for spot in result.placements]


def placed_cards(allocation: Allocation) -> list[PlacedCards]:
    """The :class:`PlacedCards` rows of ``allocation.placement`` (one per node, its GPU indices
    as a mask), unsaved. Raises :class:`ValueError` for a GPU index outside 0–62."""
    masks: dict[str, int] = {}
    for spot in allocation.placement:
        masks[spot["node"]] = masks.get(spot["node"], 0) | gpu_mask(spot["gpus"])
    return [
        PlacedCards(allocation=allocation, hostname=host, gpu_mask=mask)
        for host, mask in masks.items()
        if mask
    ]


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
