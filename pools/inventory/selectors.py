"""Read-side queries: visibility and query shape for every inventory list and summary."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from django.db import connection
from django.db.models import (
    BooleanField,
    Case,
    CharField,
    Count,
    ExpressionWrapper,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from pools.common.choices import GpuHealth, NodeState
from pools.inventory.driver_versions import parse_cuda_version
from pools.inventory.models import (
    SCHEDULABLE_CARD,
    SLICED_CARD,
    DriverGroup,
    Gpu,
    GpuModel,
    InventoryImport,
    InventoryUpload,
    MigDevice,
    Node,
    Pool,
)


def node_list() -> QuerySet[Node]:
    """Nodes with pool and driver group joined and their card counts annotated.

    Annotations: ``gpu_count`` (cards), ``unrecognised_count`` (cards with no catalogue model).
    The query count does not grow with the number of rows.
    """
    # Correlated subqueries, not a GROUP BY over every GPU: a page computes them for its rows only.
    return Node.objects.select_related("pool", "driver_group", "cluster").annotate(
        gpu_count=_gpu_count(),
        unrecognised_count=_gpu_count(gpu_model__isnull=True),
    )


def _gpu_count(**filters):
    per_node = (
        Gpu.objects.filter(node=OuterRef("pk"), **filters)
        .order_by()
        .values("node")
        .annotate(n=Count("id"))
        .values("n")
    )
    return Coalesce(Subquery(per_node), 0)


def _count(model, counted=None, **filters):
    """A correlated subquery: ``counted`` (default: rows) of ``model`` matching ``filters``
    (which name the outer row with ``OuterRef``), 0 when none. Counts only the rows a page
    shows, where a join and GROUP BY would count every card of the fleet."""
    rows = model.objects.filter(**filters).order_by().annotate(one=Value(1)).values("one")
    return Coalesce(Subquery(rows.annotate(n=counted or Count("*")).values("n")), 0)


def node_detail(*, hostname: str, cluster: str | None = None) -> tuple[Node, list[Node]]:
    """The node named ``hostname`` — of the cluster of slug ``cluster`` when given, else the
    first by cluster name (the environment's first) — with its pool, cluster, GPUs, their
    models and MIG devices; and the other clusters' nodes of that name, with their clusters
    (names are unique per cluster only). Raises ``Node.DoesNotExist``."""
    named = Node.objects.filter(hostname=hostname).select_related("cluster")
    if cluster:
        named = named.filter(cluster__slug=cluster)
    named = named.order_by(F("cluster__name").asc(nulls_first=True), "pk")
    first = named.values_list("pk", flat=True).first()
    if first is None:
        raise Node.DoesNotExist(hostname)
    node = (
        Node.objects.select_related("pool", "driver_group", "cluster")
        .prefetch_related("gpus__gpu_model", "gpus__mig_devices")
        .get(pk=first)
    )
    others = list(
        Node.objects.filter(hostname=hostname)
        .exclude(pk=node.pk)
        .select_related("cluster")
        .order_by(F("cluster__name").asc(nulls_first=True), "pk")
    )
    return node, others


def gpu_list() -> QuerySet[Gpu]:
    """GPUs with node, its pool, driver group and cluster, and model joined (one query per
    page)."""
    mig_count = (
        MigDevice.objects.filter(gpu=OuterRef("pk"))
        .order_by()
        .values("gpu")
        .annotate(n=Count("id"))
        .values("n")
    )
    return (
        Gpu.objects.select_related(
            "node", "node__pool", "node__driver_group", "node__cluster", "gpu_model"
        )
        .defer("node__labels", "node__partitions", "gpu_model__sources")
        .annotate(mig_device_count=Coalesce(Subquery(mig_count), 0))
    )


def inventory_generation() -> int | None:
    """The inventory generation now (one statement on PostgreSQL; ``None`` elsewhere, where
    readers that cache by it read each time). ``pools_inventorystamp`` moves, in the writer's
    transaction, on every statement that writes GPUs, nodes, driver groups or GPU models
    (migration ``0017_placed_cards_inventory_stamp`` says why a reader that sees a generation
    sees every write before it)."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT generation FROM pools_inventorystamp")
        row = cursor.fetchone()
    return row[0] if row else None


@dataclass(frozen=True)
class CardGroup:
    """``cards`` cards alike in all the fleet's counts read: their node's pool, state and
    driver group (with its highest CUDA version), their model (``None``: unrecognised, then
    ``raw_model_name`` is the reported name, else ""), in error or not, in MIG mode or not."""

    pool_id: int | None
    gpu_model_id: int | None
    raw_model_name: str
    driver_group_id: int | None
    max_cuda: str | None
    node_state: str
    error: bool
    mig: bool
    cards: int

    @property
    def healthy(self) -> bool:
        """Own health not ``error`` on a node that is up (as the fleet overview counts)."""
        return self.node_state == NodeState.UP and not self.error

    @property
    def whole(self) -> bool:
        """The card-level half of :data:`pools.inventory.models.WHOLE_CARD`."""
        return not self.error and not self.mig

    @property
    def schedulable(self) -> bool:
        """:data:`pools.inventory.models.SCHEDULABLE_CARD`: node up, model known, whole."""
        return self.node_state == NodeState.UP and self.gpu_model_id is not None and self.whole

    @property
    def sliced(self) -> bool:
        """:data:`pools.inventory.models.SLICED_CARD`: node up, model known, MIG, not in error."""
        return (
            self.node_state == NodeState.UP
            and self.gpu_model_id is not None
            and self.mig
            and not self.error
        )


@dataclass(frozen=True)
class NodeGroup:
    """``nodes`` nodes (with cards or without) of one pool and driver group."""

    pool_id: int | None
    driver_group_id: int | None
    nodes: int


@dataclass(frozen=True)
class InventoryCensus:
    """Every card and node of the fleet counted by group: a few hundred rows whatever the
    fleet's size, from which every per-pool, per-model and per-driver-group count is summed."""

    cards: tuple[CardGroup, ...]
    nodes: tuple[NodeGroup, ...]

    def count_cards(
        self,
        key: Callable[[CardGroup], Hashable],
        where: Callable[[CardGroup], bool] | None = None,
    ) -> dict:
        """Cards of the groups ``where`` keeps (default: all), summed by ``key(group)``."""
        counts: dict = defaultdict(int)
        for group in self.cards:
            if where is None or where(group):
                counts[key(group)] += group.cards
        return dict(counts)

    def count_nodes(self, key: Callable[[NodeGroup], Hashable]) -> dict:
        """Nodes summed by ``key(group)``."""
        counts: dict = defaultdict(int)
        for group in self.nodes:
            counts[key(group)] += group.nodes
        return dict(counts)


# the newest inventory generation read in this process and the census read under it
_CENSUS: dict[str, tuple[int, InventoryCensus]] = {}


def inventory_census() -> InventoryCensus:
    """The fleet's cards and nodes by group (:class:`InventoryCensus`), read once per inventory
    generation (:func:`inventory_generation`) and kept in this process, as
    :mod:`pools.capacity.node_kinds` keeps node kinds: one statement for the generation, one
    more (a ``UNION ALL`` of the two grouped reads) when it changed; on SQLite both each time.

    At 100,800 cards the grouped read takes about 50 ms on the bench machine; lists, the
    approval queue, the explainer and the admin dashboard read its few hundred rows instead.
    The generation is read first: a write committed between the two reads is then kept under
    the older generation (newer than it says, never older), and the next generation reads
    again."""
    generation = inventory_generation()
    known = _CENSUS.get("census")
    if generation is not None and known is not None and known[0] == generation:
        return known[1]
    cards = (
        Gpu.objects.annotate(
            kind=Value("gpu"),
            raw=Case(When(gpu_model__isnull=True, then=F("raw_model_name")), default=Value("")),
            error=ExpressionWrapper(Q(health=GpuHealth.ERROR), output_field=BooleanField()),
            mig=ExpressionWrapper(Q(mig_mode=True), output_field=BooleanField()),
        )
        .values_list(
            "kind",
            "node__pool",
            "gpu_model",
            "raw",
            "node__driver_group",
            "node__driver_group__max_cuda",
            "node__state",
            "error",
            "mig",
        )
        .annotate(n=Count("id"))
        .order_by()
    )
    nodes = (
        Node.objects.annotate(
            kind=Value("node"),
            model=Value(None, output_field=IntegerField()),
            raw=Value(""),
            max_cuda=Value(None, output_field=CharField()),
            no_state=Value(""),
            error=Value(False),
            mig=Value(False),
        )
        .values_list(
            "kind", "pool", "model", "raw", "driver_group", "max_cuda", "no_state", "error", "mig"
        )
        .annotate(n=Count("id"))
        .order_by()
    )
    card_groups, node_groups = [], []
    for kind, pool, model, raw, group, max_cuda, state, error, mig, n in cards.union(
        nodes, all=True
    ):
        if kind == "gpu":
            card_groups.append(
                CardGroup(pool, model, raw or "", group, max_cuda, state, bool(error), bool(mig), n)
            )
        else:
            node_groups.append(NodeGroup(pool, group, n))
    census = InventoryCensus(tuple(card_groups), tuple(node_groups))
    if generation is not None:
        _CENSUS["census"] = (generation, census)
    return census


def _known(counts: dict[int, int]) -> Case:
    """Each row's count in ``counts`` (by primary key, 0 when absent) as a constant of the
    statement: the counts come from :func:`inventory_census`, so the list reads no card."""
    whens = [
        When(pk=pk, then=Value(n))
        for pk, n in sorted((k, v) for k, v in counts.items() if k is not None)
    ]
    return Case(*whens, default=Value(0), output_field=IntegerField())


def gpu_model_list() -> QuerySet[GpuModel]:
    """Catalogue rows with aliases prefetched and the fleet's card count (``gpu_count``, every
    card of the model, in a pool or not) annotated from the census (:func:`inventory_census`).
    Two statements, three when the inventory changed (and the aliases' prefetch)."""
    census = inventory_census()
    return GpuModel.objects.prefetch_related("aliases").annotate(
        gpu_count=_known(census.count_cards(lambda g: g.gpu_model_id))
    )


def driver_group_list() -> QuerySet[DriverGroup]:
    """Driver groups with ``node_count``, ``gpu_count`` and ``mig_gpu_count`` (cards in MIG mode:
    in ``gpu_count``, never whole cards) annotated from the census (:func:`inventory_census`)."""
    census = inventory_census()
    return DriverGroup.objects.annotate(
        node_count=_known(census.count_nodes(lambda g: g.driver_group_id)),
        gpu_count=_known(census.count_cards(lambda g: g.driver_group_id)),
        mig_gpu_count=_known(census.count_cards(lambda g: g.driver_group_id, lambda g: g.mig)),
    )


def pool_list(*, with_mig: bool = False) -> QuerySet[Pool]:
    """Pools with ``node_count``, ``gpu_count`` and ``driver_branch_count`` annotated, and with
    ``with_mig`` ``mig_gpu_count`` (cards in MIG mode: in ``gpu_count``, never whole cards), from
    the census (:func:`inventory_census`).

    A pool with more than one driver branch is flagged on its page: a job that needs the newer
    branch's CUDA may land on a node that cannot run it.
    """
    census = inventory_census()
    branches: dict[int, int] = defaultdict(int)
    for pool_id, group_id in census.count_nodes(lambda g: (g.pool_id, g.driver_group_id)):
        if group_id is not None:
            branches[pool_id] += 1
    pools = Pool.objects.select_related("cluster").annotate(
        node_count=_known(census.count_nodes(lambda g: g.pool_id)),
        gpu_count=_known(census.count_cards(lambda g: g.pool_id)),
        driver_branch_count=_known(branches),
    )
    if with_mig:
        mig = census.count_cards(lambda g: g.pool_id, lambda g: g.mig)
        pools = pools.annotate(mig_gpu_count=_known(mig))
    return pools


def unrecognised_model_list() -> list[dict]:
    """Reported model names with no catalogue model, for an admin to map.

    ``[{raw_model_name, model_candidates, gpu_count, node_count}]``: ``model_candidates`` lists the
    slugs an ambiguous name could be (several SKUs share it and the PCI device id did not settle
    it), empty for a name that matches nothing. Sorted by card count, largest first.
    """
    rows = (
        Gpu.objects.filter(gpu_model__isnull=True)
        .exclude(raw_model_name="")
        .values("raw_model_name", "model_candidates")
        .annotate(gpu_count=Count("id"), node_count=Count("node", distinct=True))
        .order_by("-gpu_count", "raw_model_name")
    )
    return list(rows)


def inventory_import_list() -> QuerySet[InventoryImport]:
    return InventoryImport.objects.select_related("actor")


def inventory_upload_list() -> QuerySet[InventoryUpload]:
    """Background imports, newest first, without the file's bytes."""
    return InventoryUpload.objects.defer("data").select_related("pool", "actor")


@dataclass
class FleetRow:
    """Cards of one (pool, GPU model, driver group, node state) cell of the fleet overview."""

    pool: str
    gpu_model: str
    driver_group: str
    state: str
    cards: int
    healthy: int
    mig_cards: int = 0
    mig_slices: dict[str, int] = field(default_factory=dict)


_FLEET_KEYS = (
    "node__pool__name",
    "gpu_model__name",
    "raw_model_name",
    "node__driver_group__branch",
    "node__state",
)


def _fleet_key(row: dict, prefix: str = "") -> tuple[str, str, str, str]:
    model = row[f"{prefix}gpu_model__name"] or f"? {row[f'{prefix}raw_model_name'] or 'unknown'}"
    branch = row[f"{prefix}node__driver_group__branch"]
    return (
        row[f"{prefix}node__pool__name"] or "(no pool)",
        model,
        f"R{branch}" if branch else "(unknown driver)",
        row[f"{prefix}node__state"],
    )


def fleet_summary() -> list[FleetRow]:
    """Cards grouped by pool × GPU model × driver group × node state, by pool, model and
    driver branch name (none last), from the census (:func:`inventory_census`, kept per
    inventory generation) and the names of pools, models and driver groups: no read of every
    card (at 100,800 cards the grouped read of them took 79 ms of the fleet overview's 125).

    ``healthy`` counts cards whose own health is not ``error`` on nodes that are ``up``;
    ``mig_cards`` the cards in MIG mode (whole cards to nobody) and ``mig_slices`` the MIG
    instances recorded under them, by profile (one query over the MIG instances only).
    Unrecognised models are grouped under their reported name, prefixed ``?``.
    """
    census = inventory_census()
    pools = dict(Pool.objects.values_list("pk", "name"))
    models = dict(GpuModel.objects.values_list("pk", "name"))
    branches = dict(DriverGroup.objects.values_list("pk", "branch"))

    def row_of(group: CardGroup) -> dict:
        return {
            "node__pool__name": pools.get(group.pool_id),
            "gpu_model__name": models.get(group.gpu_model_id),
            "raw_model_name": group.raw_model_name,
            "node__driver_group__branch": branches.get(group.driver_group_id),
            "node__state": group.node_state,
        }

    def order(row: dict) -> tuple:  # as ORDER BY pool name, model name, branch: NULLs last
        return tuple((row[k] is None, row[k] or "") for k in _FLEET_KEYS)

    merged: dict[tuple, FleetRow] = {}
    for group, row in sorted(
        ((g, row_of(g)) for g in census.cards), key=lambda pair: order(pair[1])
    ):
        key = _fleet_key(row)
        merged.setdefault(key, FleetRow(*key, cards=0, healthy=0))
        merged[key].cards += group.cards
        merged[key].healthy += group.cards if group.healthy else 0
        merged[key].mig_cards += group.cards if group.mig else 0
    slices = (
        MigDevice.objects.filter(gpu__mig_mode=True)
        .values(*(f"gpu__{k}" for k in _FLEET_KEYS), "profile")
        .annotate(n=Count("id"))
        .order_by()
    )
    for row in slices:
        found = merged[_fleet_key(row, "gpu__")].mig_slices
        profile = row["profile"] or "unknown profile"
        found[profile] = found.get(profile, 0) + row["n"]
    return list(merged.values())


def fleet_totals() -> dict[str, int]:
    """Headline numbers: nodes, cards, healthy cards, unrecognised cards, pools; from the
    census (:func:`inventory_census`) and the count of pools."""
    census = inventory_census()
    return {
        "nodes": sum(census.count_nodes(lambda g: 0).values()),
        "pools": Pool.objects.count(),
        "cards": sum(census.count_cards(lambda g: 0).values()),
        "healthy": sum(census.count_cards(lambda g: 0, lambda g: g.healthy).values()),
        "unrecognised": sum(
            census.count_cards(lambda g: 0, lambda g: g.gpu_model_id is None).values()
        ),
    }


def pools_supporting_cuda(*, cuda: str) -> list[dict]:
    """Which pools can run CUDA ``cuda`` (``"12.4"``): per pool, cards on capable nodes.

    A node is capable when its driver group's ``max_cuda`` is at least ``cuda`` (tuple compare,
    never float). Returns ``[{pool, capable_cards, other_cards, driver_groups}]`` sorted by pool;
    nodes with an unknown driver count as not capable. Raises ValueError for a bad version.
    """
    wanted = parse_cuda_version(cuda)
    if wanted is None:
        raise ValueError(f"not a CUDA version: {cuda!r}")
    result: dict[str, dict] = {}
    rows = (
        Gpu.objects.values(
            "node__pool__slug",
            "node__pool__name",
            "node__driver_group__branch",
            "node__driver_group__max_cuda",
        )
        .annotate(cards=Count("id"))
        .order_by("node__pool__name")
    )
    for row in rows:
        name = row["node__pool__name"] or "(no pool)"
        entry = result.setdefault(
            name,
            {
                "pool": name,
                "slug": row["node__pool__slug"],
                "capable_cards": 0,
                "other_cards": 0,
                "driver_groups": [],
            },
        )
        supported = parse_cuda_version(row["node__driver_group__max_cuda"] or "")
        capable = supported is not None and supported >= wanted
        entry["capable_cards" if capable else "other_cards"] += row["cards"]
        if row["node__driver_group__branch"]:
            entry["driver_groups"].append(
                {
                    "branch": row["node__driver_group__branch"],
                    "max_cuda": row["node__driver_group__max_cuda"],
                    "supports": capable,
                }
            )
    return sorted(result.values(), key=lambda e: e["pool"])


def cards_per_node_by_model(*, scheduler: str | None = None) -> dict[str, int]:
    """The most cards of each GPU model (by slug) on one node, over nodes in pools run by
    ``scheduler`` (``None``: every node). A tensor-parallel group cannot span nodes."""
    gpus = Gpu.objects.filter(gpu_model__isnull=False)
    if scheduler is not None:
        gpus = gpus.filter(node__pool__scheduler=scheduler)
    rows = gpus.values("node", "gpu_model__slug").annotate(n=Count("id")).order_by()
    most: dict[str, int] = {}
    for row in rows:
        slug = row["gpu_model__slug"]
        most[slug] = max(most.get(slug, 0), row["n"])
    return most


def mig_slices(*, gpus: QuerySet[Gpu] | None = None) -> dict[tuple[int, int], dict[str, int]]:
    """Schedulable MIG slices by ``(pool id, GPU model id)`` and profile, ``{"1g.10gb": 9}``: the
    MIG instances recorded under the cards of ``gpus`` (default: every card) that hold
    schedulable slices (:data:`pools.inventory.models.SLICED_CARD`). Cards in no pool are left
    out. One query."""
    cards = (gpus if gpus is not None else Gpu.objects.all()).sliced()
    rows = (
        MigDevice.objects.filter(gpu__in=cards.filter(node__pool__isnull=False).values("pk"))
        .values_list("gpu__node__pool", "gpu__gpu_model", "profile")
        .annotate(n=Count("id"))
        .order_by("gpu__node__pool", "gpu__gpu_model", "profile")
    )
    slices: dict[tuple[int, int], dict[str, int]] = defaultdict(dict)
    for pool_id, model_id, profile, n in rows:
        slices[(pool_id, model_id)][profile or "unknown profile"] = n
    return dict(slices)


def mig_profiles() -> list[str]:
    """The MIG profiles the inventory holds schedulable slices of, in any pool, sorted
    (``["1g.10gb", "2g.20gb"]``): what a request for slices may name. One query."""
    cards = Gpu.objects.sliced().filter(node__pool__isnull=False)
    rows = MigDevice.objects.filter(gpu__in=cards.values("pk")).exclude(profile="")
    return sorted(set(rows.values_list("profile", flat=True).distinct()))


@dataclass(frozen=True)
class PoolModelCapacity:
    """One pool × GPU model: its cards, the whole ones the capacity invariant counts
    (``whole_cards``), the ones in MIG mode holding schedulable slices (``mig_cards``) and those
    slices by profile (``mig_slices``, ``{"1g.10gb": 9}``)."""

    gpu_model: GpuModel
    cards: int
    whole_cards: int
    mig_cards: int
    mig_slices: dict[str, int]


def pool_capacity(*, pool: Pool) -> list[PoolModelCapacity]:
    """Whole cards and MIG slices apart, per recognised GPU model of ``pool``, by model name.
    Three queries."""
    gpus = Gpu.objects.filter(node__pool=pool, gpu_model__isnull=False)
    counts = (
        gpus.values("gpu_model")
        .annotate(
            cards=Count("id"),
            whole=Count("id", filter=SCHEDULABLE_CARD),
            mig=Count("id", filter=SLICED_CARD),
        )
        .order_by()
    )
    slices = mig_slices(gpus=gpus)
    models = GpuModel.objects.in_bulk([row["gpu_model"] for row in counts])
    rows = [
        PoolModelCapacity(
            gpu_model=models[row["gpu_model"]],
            cards=row["cards"],
            whole_cards=row["whole"],
            mig_cards=row["mig"],
            mig_slices=slices.get((pool.pk, row["gpu_model"]), {}),
        )
        for row in counts
    ]
    return sorted(rows, key=lambda row: row.gpu_model.name)


def pooled_gpu_model_ids() -> set[int]:
    """Ids of the GPU models some pool holds at least one card of (any node of a pool, in any
    state: a drained node's cards are still the pool's). Every team may ask any pool, so these
    are the models a request for cards a pool has can name. One query."""
    return set(
        Gpu.objects.filter(node__pool__isnull=False, gpu_model__isnull=False)
        .values_list("gpu_model_id", flat=True)
        .distinct()
    )


def pool_gpu_models() -> dict[int, list[GpuModel]]:
    """Per pool id, the recognised GPU models it holds at least one card of (any node, any
    state, as :func:`pooled_gpu_model_ids`), by model name: each is a pool × model capacity
    calendar. Two queries, from the census (:func:`inventory_census`; three when the inventory
    changed)."""
    pairs = [
        pair
        for pair in inventory_census().count_cards(lambda g: (g.pool_id, g.gpu_model_id))
        if None not in pair
    ]
    models = GpuModel.objects.in_bulk({model_id for _, model_id in pairs})
    per_pool: dict[int, list[GpuModel]] = defaultdict(list)
    for pool_id, model_id in pairs:
        per_pool[pool_id].append(models[model_id])
    return {pool_id: sorted(ms, key=lambda m: m.name) for pool_id, ms in per_pool.items()}
