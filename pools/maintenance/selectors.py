"""Maintenance windows, the read side (issue 32 item 2): which nodes a scope names, which
approved allocations a window would collide with and what each team would lose, and the inputs
of the upgrade-wave planner (:mod:`pools.maintenance.waves`).

A window takes away the schedulable cards of its nodes (node up, card whole and not in error:
:data:`pools.inventory.models.SCHEDULABLE_CARD`) for ``[starts_at, ends_at)``. An allocation
*collides* when it holds cards in the window and

- it has cards placed on one of the window's nodes (its shape named the node): it loses those
  cards, exactly; or
- it has no placement, in a pool × GPU model where what is held at the peak of the window
  (holding allocations, recurring occurrences, other maintenance windows) exceeds what is left,
  ``floor((schedulable − away) × over-commit ratio)`` (the approval's count): the pool is
  ``shortfall`` cards short, and each such allocation may lose up to
  ``min(its cards, shortfall)`` — the portal cannot say which one Slurm or Kubernetes would
  starve, so every one is listed with that bound.

MIG slices (issue 38) are held apart from whole cards and never placed (constraint
``allocation_slices_unplaced``): an allocation of slices of a profile holds "any N slices of
that profile" of its pool × GPU model. The window takes away the profile's slices on its
nodes' cards in MIG mode (:data:`pools.inventory.models.SLICED_CARD`, the slices
:func:`pools.capacity.availability.pool_slices` counts); a slice allocation collides when the
peak held of its profile in the window (slice allocations, other windows' slices) exceeds
what is left, ``slices − away`` (no over-commit: a slice is a hardware partition, as the slice
approval counts, :func:`pools.capacity.availability.pool_free_slices`). Each such allocation
loses up to ``min(its slices, shortfall)``, exactly that when no slice of the profile is left
(every one it holds is on the window's nodes).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db.models import Count

from pools.capacity.arithmetic import peak_cards
from pools.capacity.availability import holding_intervals, pool_slices, schedulable_cards
from pools.capacity.models import Allocation, PlacedCards
from pools.inventory.models import DriverGroup, Gpu, GpuModel, MigDevice, Node, Pool
from pools.maintenance.models import MaintenanceScope, MaintenanceWindow
from pools.maintenance.waves import KeyCapacity, WaveNode, WavePlan, plan_waves

SliceKey = tuple[int, int, str]  # (pool id, GPU model id, MIG profile)


@dataclass(frozen=True)
class Collision:
    """One approved allocation a window would take cards, or MIG slices of ``profile``, from:
    ``held`` its cards (or slices), ``lost`` those it loses, exact when ``exact``, else an
    upper bound (module docstring)."""

    allocation_id: int
    team_slug: str
    team_name: str
    pool_slug: str
    gpu_model_slug: str
    profile: str  # blank: whole cards
    held: int
    lost: int
    exact: bool
    how: str

    def as_dict(self) -> dict:
        """Cards and slices in fields of their own, never summed together: a slice
        allocation's ``cards`` and ``cards_lost`` are 0, a card allocation's ``slices`` and
        ``slices_lost`` are 0."""
        sliced = bool(self.profile)
        return {
            "allocation": self.allocation_id,
            "team": self.team_slug,
            "team_name": self.team_name,
            "pool": self.pool_slug,
            "gpu_model": self.gpu_model_slug,
            "profile": self.profile,
            "cards": 0 if sliced else self.held,
            "cards_lost": 0 if sliced else self.lost,
            "slices": self.held if sliced else 0,
            "slices_lost": self.lost if sliced else 0,
            "exact": self.exact,
            "how": self.how,
        }


def team_losses(collisions: Iterable[Collision]) -> list[dict]:
    """Whole cards and MIG slices lost per team, most cards first, then by team slug:
    ``[{"team", "team_name", "cards_lost", "slices_lost": [{"profile", "slices_lost"}]}]``,
    the slices by profile name (slices of two profiles are not summed)."""
    cards: dict[tuple[str, str], int] = {}
    slices: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for c in collisions:
        team = (c.team_slug, c.team_name)
        cards[team] = cards.get(team, 0) + (0 if c.profile else c.lost)
        if c.profile:
            slices[team][c.profile] += c.lost
    rows = [
        {
            "team": slug,
            "team_name": name,
            "cards_lost": lost,
            "slices_lost": [
                {"profile": p, "slices_lost": n} for p, n in sorted(slices[(slug, name)].items())
            ],
        }
        for (slug, name), lost in cards.items()
    ]
    return sorted(rows, key=lambda r: (-r["cards_lost"], r["team"]))


def maintenance_window_list(*, user, status: str | None = None):
    """Every window (a maintenance window is pool-wide news, not a team's), newest start
    first, with its pool and driver group; cancelled ones too unless ``status`` says."""
    qs = MaintenanceWindow.objects.select_related("pool", "driver_group").annotate(
        node_count=Count("nodes")
    )
    if status:
        qs = qs.filter(status=status)
    return qs.order_by("-starts_at", "-id") if user.is_authenticated else qs.none()


def scope_nodes(
    *,
    scope: str,
    pool: Pool | None = None,
    driver_group: DriverGroup | None = None,
    hostnames: Sequence[str] = (),
) -> tuple[list[Node], dict[str, str]]:
    """The nodes a scope names, by host name, and field errors (empty when none): ``nodes``
    the listed host names (all must exist; within ``pool`` when given), ``pool`` the pool's
    nodes, ``driver_group`` the group's nodes (within ``pool`` when given)."""
    errors: dict[str, str] = {}
    qs = Node.objects.select_related("pool").order_by("hostname")
    if scope == MaintenanceScope.NODES:
        wanted = sorted(set(hostnames))
        if not wanted:
            return [], {"hostnames": "Name at least one node."}
        qs = qs.filter(hostname__in=wanted)
        if pool is not None:
            qs = qs.filter(pool=pool)
        nodes = list(qs)
        missing = sorted(set(wanted) - {n.hostname for n in nodes})
        if missing:
            where = f" in {pool.name}" if pool is not None else ""
            errors["hostnames"] = f"No such node{where}: {', '.join(missing)}."
        named = Counter(n.hostname for n in nodes)
        shared = sorted(name for name, count in named.items() if count > 1)
        if shared:  # host names are unique per cluster only: the pool says which
            errors["hostnames"] = (
                f"Several clusters have a node named {', '.join(shared)}: choose the pool."
            )
        return nodes, errors
    if scope == MaintenanceScope.POOL:
        if pool is None:
            return [], {"pool": "Choose the pool to take out."}
        nodes = list(qs.filter(pool=pool))
        return nodes, {} if nodes else {"pool": f"{pool.name} has no nodes."}
    if scope == MaintenanceScope.DRIVER_GROUP:
        if driver_group is None:
            return [], {"driver_group": "Choose the driver group to take out."}
        qs = qs.filter(driver_group=driver_group)
        if pool is not None:
            qs = qs.filter(pool=pool)
        nodes = list(qs)
        return nodes, {} if nodes else {"driver_group": f"{driver_group} has no nodes there."}
    return [], {"scope": f"One of {', '.join(MaintenanceScope.values)}."}


def _away_by_key(node_ids: Iterable[int]) -> dict[tuple[int, int], int]:
    rows = (
        Gpu.objects.schedulable()
        .filter(node_id__in=list(node_ids), node__pool__isnull=False)
        .values_list("node__pool", "gpu_model")
        .annotate(n=Count("id"))
        .order_by()
    )
    return {(p, m): n for p, m, n in rows}


def _slices_by_node(node_ids: Iterable[int]) -> list[tuple[int, str, SliceKey, int]]:
    """``(node id, hostname, (pool id, model id, profile), slices)`` of the schedulable MIG
    slices on the nodes' cards in MIG mode (:func:`pools.capacity.availability.pool_slices`'
    slices), by node and key. One query."""
    cards = Gpu.objects.sliced().filter(node_id__in=list(node_ids), node__pool__isnull=False)
    rows = (
        MigDevice.objects.filter(gpu__in=cards.values("pk"))
        .exclude(profile="")
        .values_list(
            "gpu__node", "gpu__node__hostname", "gpu__node__pool", "gpu__gpu_model", "profile"
        )  # fmt: skip
        .annotate(n=Count("id"))
        .order_by("gpu__node__hostname", "gpu__node__pool", "gpu__gpu_model", "profile")
    )
    return [(node, host, (p, m, profile), n) for node, host, p, m, profile, n in rows]


def _capacity(pool: Pool, model: GpuModel, start: datetime, end: datetime) -> KeyCapacity:
    schedulable = schedulable_cards(pool=pool, gpu_model=model)
    intervals = holding_intervals(pool=pool, gpu_model=model, start=start, end=end)
    return KeyCapacity(schedulable, Decimal(pool.overcommit_ratio), intervals)


def _slice_capacity(
    pool: Pool, model: GpuModel, profile: str, start: datetime, end: datetime
) -> KeyCapacity:
    """A pool × model × MIG profile as the planner counts it: its schedulable slices of the
    profile, ratio 1 (no over-commit) and the intervals held in slices. Three queries."""
    slices = pool_slices(pool=pool, gpu_model=model).get(profile, 0)
    intervals = holding_intervals(pool=pool, gpu_model=model, start=start, end=end, profile=profile)
    return KeyCapacity(slices, Decimal(1), intervals)


def maintenance_collisions(
    *, nodes: Sequence[Node], start: datetime, end: datetime
) -> list[Collision]:
    """The approved allocations taking ``nodes`` away over ``[start, end)`` collides with
    (module docstring), whole cards and MIG slices, by allocation id. Planned windows already
    saved count as held."""
    hosts = {n.hostname for n in nodes}
    holding = (
        Allocation.objects.holding().whole_cards().overlapping(start, end).select_related("team")
    )
    placed_lost: dict[int, int] = defaultdict(int)
    placed_hosts: dict[int, set[str]] = defaultdict(set)
    placed_ids: set[int] = set()
    spots = PlacedCards.objects.filter(allocation__in=holding.values("pk"))
    for allocation_id, hostname, mask in spots.values_list("allocation_id", "hostname", "gpu_mask"):
        placed_ids.add(allocation_id)
        if hostname in hosts:
            placed_lost[allocation_id] += mask.bit_count()
            placed_hosts[allocation_id].add(hostname)
    found: dict[int, Collision] = {}
    for allocation in holding.filter(pk__in=list(placed_lost)).select_related("pool", "gpu_model"):
        found[allocation.pk] = _collision(
            allocation,
            placed_lost[allocation.pk],
            True,
            f"cards placed on {', '.join(sorted(placed_hosts[allocation.pk]))}",
        )
    for (pool_id, model_id), away in _away_by_key(n.pk for n in nodes).items():
        pool, model = Pool.objects.get(pk=pool_id), GpuModel.objects.get(pk=model_id)
        cap = _capacity(pool, model, start, end)
        left = math.floor(max(cap.schedulable - away, 0) * cap.ratio)
        shortfall = peak_cards(cap.intervals, start, end) - left
        if shortfall <= 0:
            continue
        unplaced = holding.filter(pool=pool, gpu_model=model).exclude(pk__in=placed_ids)
        for allocation in unplaced.select_related("pool", "gpu_model"):
            found[allocation.pk] = _collision(
                allocation,
                min(allocation.card_count, shortfall),
                False,
                f"{pool.name} would be {shortfall} {model.name} card(s) short at the peak",
            )
    for allocation, lost, exact, how in _slice_collisions(nodes, start, end):
        found[allocation.pk] = _collision(allocation, lost, exact, how)
    return sorted(found.values(), key=lambda c: c.allocation_id)


def _slice_collisions(
    nodes: Sequence[Node], start: datetime, end: datetime
) -> list[tuple[Allocation, int, bool, str]]:
    """``(allocation, slices lost, exact, how)`` of the slice allocations the window takes
    slices from (module docstring): per pool × model × profile on the nodes, the shortfall
    ``peak held − (slices − away)``; each allocation of the key loses up to ``min(its slices,
    shortfall)``, exactly when nothing of the profile is left."""
    away: dict[SliceKey, int] = defaultdict(int)
    away_hosts: dict[SliceKey, list[str]] = defaultdict(list)
    for _, host, key, n in _slices_by_node(node.pk for node in nodes):
        away[key] += n
        away_hosts[key].append(host)
    found = []
    for key in sorted(away):
        pool_id, model_id, profile = key
        pool, model = Pool.objects.get(pk=pool_id), GpuModel.objects.get(pk=model_id)
        cap = _slice_capacity(pool, model, profile, start, end)
        left = max(cap.schedulable - away[key], 0)
        shortfall = peak_cards(cap.intervals, start, end) - left
        if shortfall <= 0:
            continue
        if left:
            how = f"{pool.name} would be {shortfall} {profile} slice(s) short at the peak"
        else:
            hosts = away_hosts[key]
            holds = "holds" if len(hosts) == 1 else "hold"
            every = f"all {cap.schedulable} {profile} slices of {pool.name}"
            how = f"{', '.join(hosts)} {holds} {every}"
        holding = (
            Allocation.objects.holding()
            .slices(profile)
            .overlapping(start, end)
            .filter(pool=pool, gpu_model=model)
            .select_related("team", "pool", "gpu_model")
        )
        found.extend((a, min(a.card_count, shortfall), not left, how) for a in holding)
    return found


def _collision(allocation: Allocation, lost: int, exact: bool, how: str) -> Collision:
    return Collision(
        allocation.pk,
        allocation.team.slug,
        allocation.team.name,
        allocation.pool.slug,
        allocation.gpu_model.slug,
        allocation.mig_profile,
        allocation.card_count,
        lost,
        exact,
        how,
    )


def window_away_cards(window: MaintenanceWindow) -> list[dict]:
    """What ``window`` takes away now, per pool × GPU model: ``[{"pool", "gpu_model", "cards",
    "slices": [{"profile", "slices"}]}]`` — schedulable cards on its nodes, and the MIG slices
    on its nodes' cards in MIG mode by profile (a model with slices only has ``cards`` 0).
    Two queries and the pools' and models'."""
    node_ids = list(window.nodes.values_list("pk", flat=True))
    cards = _away_by_key(node_ids)
    slices: dict[tuple[int, int], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for _, _, (p, m, profile), n in _slices_by_node(node_ids):
        slices[(p, m)][profile] += n
    keys = set(cards) | set(slices)
    pools = Pool.objects.in_bulk({p for p, _ in keys})
    models = GpuModel.objects.in_bulk({m for _, m in keys})
    rows = [
        {
            "pool": pools[p],
            "gpu_model": models[m],
            "cards": cards.get((p, m), 0),
            "slices": [
                {"profile": profile, "slices": n}
                for profile, n in sorted(slices.get((p, m), {}).items())
            ],
        }
        for p, m in keys
    ]
    return sorted(rows, key=lambda r: (r["pool"].name, r["gpu_model"].name))


@dataclass(frozen=True)
class WaveAsk:
    """An upgrade plan asked for: the driver group's nodes (within ``pool`` when given), waves
    of ``length`` every ``length + gap`` from ``first_start``, at most ``per_wave`` nodes each,
    tried over at most ``max_slots`` slots."""

    driver_group: DriverGroup
    pool: Pool | None
    first_start: datetime
    length: timedelta
    gap: timedelta
    per_wave: int
    max_slots: int


def maintenance_wave_plan(ask: WaveAsk) -> tuple[WavePlan, list[Node]]:
    """The greedy plan (:func:`pools.maintenance.waves.plan_waves`) over the database's
    nodes, placed cards and holds, and the nodes planned over. A node's keys are the pool ×
    model of its schedulable cards (``(pool id, model id)``, counted in cards at the pool's
    over-commit) and the pool × model × profile of its MIG slices (:data:`SliceKey`, counted in
    slices at ratio 1): slices are never placed, so a node whose slices an approved allocation
    needs is kept out by the count (module docstring), for the whole of that allocation when
    its slices are all on the node."""
    nodes, _ = scope_nodes(
        scope=MaintenanceScope.DRIVER_GROUP, pool=ask.pool, driver_group=ask.driver_group
    )
    end = ask.first_start + ask.max_slots * (ask.length + ask.gap)
    hosts = {n.hostname for n in nodes}
    holding = Allocation.objects.holding().whole_cards().overlapping(ask.first_start, end)
    placed = [
        (hostname, s, e)
        for hostname, s, e in PlacedCards.objects.filter(
            allocation__in=holding.values("pk"), hostname__in=hosts
        ).values_list("hostname", "allocation__starts_at", "allocation__ends_at")
    ]
    cards: dict[int, dict] = defaultdict(dict)
    rows = (
        Gpu.objects.schedulable()
        .filter(node__in=nodes, node__pool__isnull=False)
        .values_list("node", "node__pool", "gpu_model")
        .annotate(n=Count("id"))
        .order_by()
    )
    for node_id, pool_id, model_id, n in rows:
        cards[node_id][(pool_id, model_id)] = n
    for node_id, _, key, n in _slices_by_node(node.pk for node in nodes):
        cards[node_id][key] = n
    keys = {key for per in cards.values() for key in per}
    pools = Pool.objects.in_bulk({key[0] for key in keys})
    models = GpuModel.objects.in_bulk({key[1] for key in keys})
    capacity = {
        key: (
            _slice_capacity(pools[key[0]], models[key[1]], key[2], ask.first_start, end)
            if len(key) == 3
            else _capacity(pools[key[0]], models[key[1]], ask.first_start, end)
        )
        for key in sorted(keys)
    }
    plan = plan_waves(
        nodes=[WaveNode(n.hostname, cards.get(n.pk, {})) for n in nodes],
        placed=placed,
        capacity=capacity,
        first_start=ask.first_start,
        length=ask.length,
        gap=ask.gap,
        per_wave=ask.per_wave,
        max_slots=ask.max_slots,
    )
    return plan, nodes
