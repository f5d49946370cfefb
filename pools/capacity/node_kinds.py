"""A pool × GPU model's schedulable nodes as *kinds*: nodes alike in cards, NVLink domains and
driver, read once per inventory change.

Every shaped approval asks where cards are free, and the inventory side of that answer (which
nodes are up, which of their cards of the model are not in error, their NVLink domains and the
driver's CUDA version) changes only when an import or an admin writes the inventory, while the
held side changes with every approval. So the inventory side is read here and kept in this
process, keyed by the pool, the model and the **inventory generation** read in the same
transaction (:func:`pools.inventory.selectors.inventory_generation`: ``pools_inventorystamp``,
maintained by PostgreSQL triggers on GPUs, nodes, driver
groups and GPU models; migration ``0017_placed_cards_inventory_stamp`` says why it is
consistent). A changed generation reads again; so does every call on SQLite, which has no
stamp (``generation`` ``None``). At 2,000 nodes × 8 cards the read is one scan of 16,000 card
rows (about 8 ms on PostgreSQL on the bench machine); a cached answer costs nothing.

Cards counted are the schedulable ones (:data:`pools.inventory.models.SCHEDULABLE_CARD`: node
up, card not in error, not in MIG mode); the CUDA filter is applied by the caller per request
(:meth:`PoolNodes.kinds_for`).
NVLink domains are the node's imported ones (``Node.nvlink_domains``, from ``nvidia-smi topo
-m``), else the catalogue's facts (:func:`pools.inventory.topology.catalogue_domains`), else
unknown (:func:`node_domains`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field

from django.db import connection
from django.db.models import BooleanField, ExpressionWrapper

from pools.capacity.placement import NodeCards, ShapeError
from pools.capacity.window import MAX_PLACED_INDEX
from pools.common.choices import NodeState
from pools.inventory.driver_versions import driver_supports, parse_cuda_version
from pools.inventory.models import (
    WHOLE_CARD,
    WHOLE_CARD_SQL,
    DriverGroup,
    Gpu,
    GpuModel,
    Node,
    Pool,
)
from pools.inventory.topology import catalogue_domains


@dataclass(frozen=True)
class NodeKind:
    """Nodes (``hostnames``, sorted) with the same schedulable cards of the model (``gpus``,
    GPU indices), the same NVLink domains over them (``None``: unknown) and the same driver
    (``max_cuda``, the driver group's highest CUDA version, ``None`` when unknown);
    ``placeable`` the cards of ``gpus`` a shape may be placed on (indices 0–62)."""

    gpus: frozenset[int]
    domains: tuple[frozenset[int], ...] | None
    max_cuda: str | None
    hostnames: tuple[str, ...]
    placeable: frozenset[int] = field(init=False)

    def __post_init__(self) -> None:
        # The cards a shape may be placed on: GPU indices 0–62 (a placement is kept as a 64-bit
        # mask, :func:`pools.capacity.window.gpu_mask`; nvidia-smi numbers a node's cards from
        # 0 and the largest boards have 16). Cards above are counted, never placed.
        placeable = frozenset(i for i in self.gpus if i <= MAX_PLACED_INDEX)
        object.__setattr__(self, "placeable", placeable)

    @property
    def cards(self) -> int:
        """Schedulable cards of this kind in all: cards per node × nodes."""
        return len(self.gpus) * len(self.hostnames)


@dataclass(frozen=True)
class PoolNodes:
    """A pool × model's schedulable nodes by kind; ``kind_of`` maps a hostname to its kind's
    position in ``kinds``."""

    kinds: tuple[NodeKind, ...]
    kind_of: dict[str, int]

    def kinds_for(self, cuda: str | None) -> list[tuple[int, NodeKind]]:
        """``(position, kind)`` of the kinds whose driver supports CUDA ``cuda`` ("12.4";
        ``None``: any driver)."""
        wanted = parse_cuda_version(cuda) if cuda else None
        return [
            (at, kind)
            for at, kind in enumerate(self.kinds)
            if driver_supports(kind.max_cuda, wanted)
        ]

    def schedulable(self, cuda: str | None) -> int:
        """Schedulable cards whose driver supports CUDA ``cuda`` (the card invariant's count)."""
        return sum(kind.cards for _, kind in self.kinds_for(cuda))


# (pool id, model id) -> (generation, nodes): the newest generation read in this process
_READ: dict[tuple[int, int], tuple[int, PoolNodes]] = {}


def pool_nodes(*, pool: Pool, gpu_model: GpuModel, generation: int | None) -> PoolNodes:
    """The pool's schedulable nodes of ``gpu_model`` by kind, as of inventory ``generation``
    (read in the caller's transaction, before this call; ``None``: read now, keep nothing).
    Recorded domains that cannot be right (a card in two) read as unknown."""
    key = (pool.pk, gpu_model.pk)
    if generation is not None:
        known = _READ.get(key)
        if known is not None and known[0] == generation:
            return known[1]
    if connection.vendor == "postgresql":
        rows = _rows_sql(pool, gpu_model)
    else:
        rows = _rows_orm(pool, gpu_model)
    checked: dict[tuple, tuple[frozenset[int], ...] | None] = {}
    kinds = []
    for gpus, board, recorded, max_cuda, hostnames in rows:
        cards = frozenset(gpus)
        seen = (cards, frozenset(board), repr(recorded))
        if seen not in checked:  # read and check each distinct (cards, domains) once
            domains = node_domains(cards, recorded, gpu_model, board=frozenset(board))
            try:
                NodeCards(hostnames[0], cards, domains)
            except ShapeError:  # a card in two domains: unknown, never joined
                domains = None
            checked[seen] = domains
        kinds.append(NodeKind(cards, checked[seen], max_cuda, tuple(sorted(hostnames))))
    kinds.sort(key=lambda kind: kind.hostnames[0])  # the same order whatever the database's
    nodes = PoolNodes(
        tuple(kinds), {name: at for at, kind in enumerate(kinds) for name in kind.hostnames}
    )
    if generation is not None:
        _READ[key] = (generation, nodes)
    return nodes


# Per node (up) its schedulable cards of the model and all its cards of the model (the board
# the catalogue's facts describe, cards in error or in MIG mode included), then nodes alike in
# (cards, board, domains, driver) as one row with their hostnames. The domains come as JSON
# text (Django decodes jsonb itself, so a raw cursor reads the text).
_KINDS_SQL = f"""
SELECT c.gpus, c.board, c.domains, c.max_cuda, array_agg(c.hostname)
  FROM (SELECT n.hostname, n.nvlink_domains::text AS domains, dg.max_cuda,
               array_agg(g."index" ORDER BY g."index")
                 FILTER (WHERE {WHOLE_CARD_SQL}) AS gpus,
               array_agg(g."index" ORDER BY g."index") AS board
          FROM {Gpu._meta.db_table} g
          JOIN {Node._meta.db_table} n ON n.id = g.node_id
          LEFT JOIN {DriverGroup._meta.db_table} dg ON dg.id = n.driver_group_id
         WHERE n.pool_id = %(pool)s AND n.state = %(up)s AND g.gpu_model_id = %(model)s
         GROUP BY n.id, dg.max_cuda
        HAVING COUNT(*) FILTER (WHERE {WHOLE_CARD_SQL}) > 0) c
 GROUP BY c.gpus, c.board, c.domains, c.max_cuda
"""


def _rows_sql(pool: Pool, gpu_model: GpuModel) -> list[tuple]:
    params = {
        "pool": pool.pk,
        "model": gpu_model.pk,
        "up": NodeState.UP.value,
    }
    with connection.cursor() as cursor:
        cursor.execute(_KINDS_SQL, params)
        rows = cursor.fetchall()
    return [
        (gpus, board, None if domains is None else json.loads(domains), max_cuda, hostnames)
        for gpus, board, domains, max_cuda, hostnames in rows
    ]


def _rows_orm(pool: Pool, gpu_model: GpuModel) -> list[tuple]:
    """What :data:`_KINDS_SQL` answers, node by node through the ORM (SQLite)."""
    gpus = Gpu.objects.filter(
        node__pool=pool, node__state=NodeState.UP, gpu_model=gpu_model
    ).annotate(whole=ExpressionWrapper(WHOLE_CARD, output_field=BooleanField()))
    cards: dict[str, list[int]] = defaultdict(list)
    board: dict[str, list[int]] = defaultdict(list)
    about: dict[str, tuple] = {}
    for hostname, index, whole, domains, max_cuda in gpus.values_list(
        "node__hostname",
        "index",
        "whole",
        "node__nvlink_domains",
        "node__driver_group__max_cuda",
    ):
        board[hostname].append(index)
        if whole:
            cards[hostname].append(index)
        about[hostname] = (domains, max_cuda)
    alike: dict[tuple, list[str]] = defaultdict(list)
    for hostname, indices in cards.items():
        domains, max_cuda = about[hostname]
        key = (tuple(sorted(indices)), tuple(sorted(board[hostname])), repr(domains), max_cuda)
        alike[key].append(hostname)
    return [
        (list(gpus), list(all_gpus), about[hostnames[0]][0], max_cuda, hostnames)
        for (gpus, all_gpus, _, max_cuda), hostnames in alike.items()
    ]


def node_domains(
    indices: frozenset[int],
    recorded: list[list[int]] | None,
    gpu_model: GpuModel,
    *,
    board: frozenset[int] | None = None,
) -> tuple[frozenset[int], ...] | None:
    """A node's NVLink domains over ``indices`` (its cards that count): the imported ones
    (``recorded``), else the catalogue's facts about the node's ``board`` (all its cards of the
    model, those in error too; default ``indices``: an HGX board with a card in error is still
    an 8-card board) over ``indices``, else ``None`` (unknown)."""
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
    facts = catalogue_domains(
        indices if board is None else board | indices,
        form_factor=gpu_model.form_factor,
        nvlink_gbps=None if nvlink is None else int(nvlink),
    )
    if facts is None:
        return None
    return tuple(domain & indices for domain in facts if domain & indices)
