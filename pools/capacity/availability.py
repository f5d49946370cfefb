"""Read side of capacity: schedulable cards, what allocations hold, and which pools are eligible.

A pool's *schedulable* cards of a GPU model are its cards of that model that the inventory's one
rule counts (:data:`pools.inventory.models.SCHEDULABLE_CARD`: node up, own health not ``error``,
not in MIG mode) and, when a CUDA version is asked for, whose driver group supports it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.db import connection
from django.db.models import Count, FloatField, Func, QuerySet, Sum
from django.template.defaultfilters import pluralize

from pools.capacity.arithmetic import free_after_peak, free_cards, peaks_per_span, usable_cards
from pools.capacity.models import Allocation, overlap_q
from pools.capacity.node_kinds import pool_nodes
from pools.capacity.placement import AwayNode
from pools.capacity.window import (
    WindowHolds,
    held_allocations,
    holding_allocations,
    maintenance_away_nodes,
    maintenance_intervals,
    maintenance_intervals_by_pool_model,
    maintenance_slice_intervals,
    recurring_intervals,
    window_holds,
    window_holds_reusing,
)
from pools.classes.rules import ClassRule
from pools.common.choices import Scheduler, WorkloadKind
from pools.inventory.driver_versions import driver_supports, parse_cuda_version
from pools.inventory.models import Gpu, GpuModel, MigDevice, Pool
from pools.inventory.selectors import inventory_census, mig_slices
from pools.recurring.models import RecurringReservation
from pools.recurring.recurrence import occurrences

SCHEDULER_OF_KIND = {
    WorkloadKind.TRAINING: Scheduler.SLURM,
    WorkloadKind.INFERENCE: Scheduler.KUBERNETES,
}


def schedulable_cards(*, pool: Pool, gpu_model: GpuModel, cuda: str | None = None) -> int:
    """Cards of ``gpu_model`` in ``pool`` that a scheduler can hand out now (see module doc)."""
    return _schedulable_by_model(pool=pool, cuda=cuda, gpu_model=gpu_model).get(gpu_model.pk, 0)


def schedulable_cards_by_pool_model() -> dict[tuple[int, int], int]:
    """:func:`schedulable_cards` of every pool and model at once (any CUDA), by
    ``(pool id, model id)``, from the census kept per inventory generation
    (:func:`pools.inventory.selectors.inventory_census`): one query, two when the inventory
    changed."""
    return inventory_census().count_cards(
        lambda g: (g.pool_id, g.gpu_model_id), lambda g: g.pool_id is not None and g.schedulable
    )


def _schedulable_by_model(
    *, pool: Pool, cuda: str | None, gpu_model: GpuModel | None = None
) -> dict[int, int]:
    gpus = Gpu.objects.schedulable().filter(node__pool=pool)
    if gpu_model is not None:  # the approval asks about one model: count only its cards
        gpus = gpus.filter(gpu_model=gpu_model)
    rows = gpus.values("gpu_model", "node__driver_group__max_cuda").annotate(n=Count("id"))
    wanted = parse_cuda_version(cuda) if cuda else None
    counts: dict[int, int] = {}
    for row in rows:
        if driver_supports(row["node__driver_group__max_cuda"], wanted):
            counts[row["gpu_model"]] = counts.get(row["gpu_model"], 0) + row["n"]
    return counts


def holding_intervals(
    *,
    pool: Pool,
    gpu_model: GpuModel,
    start: datetime,
    end: datetime,
    exclude_allocation: int | None = None,
    profile: str = "",
) -> list[tuple[datetime, datetime, int]]:
    """``(starts_at, ends_at, cards)`` of holding allocations of the pool/model overlapping
    ``[start, end)``, and of the occurrences of its active recurring reservations there
    (:func:`pools.capacity.window.recurring_intervals`, issue 32), and the cards planned
    maintenance windows take away (:func:`pools.capacity.window.maintenance_intervals`): what
    the request form, the earliest start and the recurring check count, as the approval does.
    With a MIG ``profile`` the same in slices of it: the slice allocations of that profile and
    the slices windows take away (:func:`pools.capacity.window.maintenance_slice_intervals`);
    recurring reservations hold whole cards only. Three queries (two for a profile)."""
    qs = holding_allocations(
        pool=pool,
        gpu_model=gpu_model,
        start=start,
        end=end,
        exclude_allocation=exclude_allocation,
        profile=profile,
    )
    held = list(qs.values_list("starts_at", "ends_at", "card_count"))
    if profile:
        return held + maintenance_slice_intervals(pool, gpu_model, profile, start, end)
    return _with_blocked(held, pool, gpu_model, start, end)


def held_intervals(
    *, pool: Pool, gpu_model: GpuModel, start: datetime, end: datetime
) -> list[tuple[datetime, datetime, int]]:
    """:func:`holding_intervals` (whole cards) with the allocations that held cards at some
    instant of ``[start, end)`` instead of those holding them now
    (:func:`pools.capacity.window.held_allocations`): one ended or reclaimed at 06:00 today
    counts its ``card_count`` until 06:00, as ``/timeline/`` counts it. For what the past held
    (the capacity calendar's free cards per day); an approval asks about the future, where an
    ended allocation's cards are free, and reads :func:`holding_intervals`. An ended
    allocation's ``ends_at`` is when it ended, never after now, so the hours from now on count
    what :func:`holding_intervals` counts. Three queries."""
    rows = held_allocations(pool=pool, gpu_model=gpu_model, start=start, end=end)
    held = list(rows.values_list("starts_at", "ends_at", "card_count"))
    return _with_blocked(held, pool, gpu_model, start, end)


def _with_blocked(
    held: list, pool: Pool, gpu_model: GpuModel, start: datetime, end: datetime
) -> list[tuple[datetime, datetime, int]]:
    """``held`` and what else holds or takes away whole cards of the pool × model in ``[start,
    end)``: recurring occurrences and planned maintenance windows. Two queries."""
    return (
        held
        + recurring_intervals(pool, gpu_model, start, end)
        + maintenance_intervals(pool, gpu_model, start, end)
    )


def earliest_free_start(
    *,
    pool: Pool,
    gpu_model: GpuModel,
    cards: int,
    start: datetime,
    length: timedelta,
    horizon: timedelta = timedelta(days=366),
) -> datetime | None:
    """The earliest start, from ``start`` on, of a window of ``length`` over all of which
    ``cards`` cards of ``gpu_model`` are free in ``pool`` (as :func:`pool_free_cards` counts
    them); ``None`` when none starts within ``horizon`` (or the pool could never hold them).

    Free cards over a window only grow when a holding allocation ends inside it, so the
    candidates are ``start`` and the ends of holding allocations after it. Two queries.
    """
    schedulable = schedulable_cards(pool=pool, gpu_model=gpu_model)
    intervals = holding_intervals(
        pool=pool, gpu_model=gpu_model, start=start, end=start + horizon + length
    )
    candidates = sorted({start, *(e for _, e, _ in intervals if start < e <= start + horizon)})
    for candidate in candidates:
        free = free_cards(
            schedulable=schedulable,
            overcommit_ratio=pool.overcommit_ratio,
            intervals=intervals,
            start=candidate,
            end=candidate + length,
        )
        if free >= cards:
            return candidate
    return None


def pool_free_cards(
    *,
    pool: Pool,
    gpu_model: GpuModel,
    start: datetime,
    end: datetime,
    cuda: str | None = None,
    exclude_allocation: int | None = None,
    holds: WindowHolds | None = None,
) -> int:
    """Cards of ``gpu_model`` free in ``pool`` for the whole window (over-commit applied):
    usable schedulable cards − the peak held (:func:`pools.capacity.window.window_holds`),
    never negative.

    The approval calls this under the pool lock, once per approval, and passes the ``holds``
    it read for the shape check too. Schedulable cards come from the inventory read once per
    inventory change (:mod:`pools.capacity.node_kinds`), so on PostgreSQL the count costs one
    statement whatever the pool's size: approvals must keep up with 100 a second (issue #3)
    and stay flat at 2,000 nodes (issue #20).
    """
    holds = window_holds_reusing(
        holds,
        pool=pool,
        gpu_model=gpu_model,
        start=start,
        end=end,
        exclude_allocation=exclude_allocation,
    )
    nodes = pool_nodes(pool=pool, gpu_model=gpu_model, generation=holds.generation)
    return free_after_peak(
        schedulable=nodes.schedulable(cuda), overcommit_ratio=pool.overcommit_ratio, peak=holds.peak
    )


def pool_slices(*, pool: Pool, gpu_model: GpuModel) -> dict[str, int]:
    """Schedulable MIG slices of ``gpu_model`` in ``pool`` by profile, ``{"1g.10gb": 11}``
    (:func:`pools.inventory.selectors.mig_slices`: instances of cards in MIG mode on nodes up,
    not in error). One query."""
    gpus = Gpu.objects.filter(node__pool=pool, gpu_model=gpu_model)
    return mig_slices(gpus=gpus).get((pool.pk, gpu_model.pk), {})


def pool_free_slices(
    *,
    pool: Pool,
    gpu_model: GpuModel,
    profile: str,
    start: datetime,
    end: datetime,
    exclude_allocation: int | None = None,
) -> int:
    """Slices of MIG ``profile`` of ``gpu_model`` free in ``pool`` for the whole window
    ``[start, end)``: the pool's schedulable slices of the profile (:func:`pool_slices`) − the
    most that holding slice allocations of that profile hold at once in the window
    (:func:`pools.capacity.window.window_holds` with ``profile``: planned maintenance windows
    take the slices on their nodes away there,
    :func:`pools.capacity.window.maintenance_slice_intervals`), never negative; no over-commit
    (a slice is a hardware partition). Two queries (on PostgreSQL four when a window
    overlaps)."""
    holds = window_holds(
        pool=pool,
        gpu_model=gpu_model,
        start=start,
        end=end,
        exclude_allocation=exclude_allocation,
        profile=profile,
    )
    return max(pool_slices(pool=pool, gpu_model=gpu_model).get(profile, 0) - holds.peak, 0)


def slice_nodes_away(
    *, pool: Pool, gpu_model: GpuModel, profile: str, start: datetime, end: datetime
) -> tuple[AwayNode, ...]:
    """The nodes holding schedulable slices of MIG ``profile`` of ``gpu_model`` in ``pool``
    (:func:`pools.inventory.selectors.mig_slices`' cards) that planned maintenance windows take
    out in ``[start, end)`` (:func:`pools.capacity.window.maintenance_away_nodes`): why slices
    the pool has are not free. Two queries."""
    cards = Gpu.objects.sliced().filter(node__pool=pool, gpu_model=gpu_model)
    hosts = set(
        MigDevice.objects.filter(gpu__in=cards.values("pk"), profile=profile).values_list(
            "gpu__node__hostname", flat=True
        )
    )
    return tuple(a for a in maintenance_away_nodes(pool, start, end) if a.node in hosts)


@dataclass
class Option:
    """One (pool, GPU model) considered for a request: free cards and why it is not eligible."""

    pool: Pool
    gpu_model: GpuModel
    total: int  # schedulable cards of the model, whatever their driver
    schedulable: int  # of those, on drivers that support the CUDA version asked for
    usable: int
    free: int
    mig_cards: int = 0  # cards of the model in MIG mode, read only when no card is whole
    reasons: list[str] = field(default_factory=list)

    @property
    def eligible(self) -> bool:
        return not self.reasons


@dataclass
class CapacitySnapshot:
    """What :func:`request_options` and :func:`pool_free_cards` read, loaded once for many
    requests (the approval queue): the pools by name, the catalogue, schedulable cards by pool,
    model and driver group's max CUDA, the cards in MIG mode (to say why a model has no whole
    card), the holding allocations overlapping ``[start, end)``, the occurrences of recurring
    reservations there and the cards maintenance windows take away. Six queries, whatever the
    number of requests asked about (seven when the inventory changed: the cards come from the
    census kept per inventory generation, :func:`pools.inventory.selectors.inventory_census`,
    which at 100,800 cards saves a 50 ms grouped read on every approval queue page)."""

    pools: list[Pool]
    models: dict[int, GpuModel]
    cards: dict[int, list[tuple[int, str | None, int]]]  # pool id -> (model id, max CUDA, n)
    holding: dict[tuple[int, int], list[tuple[datetime, datetime, int]]]  # (pool, model) ->
    mig: dict[tuple[int, int], int] = field(default_factory=dict)  # (pool, model) -> MIG cards

    @classmethod
    def load(cls, *, start: datetime, end: datetime) -> CapacitySnapshot:
        census = inventory_census()
        in_pool = census.count_cards(
            lambda g: (g.pool_id, g.gpu_model_id, g.max_cuda),
            lambda g: g.pool_id is not None and g.schedulable,
        )
        cards: dict[int, list[tuple[int, str | None, int]]] = {}
        for (pool_id, model_id, max_cuda), n in in_pool.items():
            cards.setdefault(pool_id, []).append((model_id, max_cuda, n))
        mig = census.count_cards(
            lambda g: (g.pool_id, g.gpu_model_id), lambda g: g.pool_id is not None and g.sliced
        )
        holding: dict[tuple[int, int], list[tuple[datetime, datetime, int]]] = {}
        holds = Allocation.objects.holding().whole_cards().overlapping(start, end)
        for pool_id, model_id, a, b, n in holds.values_list(
            "pool", "gpu_model", "starts_at", "ends_at", "card_count"
        ):
            holding.setdefault((pool_id, model_id), []).append((a, b, n))
        # occurrences of recurring reservations hold whole cards too (issue 32)
        for reservation in RecurringReservation.objects.overlapping_dates(start, end):
            key = (reservation.pool_id, reservation.gpu_model_id)
            for a, b in occurrences(reservation.rule, start, end):
                holding.setdefault(key, []).append((a, b, reservation.card_count))
        # and planned maintenance windows take cards away
        for key, away in maintenance_intervals_by_pool_model(start, end).items():
            holding.setdefault(key, []).extend(away)
        return cls(
            pools=list(Pool.objects.order_by("name")),
            models={m.pk: m for m in GpuModel.objects.all()},
            cards=cards,
            holding=holding,
            mig=mig,
        )

    def schedulable_by_model(self, *, pool: Pool, cuda: str | None) -> dict[int, int]:
        """As :func:`_schedulable_by_model`, from the snapshot."""
        wanted = parse_cuda_version(cuda) if cuda else None
        counts: dict[int, int] = {}
        for model_id, max_cuda, n in self.cards.get(pool.pk, ()):
            if driver_supports(max_cuda, wanted):
                counts[model_id] = counts.get(model_id, 0) + n
        return counts

    def intervals(self, *, pool: Pool, gpu_model: GpuModel, start: datetime, end: datetime):
        """As :func:`holding_intervals`, from the snapshot (whose window must cover this one)."""
        return [
            (a, b, n)
            for a, b, n in self.holding.get((pool.pk, gpu_model.pk), ())
            if a < end and b > start
        ]

    def free(
        self, *, pool: Pool, gpu_model: GpuModel, start: datetime, end: datetime, cuda: str | None
    ) -> int:
        """As :func:`pool_free_cards`, from the snapshot."""
        return free_cards(
            schedulable=self.schedulable_by_model(pool=pool, cuda=cuda).get(gpu_model.pk, 0),
            overcommit_ratio=pool.overcommit_ratio,
            intervals=self.intervals(pool=pool, gpu_model=gpu_model, start=start, end=end),
            start=start,
            end=end,
        )


@dataclass(frozen=True)
class _Reads:
    """Where :func:`request_options` reads from: the pools and models considered, schedulable
    cards by model (``by_model(pool=, cuda=)`` -> {model id: cards}), the holding intervals
    ``(start, end, cards)`` of a (pool, model) in the window and its cards in MIG mode."""

    pools: list[Pool]
    models_by_id: dict[int, GpuModel]
    by_model: Callable[..., dict[int, int]]
    intervals: Callable[[Pool, GpuModel], list[tuple[datetime, datetime, int]]]
    mig_cards: Callable[[Pool, GpuModel], int]


@dataclass(frozen=True)
class _Ask:
    """What a request asks of :func:`request_options` beyond where to look."""

    workload_kind: str
    card_count: int
    start: datetime
    end: datetime
    gpu_model: GpuModel | None
    cuda: str | None
    rule: ClassRule | None
    pool_named: bool = False


def _snapshot_reads(
    snapshot: CapacitySnapshot,
    *,
    pool: Pool | None,
    gpu_model: GpuModel | None,
    min_memory_gib: Decimal | None,
    ask: _Ask,
) -> _Reads:
    """:class:`_Reads` from a :class:`CapacitySnapshot` covering the window: no query."""
    models_by_id = {
        pk: m
        for pk, m in snapshot.models.items()
        if (pk == gpu_model.pk if gpu_model else
            min_memory_gib is None or m.memory_gib >= min_memory_gib)
    }  # fmt: skip
    return _Reads(
        pools=[pool] if pool else snapshot.pools,
        models_by_id=models_by_id,
        by_model=snapshot.schedulable_by_model,
        intervals=lambda candidate, model: snapshot.intervals(
            pool=candidate, gpu_model=model, start=ask.start, end=ask.end
        ),
        mig_cards=lambda candidate, model: snapshot.mig.get((candidate.pk, model.pk), 0),
    )


def _database_reads(
    *, pool: Pool | None, gpu_model: GpuModel | None, min_memory_gib: Decimal | None, ask: _Ask
) -> _Reads:
    """:class:`_Reads` from the database: the pools and models now, counts per pool asked."""
    models = GpuModel.objects.all()
    if gpu_model:
        models = models.filter(pk=gpu_model.pk)
    elif min_memory_gib is not None:
        models = models.filter(memory_gib__gte=min_memory_gib)
    return _Reads(
        pools=[pool] if pool else list(Pool.objects.order_by("name")),
        models_by_id={m.pk: m for m in models},
        by_model=_schedulable_by_model,
        intervals=lambda candidate, model: holding_intervals(
            pool=candidate, gpu_model=model, start=ask.start, end=ask.end
        ),
        mig_cards=lambda candidate, model: (
            Gpu.objects.sliced().filter(node__pool=candidate, gpu_model=model).count()
        ),
    )


def _fit_reasons(candidate: Pool, model: GpuModel, ask: _Ask) -> list[str]:
    """Why the pool or model does not suit the request's kind of work: wrong scheduler
    (:data:`SCHEDULER_OF_KIND`), a burst pool the request did not name (rented capacity is for
    the elastic scale-up of teams that opted in, issue 35; a request may still name it), or the
    workload class's rule does not permit the model."""
    reasons = []
    if candidate.burst and not ask.pool_named:
        reasons.append(
            f"{candidate.name} is a burst pool: only elastic scale-up of teams that opted in "
            "lands there unless a request names it"
        )
    if candidate.scheduler != SCHEDULER_OF_KIND.get(ask.workload_kind):
        reasons.append(
            f"{candidate.name} runs {candidate.get_scheduler_display()}, not "
            f"{WorkloadKind(ask.workload_kind).label.split(' (')[0].lower()} work"
        )
    if ask.rule is not None and not ask.rule.permits(
        model_slug=model.slug, card_class=model.card_class
    ):
        reasons.append(ask.rule.refusal(model_name=model.name, card_class=model.card_class))
    return reasons


def _supply_reason(option: Option, reads: _Reads, ask: _Ask) -> str | None:
    """Why the pool has not the cards: none whole (reads its MIG cards into the option), none
    on a driver supporting the CUDA version, or too few free in the window; None if it has."""
    if not option.total:
        option.mig_cards = reads.mig_cards(option.pool, option.gpu_model)
        return no_whole_cards(option.pool, option.gpu_model, option.mig_cards)
    if ask.cuda and not option.schedulable:
        return f"no driver group of {option.pool.name} supports CUDA {ask.cuda}"
    if option.free < ask.card_count:
        if option.free == option.usable:  # nothing held: the pool is too small
            return (
                f"all {option.usable} usable cards free in that window, fewer than the "
                f"{ask.card_count} asked"
            )
        return f"only {option.free} of {option.usable} cards free in that window"
    return None


def _pool_options(candidate: Pool, reads: _Reads, ask: _Ask) -> list[Option]:
    """The options of one pool: each model offered, with its cards and reasons."""
    all_cards = reads.by_model(pool=candidate, cuda=None)
    capable = reads.by_model(pool=candidate, cuda=ask.cuda) if ask.cuda else all_cards
    offered = [reads.models_by_id[m] for m in all_cards if m in reads.models_by_id]
    if ask.gpu_model and ask.gpu_model.pk not in all_cards:
        offered = [ask.gpu_model]
    options = []
    for model in offered:
        schedulable = capable.get(model.pk, 0)
        free = free_cards(
            schedulable=schedulable,
            overcommit_ratio=candidate.overcommit_ratio,
            intervals=reads.intervals(candidate, model),
            start=ask.start,
            end=ask.end,
        )
        usable = usable_cards(schedulable, candidate.overcommit_ratio)
        option = Option(candidate, model, all_cards.get(model.pk, 0), schedulable, usable, free)
        option.reasons.extend(_fit_reasons(candidate, model, ask))
        if (supply := _supply_reason(option, reads, ask)) is not None:
            option.reasons.append(supply)
        options.append(option)
    return options


def request_options(
    *,
    workload_kind: str,
    card_count: int,
    start: datetime,
    end: datetime,
    pool: Pool | None = None,
    gpu_model: GpuModel | None = None,
    min_memory_gib: Decimal | None = None,
    cuda: str | None = None,
    snapshot: CapacitySnapshot | None = None,
    rule: ClassRule | None = None,
) -> list[Option]:
    """Every (pool, model) a request could land on, eligible ones first, most free cards first.

    A pool is considered when it runs the workload's scheduler (training → Slurm, inference →
    Kubernetes) and, if named, is the one asked for; a model when it is the one asked for or has
    at least ``min_memory_gib``. ``reasons`` says why an option cannot take the request: wrong
    scheduler, a burst pool not named, the workload class's ``rule`` does not permit the model
    (issue 36), no card of the model, no driver supporting the CUDA version, or too few free
    cards. With a ``snapshot`` (covering the window) nothing more is read from the database.
    """
    ask = _Ask(workload_kind, card_count, start, end, gpu_model, cuda, rule, pool is not None)
    where = {"pool": pool, "gpu_model": gpu_model, "min_memory_gib": min_memory_gib, "ask": ask}
    reads = _snapshot_reads(snapshot, **where) if snapshot is not None else _database_reads(**where)
    options = [
        option for candidate in reads.pools for option in _pool_options(candidate, reads, ask)
    ]
    options.sort(key=lambda o: (not o.eligible, -o.free, o.pool.name, o.gpu_model.name))
    return options


def no_whole_cards(pool: Pool, gpu_model: GpuModel, mig_cards: int) -> str:
    """Why ``pool`` offers no ``gpu_model`` card: none is schedulable, or all that are sit in
    MIG mode (``mig_cards`` of them), cut into slices a card request cannot use."""
    if mig_cards:
        return (
            f"{pool.name}'s {mig_cards} {gpu_model.name} card{pluralize(mig_cards)} "
            f"{'are' if mig_cards > 1 else 'is'} in MIG mode: cut into MIG slices, "
            "none is a whole card"
        )
    return f"{pool.name} has no schedulable {gpu_model.name} cards"


def team_usage(*, team_ids: list[int], at: datetime) -> dict[int, int]:
    """Whole cards each team holds at instant ``at`` (holding allocations covering it), by
    team id; MIG slices are not cards (issue 38)."""
    rows = (
        Allocation.objects.holding()
        .whole_cards()
        .at(at)
        .filter(team_id__in=team_ids)
        .values("team")
        .annotate(cards=Sum("card_count"))
    )
    held = dict.fromkeys(team_ids, 0)
    held.update({row["team"]: row["cards"] for row in rows})
    return held


RECURRING_HELD = "recurring reservations"
MAINTENANCE_AWAY = "maintenance"


def blocked_intervals(
    *, start: datetime, end: datetime, team: str | None = None
) -> dict[tuple[int, int], dict[str, list[tuple[datetime, datetime, int]]]]:
    """By ``(pool id, model id)`` and kind: ``(starts_at, ends_at, cards)`` of the occurrences
    of active recurring reservations (:data:`RECURRING_HELD`) and of the planned maintenance
    windows (:data:`MAINTENANCE_AWAY`:
    :func:`pools.capacity.window.maintenance_intervals_by_pool_model`) overlapping
    ``[start, end)``: what the approval counts besides allocations (:class:`CapacitySnapshot`,
    :func:`holding_intervals`). Two queries.

    ``team`` (a slug): what that team holds besides its allocations, its own reservations'
    occurrences alone and no maintenance (a window is no team's); one query."""
    intervals: dict[tuple[int, int], dict[str, list]] = {}
    reservations = RecurringReservation.objects.overlapping_dates(start, end)
    if team is not None:
        reservations = reservations.filter(team__slug=team)
    for reservation in reservations:
        key = (reservation.pool_id, reservation.gpu_model_id)
        held = intervals.setdefault(key, {}).setdefault(RECURRING_HELD, [])
        held += [
            (a, b, reservation.card_count) for a, b in occurrences(reservation.rule, start, end)
        ]
    if team is not None:
        return intervals
    for key, away in maintenance_intervals_by_pool_model(start, end).items():
        intervals.setdefault(key, {}).setdefault(MAINTENANCE_AWAY, []).extend(away)
    return intervals


def blocked_cards_at(
    *,
    start: datetime,
    end: datetime,
    instants: list[datetime],
    intervals: dict[tuple[int, int], dict[str, list]] | None = None,
) -> dict[tuple[int, int], dict[str, list[int]]]:
    """By ``(pool id, model id)``: whole cards held at each of ``instants`` (aware, within
    ``[start, end)``) by the occurrences of active recurring reservations
    (:data:`RECURRING_HELD`) and taken away by planned maintenance windows
    (:data:`MAINTENANCE_AWAY`), each a list as long as ``instants``; an occurrence or window
    ``[a, b)`` counts at ``t`` when ``a <= t < b``. Only the pairs and kinds with some card at
    some instant. ``intervals``: :func:`blocked_intervals` of the window when the caller read
    them already (no query), else read here (two queries)."""
    if intervals is None:
        intervals = blocked_intervals(start=start, end=end)
    found: dict[tuple[int, int], dict[str, list[int]]] = {}
    for key, kinds in intervals.items():
        for kind, spans in kinds.items():
            cards = [sum(n for a, b, n in spans if a <= t < b) for t in instants]
            if any(cards):
                found.setdefault(key, {})[kind] = cards
    return found


def peaks_by_pool_model(
    *,
    bounds: list[datetime],
    blocked: dict[tuple[int, int], dict[str, list]],
    rows: QuerySet | None = None,
) -> dict[tuple[int, int], list[tuple[int, datetime]]]:
    """By ``(pool id, model id)``: for each span ``[bounds[i], bounds[i + 1])`` (aware,
    ascending) the most whole cards held at any instant of it and the first instant they are
    (:func:`pools.capacity.arithmetic.peaks_per_span`), counting what :func:`holding_intervals`
    counts for a pool × model -- holding allocations of whole cards, and ``blocked``
    (:func:`blocked_intervals` of the same span: recurring reservations' occurrences, planned
    maintenance) -- so that :func:`pools.capacity.arithmetic.free_after_peak` of a span's peak
    is the free cards :func:`pool_free_cards` gives the approval for it. Only the pairs with
    something in the span. One query: the ``(pool, model, start, end, cards)`` of the holding
    allocations over the whole span.

    ``rows``: a queryset to count instead of every holding whole-card allocation, whose rows
    have ``pool``, ``gpu_model``, ``starts_at``, ``ends_at`` and ``card_count`` (allocations
    narrowed to a team, or submitted requests: the admin dashboard's plan,
    :func:`pools.dashboards.capacity.allocation_plan`); only those overlapping the span are
    read. The peaks are then of those rows (and ``blocked``), not the approval's.

    Each instant is given in ``bounds[0]``'s zone (the local days of the timeline and the plan
    are local midnights: their busiest instants read in the same zone)."""
    if rows is None:
        rows = Allocation.objects.holding().whole_cards()
    # swept in Unix seconds; each instant found turned back into the datetime it came from
    # (a bound or a blocked span's end keeps its zone; the database's are UTC)
    named: dict[float, datetime] = {b.timestamp(): b for b in bounds}
    by_key: dict[tuple[int, int], list] = defaultdict(list)
    for pool_id, model_id, s, e, n in _intervals_in_seconds(rows, bounds[0], bounds[-1]):
        by_key[(pool_id, model_id)].append((s, e, n))
    for key, kinds in blocked.items():
        for spans in kinds.values():
            for s, e, n in spans:
                named.setdefault(s.timestamp(), s)
                named.setdefault(e.timestamp(), e)
                by_key[key].append((s.timestamp(), e.timestamp(), n))
    seconds = [b.timestamp() for b in bounds]
    zone = bounds[0].tzinfo or UTC
    return {
        key: [
            (peak, (named.get(at) or datetime.fromtimestamp(at, UTC)).astimezone(zone))
            for peak, at in peaks_per_span(spans, seconds)
        ]
        for key, spans in by_key.items()
    }


class _UnixSeconds(Func):
    """A timestamp column as seconds since the Unix epoch, ``float8`` (PostgreSQL only). Before
    2106 (2^32 s) a double's step is at most 2^-21 s (0.48 µs), so the number is the nearest
    double to the exact time, as ``datetime.timestamp()`` gives it, and turns back to the same
    microsecond (``datetime.fromtimestamp`` rounds to the nearest)."""

    template = "EXTRACT(EPOCH FROM %(expressions)s)::float8"
    output_field = FloatField()


def _intervals_in_seconds(
    rows: QuerySet, start: datetime, end: datetime
) -> list[tuple[int, int, float, float, int]]:
    """``(pool id, model id, starts_at, ends_at, card_count)`` of ``rows`` overlapping ``[start,
    end)``, the times as Unix seconds. PostgreSQL sends them as numbers: psycopg parsing each
    timestamp's text cost ~1.5 of the 2.0 s of CPU (under cProfile) of reading 32,730
    allocations' windows; other databases (the demo's SQLite) send datetimes, turned here."""
    window = rows.filter(overlap_q(start, end))
    if connection.vendor == "postgresql":
        return list(
            window.annotate(s=_UnixSeconds("starts_at"), e=_UnixSeconds("ends_at")).values_list(
                "pool_id", "gpu_model_id", "s", "e", "card_count"
            )
        )
    return [
        (p, m, s.timestamp(), e.timestamp(), n)
        for p, m, s, e, n in window.values_list(
            "pool_id", "gpu_model_id", "starts_at", "ends_at", "card_count"
        )
    ]
