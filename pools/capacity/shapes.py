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

Two queries whatever the pool's size, and Python work that grows with the *kinds* of node, not
the nodes (issue #20: a 2,000-node pool is a few dozen kinds): on PostgreSQL the first query
gathers the placed cards each node holds and returns nodes alike in cards, held cards, domains
and driver as one row with their hostnames; the second the holding allocations without a
placement. The fitter then works on groups of alike nodes
(:func:`pools.capacity.placement.fit_groups`).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from django.db import connection

from pools.capacity.arithmetic import peak_cards
from pools.capacity.availability import driver_supports, holding_allocations, window_sql_params
from pools.capacity.models import Allocation, CapacityRequest
from pools.capacity.placement import (
    FitResult,
    NodeCards,
    NodeFree,
    NodeGroup,
    Shape,
    fit_groups,
    take_cards,
)
from pools.choices import GpuHealth, NodeState
from pools.inventory.driver_versions import parse_cuda_version
from pools.inventory.models import DriverGroup, Gpu, GpuModel, Node, Pool
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


def pool_free_groups(
    *,
    pool: Pool,
    gpu_model: GpuModel,
    start: datetime,
    end: datetime,
    cuda: str | None = None,
    exclude_allocation: int | None = None,
) -> list[NodeGroup]:
    """The pool's nodes of ``gpu_model`` as groups of alike ones (:class:`NodeGroup`: same
    cards free for the whole window ``[start, end)``, same domains), unplaced allocations laid
    (module docstring). Two queries; Python work grows with the kinds of node, not the nodes."""
    if connection.vendor == "postgresql":
        kinds, unplaced = _kinds_sql(pool, gpu_model, start, end, exclude_allocation)
    else:
        kinds, unplaced = _kinds_orm(pool, gpu_model, start, end, exclude_allocation)
    wanted = parse_cuda_version(cuda) if cuda else None
    checked: dict[tuple, tuple[frozenset[int], ...] | None] = {}
    groups = []
    for gpus, held, recorded, max_cuda, hostnames in kinds:
        if not driver_supports(max_cuda, wanted):
            continue
        cards = frozenset(gpus)
        key = (cards, repr(recorded))
        if key not in checked:  # read and check each distinct (cards, domains) once
            checked[key] = node_domains(cards, recorded, gpu_model)
            NodeCards(hostnames[0], cards, checked[key])  # raises on a bad card set or domains
        groups.append(
            NodeGroup(tuple(sorted(hostnames)), cards - frozenset(held or ()), checked[key])
        )
    return lay_unplaced(groups, peak_cards(unplaced, start, end))


# Kinds of node: per node its schedulable cards of the model and the cards placed holding
# allocations hold over the window, then nodes alike in (cards, held, domains, driver) as one
# row with their hostnames. Then the holding allocations without a placement.
_KINDS_SQL = f"""
WITH cards AS (
  SELECT n.hostname, n.nvlink_domains AS domains, dg.max_cuda,
         array_agg(g."index" ORDER BY g."index") AS gpus
    FROM {Gpu._meta.db_table} g
    JOIN {Node._meta.db_table} n ON n.id = g.node_id
    LEFT JOIN {DriverGroup._meta.db_table} dg ON dg.id = n.driver_group_id
   WHERE n.pool_id = %(pool)s AND n.state = %(up)s AND g.gpu_model_id = %(model)s
     AND g.health <> %(error)s
   GROUP BY n.id, dg.max_cuda
), held AS (
  SELECT spot.node AS hostname, array_agg(DISTINCT gpu) AS gpus
    FROM {Allocation._meta.db_table} a
   CROSS JOIN LATERAL jsonb_to_recordset(a.placement) AS spot(node text, gpus int[])
   CROSS JOIN LATERAL unnest(spot.gpus) AS gpu
   WHERE {{holding}} AND jsonb_typeof(a.placement) = 'array'
   GROUP BY spot.node
)
SELECT c.gpus, h.gpus, c.domains, c.max_cuda, array_agg(c.hostname)
  FROM cards c LEFT JOIN held h ON h.hostname = c.hostname
 GROUP BY c.gpus, h.gpus, c.domains, c.max_cuda
"""
_HOLDING_SQL = """a.pool_id = %(pool)s AND a.gpu_model_id = %(model)s
     AND a.status = ANY(%(holding)s)
     AND a.starts_at < %(end)s AND a.ends_at > %(start)s AND a.id <> %(exclude)s"""
_UNPLACED_SQL = f"""
SELECT a.starts_at, a.ends_at, a.card_count FROM {Allocation._meta.db_table} a
 WHERE {_HOLDING_SQL}
   AND NOT (jsonb_typeof(a.placement) = 'array' AND jsonb_array_length(a.placement) > 0)
"""
_KINDS_SQL = _KINDS_SQL.replace("{holding}", _HOLDING_SQL)


def _kinds_sql(pool, gpu_model, start, end, exclude_allocation):
    params = window_sql_params(pool, gpu_model, start, end, exclude_allocation)
    with connection.cursor() as cursor:
        cursor.execute(_KINDS_SQL, params)
        kinds = cursor.fetchall()
        cursor.execute(_UNPLACED_SQL, params)
        unplaced = cursor.fetchall()
    return kinds, unplaced


def _kinds_orm(pool, gpu_model, start, end, exclude_allocation):
    """What :data:`_KINDS_SQL` answers, node by node through the ORM (SQLite)."""
    gpus = Gpu.objects.filter(
        node__pool=pool, node__state=NodeState.UP, gpu_model=gpu_model
    ).exclude(health=GpuHealth.ERROR)
    cards: dict[str, list[int]] = defaultdict(list)
    about: dict[str, tuple] = {}
    for hostname, index, domains, max_cuda in gpus.values_list(
        "node__hostname", "index", "node__nvlink_domains", "node__driver_group__max_cuda"
    ):
        cards[hostname].append(index)
        about[hostname] = (domains, max_cuda)
    held: dict[str, set[int]] = defaultdict(set)
    unplaced = []
    holds = holding_allocations(
        pool=pool, gpu_model=gpu_model, start=start, end=end, exclude_allocation=exclude_allocation
    )
    for count, placement, starts_at, ends_at in holds.values_list(
        "card_count", "placement", "starts_at", "ends_at"
    ):
        if placement:
            for spot in placement:
                held[spot["node"]].update(spot["gpus"])
        else:
            unplaced.append((starts_at, ends_at, count))
    alike: dict[tuple, list[str]] = defaultdict(list)
    for hostname, indices in cards.items():
        taken = tuple(sorted(held[hostname])) if hostname in held else None
        domains, max_cuda = about[hostname]
        alike[(tuple(sorted(indices)), taken, repr(domains), max_cuda)].append(hostname)
    kinds = [
        (list(gpus), taken, about[hostnames[0]][0], max_cuda, hostnames)
        for (gpus, taken, _, max_cuda), hostnames in alike.items()
    ]
    return kinds, unplaced


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
    """Per node (by hostname), the cards free for the whole window ``[start, end)``: the
    groups of :func:`pool_free_groups` one node at a time."""
    groups = pool_free_groups(
        pool=pool,
        gpu_model=gpu_model,
        start=start,
        end=end,
        cuda=cuda,
        exclude_allocation=exclude_allocation,
    )
    nodes = [NodeFree._trusted(name, g.free, g.domains) for g in groups for name in g.names]
    return sorted(nodes, key=lambda n: n.name)


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
) -> FitResult:
    """Whether ``shape`` fits on the pool's cards free for the window, and where."""
    groups = pool_free_groups(
        pool=pool,
        gpu_model=gpu_model,
        start=start,
        end=end,
        cuda=cuda,
        exclude_allocation=exclude_allocation,
    )
    return fit_groups(groups, shape)


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
