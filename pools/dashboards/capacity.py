"""Read side of the capacity dashboards: where the cards are, who holds them, what is asked for.

Every function here runs a fixed number of SQL queries whatever the size of the fleet: rows are
grouped in the database, or fetched once and grouped in Python. Costs come from billing, which
builds on this app, so they are read by ``billing.dashboards.costs``, never from here.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from django.db.models import (
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    Q,
    Sum,
    Window,
)
from django.db.models.functions import Coalesce
from django.utils import timezone

from pools.capacity.arithmetic import usable_cards
from pools.capacity.availability import (
    MAINTENANCE_AWAY,
    RECURRING_HELD,
    blocked_cards_at,
    blocked_intervals,
    peaks_by_pool_model,
)
from pools.capacity.models import (
    Allocation,
    CapacityRequest,
    SchedulerDrift,
    holding_q,
    overlap_q,
)
from pools.capacity.overcommit import Overcommit, overcommitted_windows
from pools.capacity.selectors import InstantsBefore, timeline_peaks, unrepaired_drifts
from pools.common.choices import NodeState, RequestStatus
from pools.dashboards.demand_history import HOUR, floor_hour, hourly_demand
from pools.inventory.models import (
    DriverGroup,
    Gpu,
    GpuModel,
    Node,
    Pool,
)
from pools.inventory.selectors import inventory_census, mig_slices, unrecognised_model_list
from pools.reclamation.evaluate import IDLE_BELOW_PCT
from pools.reclamation.models import IdleFinding

WEEKS_AHEAD = 8
FORECAST_DAYS = 90
# Seed 004: "let the pool carry 85 % of the peak" and "keep a 30 % buffer for bursts".
PEAK_SHARE = 0.85
BUFFER_SHARE = 0.30
# Requests that express demand: drafts were never sent and cancelled ones were withdrawn;
# accepted requests for capacity to add are demand the pools are to grow for.
DEMAND_STATUSES = (
    RequestStatus.SUBMITTED,
    RequestStatus.APPROVED,
    RequestStatus.ACCEPTED,
    RequestStatus.REJECTED,
)


@dataclass(frozen=True)
class DashboardFilters:
    """Slugs (pool, model, team) and a driver branch; ``None`` means "all"."""

    pool: str | None = None
    gpu_model: str | None = None
    driver_branch: int | None = None
    team: str | None = None


@dataclass(frozen=True)
class Names:
    """Every pool's ``(slug, name, over-commit ratio)`` and every GPU model's ``(slug, name)``
    by id (:func:`pool_model_names`), read once for the admin dashboard's plan, capacity table
    and forecast, which each read them alone (two queries each) when not handed them."""

    pools: dict[int, tuple[str, str, Decimal]]
    models: dict[int, tuple[str, str]]


def pool_model_names() -> Names:
    """:class:`Names` now. Two queries, a row per pool and per GPU model (tens, whatever the
    number of cards)."""
    pools = Pool.objects.values_list("pk", "slug", "name", "overcommit_ratio")
    models = GpuModel.objects.values_list("pk", "slug", "name")
    return Names(
        {pk: (slug, name, ratio) for pk, slug, name, ratio in pools},
        {pk: (slug, name) for pk, slug, name in models},
    )


@dataclass
class CardsInUse:
    """Cards busy now by dcgm-exporter utilisation (see :mod:`pools.dashboards.utilisation`):
    ``busy`` of the ``reporting`` cards (those with a reading) are at or above their pool's busy
    threshold, of ``total`` cards. ``reporting == 0`` means "unknown", never "none in use"."""

    busy: int = 0
    reporting: int = 0
    total: int = 0
    busy_pct: float = float(IDLE_BELOW_PCT)  # the pool's threshold, %

    @property
    def unknown(self) -> int:
        """Cards without a reading."""
        return self.total - self.reporting


@dataclass
class DriverGroupRow:
    driver_group: str
    total: int = 0
    healthy: int = 0
    schedulable: int = 0
    mig_cards: int = 0
    in_use: CardsInUse | None = None


@dataclass
class CapacityRow:
    """One pool × GPU model: its cards by driver group and what allocations hold now.

    ``usable`` is schedulable × the pool's over-commit ratio (floored); ``free`` is usable minus
    ``allocated`` and minus ``blocked_now``, the cards recurring reservations hold and planned
    maintenance windows take away now (as the approval counts them). Allocations name a pool
    and a model, not a driver group, so held cards are known per pool × model only (``None``
    on driver-group lines). ``in_use`` is ``None`` until metrics
    are read (:func:`pools.dashboards.utilisation.utilisation_now`), and stays so without them.
    """

    pool_slug: str
    pool: str
    gpu_model_slug: str
    gpu_model: str
    recognised: bool
    overcommit_ratio: Decimal = Decimal(1)
    groups: list[DriverGroupRow] = field(default_factory=list)
    allocated: int = 0
    idle_allocated: int | None = None
    peak_held: int = 0
    peak_pending: int = 0
    blocked_now: int = 0
    in_use: CardsInUse | None = None
    mig_slices: dict[str, int] = field(default_factory=dict)  # schedulable slices by profile

    @property
    def total(self) -> int:
        return sum(g.total for g in self.groups)

    @property
    def mig_cards(self) -> int:
        """Cards in MIG mode holding schedulable slices: not whole cards, not in ``usable``."""
        return sum(g.mig_cards for g in self.groups)

    @property
    def healthy(self) -> int:
        return sum(g.healthy for g in self.groups)

    @property
    def schedulable(self) -> int:
        return sum(g.schedulable for g in self.groups)

    @property
    def usable(self) -> int:
        return usable_cards(self.schedulable, self.overcommit_ratio)

    @property
    def free(self) -> int:
        return max(0, self.usable - self.allocated - self.blocked_now)

    @property
    def headroom(self) -> Headroom:
        return headroom_flag(usable=self.usable, held=self.peak_held, pending=self.peak_pending)


@dataclass(frozen=True)
class Headroom:
    level: str  # "short", "thin", "ok", "idle" (no demand)
    text: str
    summary: str = ""  # the numbers only, for a narrow table cell; ``text`` explains them


def headroom_flag(*, usable: int, held: int, pending: int) -> Headroom:
    """Compare the 8-week peak of held + pending cards with the usable cards (seed 004 rules).

    short: usable < 85 % of the peak (the seed sizes a pool for 85 % of its peak, the rest
    queued); thin: the pool carries the peak but keeps less than the 30 % buffer the seed advises
    for bursts; ok otherwise.
    """
    peak = held + pending
    if peak == 0:
        return Headroom(
            "idle",
            f"No cards held or asked for in the next {WEEKS_AHEAD} weeks.",
            "no demand",
        )
    demand = f"peak {peak} cards ({held} held + {pending} pending) against {usable} usable"
    if usable < PEAK_SHARE * peak:
        return Headroom(
            "short",
            f"Short: {demand}; the pool covers {usable / peak:.0%} of its peak, under the 85 % "
            "the seed sizes a pool for.",
            f"peak {peak} / {usable} usable, covers {usable / peak:.0%}",
        )
    buffer = (usable - peak) / usable if usable else 0.0
    if buffer < BUFFER_SHARE:
        return Headroom(
            "thin",
            f"Thin buffer: {demand}; {max(buffer, 0):.0%} spare, under the 30 % the seed keeps "
            "for bursts.",
            f"peak {peak} / {usable} usable, {max(buffer, 0):.0%} spare",
        )
    return Headroom(
        "ok",
        f"OK: {demand}; {buffer:.0%} spare (30 % advised).",
        f"peak {peak} / {usable} usable, {buffer:.0%} spare",
    )


def model_label(row: dict) -> tuple[str, str, bool]:
    """(slug, name, recognised) of a card row's model (``gpu_model__slug``, ``gpu_model__name``,
    ``raw_model_name``): an unrecognised name is keyed ``?<raw name>``, as the capacity rows are."""
    if row["gpu_model__slug"]:
        return row["gpu_model__slug"], row["gpu_model__name"], True
    raw = row["raw_model_name"] or "unknown"
    return f"?{raw}", f"? {raw}", False


def driver_group_label(branch: int | None) -> str:
    """The driver-group line's name: ``R550``, or ``(unknown driver)`` without a branch."""
    return f"R{branch}" if branch else "(unknown driver)"


def pooled_gpus(filters: DashboardFilters):
    """Cards on nodes of a pool, narrowed to the filters' pool, model and driver branch (the team
    filter narrows allocations, not cards). A queryset: callers choose the columns."""
    gpus = Gpu.objects.filter(node__pool__isnull=False)
    if filters.pool:
        gpus = gpus.filter(node__pool__slug=filters.pool)
    if filters.gpu_model:
        gpus = gpus.filter(gpu_model__slug=filters.gpu_model)
    if filters.driver_branch:
        gpus = gpus.filter(node__driver_group__branch=filters.driver_branch)
    return gpus


def _inventory_counts(filters: DashboardFilters, pools: dict, models: dict, branches: dict):
    """Cards in pools by (pool id, model id, raw name, driver group id): ``[total, healthy,
    schedulable, sliced]``, narrowed to the filters as :func:`pooled_gpus` narrows, from the
    census kept per inventory generation (:func:`pools.inventory.selectors.inventory_census`:
    no card read unless the inventory changed). ``pools``, ``models``, ``branches``: the slugs
    (first item) and branches by id."""

    def kept(g) -> bool:
        return (
            g.pool_id is not None
            and (not filters.pool or pools[g.pool_id][0] == filters.pool)
            and (not filters.gpu_model or models.get(g.gpu_model_id, ("",))[0] == filters.gpu_model)
            and (
                not filters.driver_branch
                or branches.get(g.driver_group_id) == filters.driver_branch
            )
        )

    inventory: dict[tuple, list[int]] = {}
    for g in inventory_census().cards:
        if kept(g):
            counts = inventory.setdefault(
                (g.pool_id, g.gpu_model_id, g.raw_model_name, g.driver_group_id), [0, 0, 0, 0]
            )
            counts[0] += g.cards
            counts[1] += g.cards if g.healthy else 0
            counts[2] += g.cards if g.schedulable else 0
            counts[3] += g.cards if g.sliced else 0
    return inventory


def capacity_rows(
    *,
    filters: DashboardFilters,
    now: datetime,
    plan: dict[tuple, PlanSeries] | None = None,
    names: Names | None = None,
) -> list[CapacityRow]:
    """Per pool × model: cards by driver group (total, healthy, schedulable), allocated now and
    the 8-week peaks of held and pending cards.

    healthy: card health not ``error`` on an ``up`` node (as the fleet overview counts);
    schedulable: what approvals count before CUDA checks
    (:data:`pools.inventory.models.SCHEDULABLE_CARD`: healthy, recognised, not in MIG mode);
    mig_cards and mig_slices: the cards in MIG mode holding schedulable slices and those slices
    by profile (:data:`pools.inventory.models.SLICED_CARD`), shown apart from whole cards.
    Six queries (the inventory generation, and the census when it changed; their MIG slices;
    the names of pools, models and driver groups; the idle findings), two fewer with ``names``
    (:func:`pool_model_names`), and :func:`allocation_plan`'s without ``plan``.
    """
    names = names or pool_model_names()
    pools, models = names.pools, names.models
    branches = dict(DriverGroup.objects.values_list("pk", "branch"))

    inventory = _inventory_counts(filters, pools, models, branches)
    rows: dict[tuple[str, str], CapacityRow] = {}
    slices = mig_slices(gpus=pooled_gpus(filters))
    for (pool_id, model_id, raw, group_id), counts in inventory.items():
        total, healthy_cards, schedulable, mig = counts
        pool_slug, pool_name, ratio = pools[pool_id]
        model_slug, model_name = models.get(model_id, (None, None))
        slug, name, recognised = model_label(
            {"gpu_model__slug": model_slug, "gpu_model__name": model_name, "raw_model_name": raw}
        )
        key = (pool_slug, slug)
        row = rows.get(key)
        if row is None:
            row = rows[key] = CapacityRow(
                pool_slug=pool_slug,
                pool=pool_name,
                gpu_model_slug=slug,
                gpu_model=name,
                recognised=recognised,
                overcommit_ratio=ratio,
                mig_slices=slices.get((pool_id, model_id), {}),
            )
        label = driver_group_label(branches.get(group_id))
        group = next((g for g in row.groups if g.driver_group == label), None)
        if group is None:
            group = DriverGroupRow(label)
            row.groups.append(group)
        group.total += total
        group.healthy += healthy_cards
        group.schedulable += schedulable
        group.mig_cards += mig
    for row in rows.values():
        row.groups.sort(key=lambda g: g.driver_group)

    if plan is None:
        plan = allocation_plan(filters=filters, now=now, names=names)
    for (pool_slug, model_slug), series in plan.items():
        row = rows.get((pool_slug, model_slug))
        if row is None:  # held or asked for, but no inventory matches the filters
            if filters.driver_branch:
                continue
            row = rows[(pool_slug, model_slug)] = CapacityRow(
                pool_slug=pool_slug,
                pool=series.pool,
                gpu_model_slug=model_slug,
                gpu_model=series.gpu_model,
                recognised=True,
            )
        row.allocated = series.held_now
        row.blocked_now = series.blocked_now
        row.peak_held = max(series.held, default=0)
        row.peak_pending = (
            max((h + p for h, p in zip(series.held, series.pending, strict=True)), default=0)
            - row.peak_held
        )
        row.peak_pending = max(row.peak_pending, 0)
    idle = idle_allocated_cards(team=filters.team)
    for key, row in rows.items():
        row.idle_allocated = idle.get(key, 0)
    return sorted(rows.values(), key=lambda r: (r.pool, not r.recognised, r.gpu_model))


def idle_allocated_cards(*, team: str | None = None) -> dict[tuple[str, str], int]:
    """Cards of holding allocations that the idle scan found idle and has not closed: per
    (pool slug, model slug), ``card_count − cards_in_use`` of open findings, of one team's
    allocations when ``team`` (a slug) is given. One query."""
    findings = IdleFinding.objects.filter(holding_q(via="allocation"), state="open")
    if team:
        findings = findings.filter(allocation__team__slug=team)
    rows = (
        findings.values("allocation__pool__slug", "allocation__gpu_model__slug")
        .annotate(idle=Sum(F("card_count") - F("cards_in_use")))
        .order_by()
    )
    return {
        (r["allocation__pool__slug"], r["allocation__gpu_model__slug"]): max(r["idle"] or 0, 0)
        for r in rows
    }


@dataclass
class PlanSeries:
    """One pool × model over the next 8 weeks, a day a list item (the local days of
    :func:`plan_days`): ``held``, the most cards held at any instant of the day -- by holding
    whole-card allocations, occurrences of recurring reservations and planned maintenance
    windows, as the approval and the timeline count them -- and ``held_at`` the first instant
    they are (the day's start when none is held); ``recurring`` and ``maintenance``, of those
    ``held``, the cards recurring reservations hold and maintenance windows take away at
    ``held_at`` (the rest are allocations'); ``pending`` and ``pending_at`` the same of the
    submitted requests, at their own busiest instant; ``held_now`` the cards allocations hold
    at the dashboard's ``now`` and ``blocked_now`` those reservations and maintenance hold
    then; ``unplaced_pending`` the cards of submitted requests that name no pool or model
    (only on the key ``("", "")``)."""

    pool: str
    gpu_model: str
    held: list[int]
    pending: list[int]
    held_at: list[datetime] = field(default_factory=list)
    pending_at: list[datetime] = field(default_factory=list)
    held_now: int = 0
    unplaced_pending: int = 0
    recurring: list[int] = field(default_factory=list)
    maintenance: list[int] = field(default_factory=list)
    blocked_now: int = 0

    @property
    def allocated(self) -> list[int]:
        """Cards of allocations at each day's ``held_at``: ``held`` less reservations and
        maintenance."""
        return [h - r - m for h, r, m in zip(self.held, self.recurring, self.maintenance,
                                             strict=True)]  # fmt: skip


def _filtered(qs, filters: DashboardFilters):
    """Allocations or requests narrowed to the filters' pool, model and team."""
    if filters.pool:
        qs = qs.filter(pool__slug=filters.pool)
    if filters.gpu_model:
        qs = qs.filter(gpu_model__slug=filters.gpu_model)
    if filters.team:
        qs = qs.filter(team__slug=filters.team)
    return qs


def plan_days(now: datetime) -> list[datetime]:
    """The plan's 56 days (:data:`WEEKS_AHEAD` weeks): the local midnight of ``now``'s day in
    the portal's zone (``TIME_ZONE``: the portal has no zone per user) and the 55 after it,
    each a calendar day later (23 or 25 hours over a change of summer time): the days of
    ``/timeline/``."""
    start = timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0)
    return [start + timedelta(days=i) for i in range(WEEKS_AHEAD * 7)]


def _plan_blocked(
    *, filters: DashboardFilters, bounds: list[datetime], names: Names
) -> dict[tuple[int, int], dict[str, list]]:
    """What the plan counts besides allocations over ``[bounds[0], bounds[-1])``:
    :func:`pools.capacity.availability.blocked_intervals` (recurring reservations'
    occurrences and planned maintenance windows, by pool id × model id and kind), narrowed to
    the filters' pool and model and, with a team, to that team's reservations alone (no
    maintenance: a window is no team's). Two queries (one with a team)."""
    spans = blocked_intervals(start=bounds[0], end=bounds[-1], team=filters.team or None)

    def kept(pool_id: int, model_id: int) -> bool:
        pool = names.pools.get(pool_id, ("",))[0]
        model = names.models.get(model_id, ("",))[0]
        return filters.pool in (None, "", pool) and filters.gpu_model in (None, "", model)

    return {key: kinds for key, kinds in spans.items() if kept(*key)}


def _held_peaks(
    *, filters: DashboardFilters, bounds: list[datetime], blocked: dict
) -> dict[tuple, list[tuple[int, datetime]]]:
    """Per (pool id, model id), for each day ``[bounds[i], bounds[i + 1])``: the most cards
    held at any instant of it and the first instant they are, by the whole-card allocations
    that held cards in the 8 weeks (:meth:`pools.capacity.models.AllocationQuerySet.
    held_during`: one ended or reclaimed today counts its hours before its end) narrowed by
    the filters' pool, model and team and by ``blocked``
    (:func:`_plan_blocked`): :func:`pools.capacity.selectors.timeline_peaks`, the timeline's
    own sweep and cache (unfiltered, the very entry ``/timeline/`` reads), so an allocation of
    a few hours counts on its day and two that never hold cards at the same instant are not
    added, and the days before a reclamation changed an allocation's cards count the cards it
    held then (:func:`pools.capacity.selectors.peaks_as_held`). Two queries (the allocations'
    intervals over the 8 weeks, swept in Python, and those a reclamation changed today; two
    more when there are any) when the cache has them not. Only the pairs holding cards in the
    8 weeks."""
    if not (filters.pool or filters.gpu_model or filters.team):
        return timeline_peaks(bounds=bounds, blocked=blocked)
    # whole cards only: a MIG slice is not a card of the plan (issue 38)
    rows = _filtered(Allocation.objects.held_during(bounds[0], bounds[-1]).whole_cards(), filters)
    scope = f"plan:{filters.pool or ''}:{filters.gpu_model or ''}:{filters.team or ''}"
    return timeline_peaks(bounds=bounds, blocked=blocked, rows=rows, scope=scope)


def _blocked_split(
    plan: dict[tuple, PlanSeries], keys: dict[tuple[int, int], tuple], blocked: dict,
    bounds: list[datetime], now: datetime,
) -> None:  # fmt: skip
    """Fill each series' ``recurring``, ``maintenance`` (at its days' ``held_at``) and
    ``blocked_now`` from ``blocked`` (:func:`pools.capacity.availability.blocked_cards_at`,
    no query); ``keys``: (pool id, model id) -> the plan's key."""
    start, end = bounds[0], bounds[-1]
    for pair, kinds in blocked.items():
        series = plan.get(keys.get(pair, ()))
        if series is None:
            continue
        one = {pair: kinds}
        found = blocked_cards_at(start=start, end=end, instants=series.held_at, intervals=one).get(
            pair, {}
        )
        series.recurring = found.get(RECURRING_HELD, series.recurring)
        series.maintenance = found.get(MAINTENANCE_AWAY, series.maintenance)
        if start <= now < end:
            at_now = blocked_cards_at(start=start, end=end, instants=[now], intervals=one)
            series.blocked_now = sum(cards[0] for cards in at_now.get(pair, {}).values())


def allocation_plan(
    *, filters: DashboardFilters, now: datetime, names: Names | None = None
) -> dict[tuple, PlanSeries]:
    """Per (pool slug, model slug): on each of the next 56 local days (:func:`plan_days`, the
    timeline's) the most cards held at any instant of the day -- by allocations (one ended or
    reclaimed today until its end), by the occurrences of recurring reservations and by planned
    maintenance windows, the timeline's count (:func:`_held_peaks`) -- with the reservations' and
    maintenance's share of them at that instant, and, apart, the most cards of submitted
    requests asked for at any instant of it (each at its own busiest instant: a request from
    13:00 to 23:00 counts; two that never overlap are not added), and the cards allocations
    and reservations or maintenance hold at ``now``. Nine queries: the pools' and models'
    slugs and names (:func:`pool_model_names`; none when handed ``names``: grouping 37,000
    allocations by four joined names cost more than the two small reads), the reservations
    and maintenance windows of the 8 weeks (:func:`_plan_blocked`), the held cards' peaks
    (:func:`_held_peaks`, kept per allocations' generation: when the cache has them not, one
    query and one for the allocations a reclamation changed today, two more when there are any:
    the days before are counted with the cards they held then), those held now (the few
    thousand started, from the index ``allocation_holding_started`` alone), the submitted
    requests' windows that name their pool and model (swept as the allocations are,
    :func:`pools.capacity.availability.peaks_by_pool_model`) and the sum of those that do not.

    The held and pending peaks of a day may fall at different instants, so ``held + pending``
    of a day is at most (never under) the most cards held at once were every request approved.
    A submitted request that names no pool or no model cannot be placed on one chart; it is
    counted in ``unplaced_pending`` of the key ``("", "")``.
    """
    days = plan_days(now)
    bounds = [*days, days[-1] + timedelta(days=1)]
    names = names or pool_model_names()
    blocked = _plan_blocked(filters=filters, bounds=bounds, names=names)
    requests = _filtered(
        CapacityRequest.objects.filter(status=RequestStatus.SUBMITTED, mig_profile=""), filters
    )
    held_peaks = _held_peaks(filters=filters, bounds=bounds, blocked=blocked)
    held_now = (
        _filtered(Allocation.objects.holding().whole_cards().at(now), filters)
        .values_list("pool", "gpu_model")
        .annotate(cards=Sum("card_count"))
        .order_by()
    )
    placed = requests.filter(pool__isnull=False, gpu_model__isnull=False)
    pending_peaks = peaks_by_pool_model(bounds=bounds, blocked={}, rows=placed)
    unplaced = (
        requests.filter(overlap_q(bounds[0], bounds[-1]))
        .filter(Q(pool__isnull=True) | Q(gpu_model__isnull=True))
        .aggregate(cards=Sum("card_count"))["cards"]
    )
    plan: dict[tuple, PlanSeries] = {}
    keys: dict[tuple[int, int], tuple[str, str]] = {}

    def empty(pool: str, gpu_model: str) -> PlanSeries:
        zeros = [0] * len(days)
        return PlanSeries(pool, gpu_model, list(zeros), list(zeros), list(days), list(days),
                          recurring=list(zeros), maintenance=list(zeros))  # fmt: skip

    def series(pool_id, model_id) -> PlanSeries:
        (pool_slug, pool_name, _ratio), (model_slug, model_name) = (
            names.pools[pool_id],
            names.models[model_id],
        )
        key = keys[(pool_id, model_id)] = (pool_slug, model_slug)
        if key not in plan:
            plan[key] = empty(pool_name, model_name)
        return plan[key]

    for (pool_id, model_id), per_day in held_peaks.items():
        s = series(pool_id, model_id)
        s.held, s.held_at = [n for n, _ in per_day], [at for _, at in per_day]
    for pool_id, model_id, cards in held_now:
        series(pool_id, model_id).held_now += cards
    for (pool_id, model_id), per_day in pending_peaks.items():
        s = series(pool_id, model_id)
        s.pending, s.pending_at = [n for n, _ in per_day], [at for _, at in per_day]
    _blocked_split(plan, keys, blocked, bounds, now)
    if unplaced:
        plan.setdefault(("", ""), empty("", "")).unplaced_pending += unplaced
    return plan


def top_teams_by_cards(*, filters: DashboardFilters, now: datetime, limit: int = 10) -> list:
    """Teams by cards of holding allocations at ``now``, most first: ``[{team, slug, cards}]``;
    an elastic allocation counts the cards it holds now (its floor and what it borrowed)."""
    qs = _filtered(
        Allocation.objects.holding().whole_cards().at(now),
        filters,
    )
    rows = (
        qs.values("team__slug", "team__name")
        .annotate(cards=Sum(Coalesce("elastic_policy__cards_held", "card_count")))
        .order_by("-cards", "team__name")[:limit]
    )
    return [{"team": r["team__name"], "slug": r["team__slug"], "cards": r["cards"]} for r in rows]


@dataclass(frozen=True)
class Forecast:
    """Least-squares trend of weekly requested card-days and when it reaches capacity."""

    pool_slug: str
    pool: str
    gpu_model_slug: str
    gpu_model: str
    weekly: list[float]  # card-days requested in each of the last 13 weeks, oldest first
    slope: float  # card-days per week, per week
    capacity: float  # usable cards × 7 card-days per week
    runs_out: datetime | None
    text: str


def _least_squares(ys: list[float]) -> tuple[float, float]:
    """Intercept and slope of the line through ``(i, ys[i])`` minimising squared error
    (``statistics.linear_regression``); a flat line through the one value when there is one."""
    if len(ys) < 2:
        return (ys[0] if ys else 0.0), 0.0
    slope, intercept = statistics.linear_regression(range(len(ys)), ys)
    return intercept, slope


def demand_forecasts(
    *,
    filters: DashboardFilters,
    now: datetime,
    usable: dict[tuple[str, str], int],
    names: Names | None = None,
) -> list[Forecast]:
    """When each pool × model runs out at the trend of the last 90 days of requests. Four
    queries (sums per week in the database, of the requests that name their pool and model and
    of the rest, then the pools' and models' names: :func:`pool_model_names`, none when handed
    ``names``). Without a team filter the first sums only
    the requests submitted in the 13 hours the week starts fall in; the other hours come from
    the cache (:func:`pools.dashboards.demand_history.hourly_demand`: one query more when it has
    none, and one for each of the pool and model filters' ids).

    Method: take the requests submitted in the last 13 whole weeks (91 days, ending now) that were
    sent (submitted, approved or rejected; a request naming no pool or model counts for the pool
    and model of its allocation, if any). Sum each week's requested card-days (cards × window
    length in days) by week of submission. Fit a straight line by least squares through the 13
    weekly sums. Capacity is usable cards × 7 card-days a week. If the line already meets capacity
    this week, the pool × model is out now; if it rises, it runs out where the line crosses
    capacity; if it is flat or falling, it does not run out at this trend.
    """
    weeks = math.ceil(FORECAST_DAYS / 7)
    since = now - timedelta(weeks=weeks)
    qs = CapacityRequest.objects.filter(status__in=DEMAND_STATUSES, submitted_at__gte=since)
    if filters.team:
        qs = qs.filter(team__slug=filters.team)
    # Grouped by ids, the names read once afterwards. Two halves: the requests
    # that name their pool and model (nearly all) read only their own row; the rest join their
    # allocation (a join or a correlated subquery over all of them cost twice as long).
    named = qs.filter(pool__isnull=False, gpu_model__isnull=False).annotate(
        p_id=F("pool_id"), m_id=F("gpu_model_id")
    )
    unnamed = qs.filter(Q(pool__isnull=True) | Q(gpu_model__isnull=True)).annotate(
        p_id=Coalesce("pool_id", "allocation__pool_id"),
        m_id=Coalesce("gpu_model_id", "allocation__gpu_model_id"),
    )
    # Window lengths summed per week of submission (0 to weeks − 1: how many week starts after
    # the first lie at or before it; the last week runs on past now) and card count; times
    # cards here, as exact intervals, and divided into card-days once.
    length = ExpressionWrapper(F("ends_at") - F("starts_at"), output_field=DurationField())
    starts = [since + i * timedelta(weeks=1) for i in range(1, weeks)]
    totals: dict[tuple, list[timedelta]] = {}
    live_named = named
    if not filters.team:
        totals, live = _cached_weeks(filters=filters, now=now, since=since, starts=starts)
        live_named = named.filter(live)
    halves = []
    for half in (live_named, unnamed):
        if filters.pool:
            half = half.filter(p_id__in=Pool.objects.filter(slug=filters.pool).values("pk"))
        if filters.gpu_model:
            half = half.filter(
                m_id__in=GpuModel.objects.filter(slug=filters.gpu_model).values("pk")
            )
        halves.append(
            half.filter(p_id__isnull=False, m_id__isnull=False)
            .annotate(week=InstantsBefore("submitted_at", starts, inclusive=True))
            .values("p_id", "m_id", "card_count", "week")
            .annotate(length=Sum(length))
            .order_by()
            .values_list("p_id", "m_id", "card_count", "week", "length")
        )
    # Two queries, not one UNION ALL: PostgreSQL ran the union's small halves in parallel
    # workers, whose start took 9 of its 11 ms at 100,800 GPUs (the two alone: 1.9 ms).
    rows = [*halves[0], *halves[1]]
    for p, m, cards, week, total in rows:
        totals.setdefault((p, m), [timedelta(0)] * weeks)[week] += cards * total
    by_ids = {key: [t / timedelta(days=1) for t in ts] for key, ts in totals.items()}
    names = names or pool_model_names()
    weekly: dict[tuple, list[float]] = {}
    labels: dict[tuple, tuple[str, str]] = {}
    for (p, m), ys in by_ids.items():
        (pool_slug, pool_name, _ratio), (model_slug, model_name) = names.pools[p], names.models[m]
        key = (pool_slug, model_slug)
        weekly[key], labels[key] = ys, (pool_name, model_name)
    result = []
    for key, ys in weekly.items():
        intercept, slope = _least_squares(ys)
        capacity = usable.get(key, 0) * 7.0
        current = intercept + slope * (weeks - 1)
        runs_out, text = None, ""
        if capacity <= 0:
            text = "No usable cards: every request waits."
        elif current >= capacity:
            runs_out, text = now, "Out now: this week's trend already asks for every card."
        elif slope <= 0:
            text = "Does not run out at this trend (demand flat or falling)."
        else:
            weeks_left = (capacity - current) / slope
            runs_out = now + timedelta(weeks=weeks_left)
            text = f"Runs out in about {weeks_left:.0f} weeks ({runs_out:%d %b %Y})."
        pool_name, model_name = labels[key]
        result.append(
            Forecast(key[0], pool_name, key[1], model_name, ys, slope, capacity, runs_out, text)
        )
    result.sort(key=lambda f: (f.runs_out is None, f.runs_out or now, f.pool, f.gpu_model))
    return result


def _cached_weeks(
    *, filters: DashboardFilters, now: datetime, since: datetime, starts: list
) -> tuple[dict[tuple, list[timedelta]], Q]:
    """Card-time per (pool id, model id) and week from the cached hourly sums
    (:func:`pools.dashboards.demand_history.hourly_demand`) of the demand that names its pool
    and model, narrowed to the filters' pool and model: week k takes the whole hours after the
    hour of its start ``since``/``starts[k - 1]`` and before the hour of the next (the last: on
    without end). Returns those sums (only pool × models with a request in them) and the
    condition on ``submitted_at`` of the rest, to sum live: the hours holding a week start."""
    named = CapacityRequest.objects.filter(
        status__in=DEMAND_STATUSES, pool__isnull=False, gpu_model__isnull=False
    )
    hourly = hourly_demand(named, now=now, days=len(starts) * 7 + 7)
    cuts = [floor_hour(t) for t in (since, *starts)]
    spans = [(cut + HOUR, nxt) for cut, nxt in zip(cuts, [*cuts[1:], None], strict=True)]
    live = Q()
    for cut in cuts:
        live |= Q(submitted_at__gte=cut, submitted_at__lt=cut + HOUR)
    keys = list(hourly.card_us)
    if filters.pool:
        ids = set(Pool.objects.filter(slug=filters.pool).values_list("pk", flat=True))
        keys = [k for k in keys if k[0] in ids]
    if filters.gpu_model:
        ids = set(GpuModel.objects.filter(slug=filters.gpu_model).values_list("pk", flat=True))
        keys = [k for k in keys if k[1] in ids]
    totals = {}
    for key in keys:
        sums = [hourly.between(key, lo, hi) for lo, hi in spans]
        if any(n for _, n in sums):
            totals[key] = [timedelta(microseconds=us) for us, _ in sums]
    return totals, live


@dataclass(frozen=True)
class Alerts:
    unrecognised: list[dict]
    drifts: list[SchedulerDrift]
    drift_count: int
    overcommitted: list[Overcommit]


def dashboard_alerts(*, now: datetime, limit: int = 5) -> Alerts:
    """Unrecognised model names, scheduler drift reconcile could not repair and has not repaired
    since (:func:`pools.capacity.selectors.unrepaired_drifts`, newest first; two queries), and
    pool × model windows from ``now`` on that hold more cards than usable
    (:func:`pools.capacity.overcommit.overcommitted_windows`: eight queries however many pairs
    are over)."""
    drifts = list(
        unrepaired_drifts()
        .select_related("team")
        .annotate(total=Window(Count("id")))
        .order_by("-detected_at", "-id")[:limit]
    )
    return Alerts(
        unrecognised=unrecognised_model_list(),
        drifts=drifts,
        drift_count=drifts[0].total if drifts else 0,
        overcommitted=overcommitted_windows(now=now),
    )


HEATMAP_PAGE = 200


@dataclass(frozen=True)
class HeatmapCell:
    index: int
    state: str  # ok, error, unknown (card health) or the node state when the node is not up
    title: str
    gpu_id: int | None = None
    uuid: str | None = None
    mig_mode: bool | None = None
    # Mean utilisation, % (0-100), over the last 30 min: set only when the heatmap is coloured
    # by utilisation (pools.dashboards.utilisation.heatmap_utilisation); None is "no reading".
    util_pct: float | None = None
    gpu_model: str = ""  # the model's slug, or "? <name>" when unrecognised

    @property
    def util_level(self) -> str:
        """CSS class of the utilisation colour: ``u0`` under 10 %, ``u1`` under 30 % (the
        default busy threshold, :data:`IDLE_BELOW_PCT`), ``u2`` under 60 %, ``u3`` under 90 %,
        ``u4`` from 90 %, and ``nodata`` without a reading."""
        if self.util_pct is None:
            return "nodata"
        return f"u{sum(self.util_pct >= edge for edge in (10, IDLE_BELOW_PCT, 60, 90))}"


@dataclass(frozen=True)
class HeatmapRow:
    hostname: str
    cluster_slug: str | None  # the node's cluster (None: the environment's); names its page
    pool_slug: str
    pool: str
    node_state: str
    gpu_model_slug: str
    cells: list[HeatmapCell]
    allocations: int  # holding allocations now in the node's pool for its main GPU model


def node_heatmap(
    *, filters: DashboardFilters, now: datetime, page: int | None = 1
) -> tuple[list[HeatmapRow], int]:
    """Nodes × GPUs of one page (``HEATMAP_PAGE`` nodes by hostname; ``page=None``: every node,
    for the CSV) and the number of pages.

    A cell's state is the card's health when its node is up, else the node's state (a card on a
    drained node is not schedulable, whatever its health). Three queries.
    """
    nodes = Node.objects.filter(pool__isnull=False)
    if filters.pool:
        nodes = nodes.filter(pool__slug=filters.pool)
    if filters.driver_branch:
        nodes = nodes.filter(driver_group__branch=filters.driver_branch)
    if filters.gpu_model:
        nodes = nodes.filter(gpus__gpu_model__slug=filters.gpu_model).distinct()
    if page is None:
        pages = 1
        chosen = list(nodes.order_by("hostname", "pk").values_list("pk", flat=True))
    else:
        pages = max(1, math.ceil(nodes.count() / HEATMAP_PAGE))
        page = min(max(page, 1), pages)
        chosen = list(
            nodes.order_by("hostname", "pk").values_list("pk", flat=True)[
                (page - 1) * HEATMAP_PAGE : page * HEATMAP_PAGE
            ]
        )
    gpus = (
        Gpu.objects.filter(node_id__in=chosen)
        .values(
            "node_id", "node__hostname", "node__cluster__slug", "node__state",
            "node__pool__slug", "node__pool__name",
            "index", "health", "gpu_model__slug", "gpu_model__name", "raw_model_name",
            "id", "uuid", "mig_mode",
        )
        .order_by("node__hostname", "index")
    )  # fmt: skip
    held = dict(
        (
            (r["pool__slug"], r["gpu_model__slug"]),
            r["n"],
        )
        for r in Allocation.objects.holding()
        .whole_cards()
        .at(now)
        .values("pool__slug", "gpu_model__slug")
        .annotate(n=Count("id"))
        .order_by()
    )
    rows: dict[int, dict] = {}
    for g in gpus:
        row = rows.setdefault(
            g["node_id"],
            {
                "hostname": g["node__hostname"],
                "cluster_slug": g["node__cluster__slug"],
                "pool_slug": g["node__pool__slug"],
                "pool": g["node__pool__name"],
                "node_state": g["node__state"],
                "models": defaultdict(int),
                "cells": [],
            },
        )
        model = g["gpu_model__name"] or f"? {g['raw_model_name'] or 'unknown'}"
        if g["gpu_model__slug"]:
            row["models"][g["gpu_model__slug"]] += 1
        state = g["health"] if g["node__state"] == NodeState.UP else g["node__state"]
        title = f"GPU {g['index']} · {model} · {state}"
        row["cells"].append(
            HeatmapCell(
                g["index"], state, title, g["id"], g["uuid"], g["mig_mode"],
                gpu_model=g["gpu_model__slug"] or f"? {g['raw_model_name'] or 'unknown'}",
            )
        )  # fmt: skip
    result = []
    for row in rows.values():
        main = max(row["models"], key=row["models"].get) if row["models"] else ""
        result.append(
            HeatmapRow(
                row["hostname"], row["cluster_slug"], row["pool_slug"], row["pool"],
                row["node_state"], main,
                row["cells"], held.get((row["pool_slug"], main), 0),
            )
        )  # fmt: skip
    return result, pages


def team_allocations(*, team_id: int, now: datetime) -> list[Allocation]:
    """The team's holding allocations (and those ended in the last 31 days), soonest end first."""
    return list(
        Allocation.objects.filter(team_id=team_id)
        .filter(holding_q() | Q(ends_at__gt=now - timedelta(days=31), ends_at__lte=now))
        .select_related("pool", "gpu_model")
        .order_by("ends_at", "id")
    )
