"""Maintenance windows, the read side (issue 32 item 2): which nodes a scope names, which
approved allocations a window would collide with and what each team would lose, and the inputs
of the upgrade-wave planner (:mod:`pools.capacity.maintenance_waves`).

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
from pools.capacity.availability import holding_intervals, schedulable_cards
from pools.capacity.maintenance_waves import KeyCapacity, WaveNode, WavePlan, plan_waves
from pools.capacity.models import Allocation, MaintenanceScope, MaintenanceWindow, PlacedCards
from pools.inventory.models import DriverGroup, Gpu, GpuModel, Node, Pool


@dataclass(frozen=True)
class Collision:
    """One approved allocation a window would take cards from; ``lost`` exact when
    ``placed``, else an upper bound (module docstring)."""

    allocation_id: int
    team_slug: str
    team_name: str
    pool_slug: str
    gpu_model_slug: str
    cards: int
    lost: int
    placed: bool
    how: str

    def as_dict(self) -> dict:
        return {
            "allocation": self.allocation_id,
            "team": self.team_slug,
            "team_name": self.team_name,
            "pool": self.pool_slug,
            "gpu_model": self.gpu_model_slug,
            "cards": self.cards,
            "cards_lost": self.lost,
            "exact": self.placed,
            "how": self.how,
        }


def team_losses(collisions: Iterable[Collision]) -> list[dict]:
    """Cards lost per team, most first: ``[{"team", "team_name", "cards_lost"}]``."""
    lost: dict[tuple[str, str], int] = defaultdict(int)
    for c in collisions:
        lost[(c.team_slug, c.team_name)] += c.lost
    rows = [{"team": s, "team_name": n, "cards_lost": v} for (s, n), v in lost.items()]
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


def _capacity(pool: Pool, model: GpuModel, start: datetime, end: datetime) -> KeyCapacity:
    schedulable = schedulable_cards(pool=pool, gpu_model=model)
    intervals = holding_intervals(pool=pool, gpu_model=model, start=start, end=end)
    return KeyCapacity(schedulable, Decimal(pool.overcommit_ratio), intervals)


def maintenance_collisions(
    *, nodes: Sequence[Node], start: datetime, end: datetime
) -> list[Collision]:
    """The approved allocations taking ``nodes`` away over ``[start, end)`` collides with
    (module docstring), by allocation id. Planned windows already saved count as held."""
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
    return sorted(found.values(), key=lambda c: c.allocation_id)


def _collision(allocation: Allocation, lost: int, placed: bool, how: str) -> Collision:
    return Collision(
        allocation.pk,
        allocation.team.slug,
        allocation.team.name,
        allocation.pool.slug,
        allocation.gpu_model.slug,
        allocation.card_count,
        lost,
        placed,
        how,
    )


def window_away_cards(window: MaintenanceWindow) -> list[dict]:
    """What ``window`` takes away now, per pool × GPU model: ``[{"pool", "gpu_model",
    "cards"}]`` (schedulable cards on its nodes)."""
    away = _away_by_key(window.nodes.values_list("pk", flat=True))
    pools = Pool.objects.in_bulk({p for p, _ in away})
    models = GpuModel.objects.in_bulk({m for _, m in away})
    rows = [{"pool": pools[p], "gpu_model": models[m], "cards": n} for (p, m), n in away.items()]
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
    """The greedy plan (:func:`pools.capacity.maintenance_waves.plan_waves`) over the database's
    nodes, placed cards and holds, and the nodes planned over."""
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
    keys = {key for per in cards.values() for key in per}
    pools = Pool.objects.in_bulk({p for p, _ in keys})
    models = GpuModel.objects.in_bulk({m for _, m in keys})
    capacity = {
        (p, m): _capacity(pools[p], models[m], ask.first_start, end) for p, m in sorted(keys)
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
