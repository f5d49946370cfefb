"""What the holding allocations of a pool × GPU model hold over a window ``[start, end)``: the
held side of the card count and of the shape check, in one statement.

- ``peak``: the most cards held at once in the window, by every holding allocation (the card
  invariant's count; :func:`pools.capacity.arithmetic.peak_cards`'s sweep line: endpoints
  clipped to the window, at one instant an end before a start, the running sum's maximum);
- ``unplaced_peak``: the same for the allocations without a placement (granted without a shape
  or before shapes existed), which the shape check lays on the nodes as "any N cards"
  (:func:`pools.capacity.shapes.lay_unplaced`);
- ``held`` (when asked): per hostname, the GPU indices placed allocations hold at any time in
  the window, as a bit mask (:class:`pools.capacity.models.PlacedCards`), whatever pool of the
  pool's cluster the allocation is in: a node moved to another pool keeps the cards it holds
  (the caller keeps its own pool's hostnames), and another cluster's node of the same name is
  another node (host names are unique per cluster, :func:`pools.inventory.models.node_cluster_id`);
- ``generation``: the inventory generation read in the same statement
  (:mod:`pools.capacity.node_kinds` caches the inventory side under it; ``None`` on SQLite).

Recurring reservations (:class:`pools.recurring.models.RecurringReservation`) hold whole cards
at each occurrence, as unplaced holds: the statement also says whether an active one of the
pool × model has a date in the window, and then the sweep runs over the allocations and the
occurrences together in Python (:func:`recurring_intervals`), the generation kept.
Planned maintenance windows (:class:`pools.maintenance.models.MaintenanceWindow`) take the
schedulable cards of their nodes away for their window: in the card count (``peak``) they enter
the same Python sweep as unplaced holds (:func:`maintenance_intervals`), flagged by the same
statement. In the cards per node they are no "any N cards": a window names its nodes, so each
node away at any time in the window holds all its cards (``held`` gets :data:`ALL_CARDS` for
it; the shape check never places on it) and is listed in ``away``
(:func:`maintenance_away_nodes`, for the refusal's words); ``unplaced_peak`` leaves them out.
For MIG slices (``profile``) a window takes away the slices of that profile on its nodes' cards
in MIG mode (:func:`maintenance_slice_intervals`), in the same sweep.

Whole cards and MIG slices are held apart (issue 38): ``profile`` blank reads the allocations
of whole cards, a MIG profile (``"1g.10gb"``) those of slices of that profile, whose
``card_count`` counts slices; the peak is then in slices.

On PostgreSQL one statement whatever the pool's size: a window that 1,500 allocations overlap
costs two sweep rows and one ``bit_or`` per node held, not 1,500 parsed placements (issue #20).
On SQLite the same answers through the ORM.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from math import ceil

from django.db import connection
from django.db.models import Case, Count, F, IntegerField, Subquery, Value, When
from django.db.models.functions import Coalesce

from pools.capacity.arithmetic import peak_cards
from pools.capacity.lifecycle import HOLDING_STATUSES
from pools.capacity.models import Allocation, PlacedCards, overlap_q
from pools.capacity.placement import AwayNode
from pools.clusters.models import Cluster
from pools.common.choices import CredentialKind
from pools.inventory.models import Gpu, GpuModel, MigDevice, Node, Pool
from pools.maintenance.models import MaintenanceStatus, MaintenanceWindow
from pools.recurring.models import RecurringReservation
from pools.recurring.recurrence import occurrences

MAX_PLACED_INDEX = 62  # the highest GPU index a 64-bit mask (bigint, sign bit clear) holds
ALL_CARDS = (1 << (MAX_PLACED_INDEX + 1)) - 1  # the mask of every placeable card: a node away


@dataclass(frozen=True)
class WindowHolds:
    """See the module docstring; ``unplaced_peak`` and ``held`` are ``None`` when the cards
    per node were not asked for; ``away`` (read with them) the nodes of the pool maintenance
    windows take out in the window, one entry per node and window."""

    generation: int | None
    peak: int
    unplaced_peak: int | None
    held: dict[str, int] | None
    away: tuple[AwayNode, ...] = ()


def holding_allocations(
    *,
    pool: Pool,
    gpu_model: GpuModel,
    start: datetime,
    end: datetime,
    exclude_allocation: int | None = None,
    profile: str = "",
):
    """Allocations of ``pool`` × ``gpu_model`` that hold cards (``profile`` blank) or slices of
    ``profile`` and overlap ``[start, end)`` (half-open), without ``exclude_allocation``: what
    the card count and the shape check count."""
    qs = (
        Allocation.objects.holding()
        .overlapping(start, end)
        .filter(pool=pool, gpu_model=gpu_model, mig_profile=profile)
    )
    return qs.exclude(pk=exclude_allocation) if exclude_allocation else qs


def held_allocations(*, pool: Pool, gpu_model: GpuModel, start: datetime, end: datetime):
    """Allocations of whole cards of ``pool`` × ``gpu_model`` that held cards at some instant of
    ``[start, end)`` (:meth:`pools.capacity.models.AllocationQuerySet.held_during`): the holding
    ones and those ended or reclaimed, up to their end. What a past hour held, not what the card
    count of a new window counts (:func:`holding_allocations`: an ended allocation's cards are
    free for the future)."""
    return Allocation.objects.held_during(start, end).filter(
        pool=pool, gpu_model=gpu_model, mig_profile=""
    )


def window_holds(
    *,
    pool: Pool,
    gpu_model: GpuModel,
    start: datetime,
    end: datetime,
    exclude_allocation: int | None = None,
    per_node: bool = False,
    profile: str = "",
) -> WindowHolds:
    """What holding allocations hold over ``[start, end)`` (aware datetimes), without
    ``exclude_allocation``: whole cards, or with ``profile`` slices of that MIG profile (never
    ``per_node``: slices are not placed); ``per_node`` also reads the cards held on each
    node."""
    if profile and per_node:
        raise ValueError("slices are not placed: per_node reads whole cards only")
    if connection.vendor == "postgresql":
        return _holds_sql(pool, gpu_model, start, end, exclude_allocation, per_node, profile)
    return _holds_orm(pool, gpu_model, start, end, exclude_allocation, per_node, profile)


# The holding statuses as SQL literals: constants of the code, not input, and one parameter
# less to convert on every approval.
_HOLDING = ", ".join(f"'{status}'" for status in sorted(str(s) for s in HOLDING_STATUSES))
assert all(status.isalpha() for status in map(str, HOLDING_STATUSES))
# Holding allocations overlapping the window. The overlap is written as ranges so that the
# GiST index on tstzrange(starts_at, ends_at) (migration 0017, PostgreSQL) finds them: two
# B-tree bounds each match most of a pool's history, the range index only the overlap
# (1,532 of 10,000 in 0.6 ms at the bench's size, against a 4.5 ms scan).
# A pool's node cluster (:func:`pools.inventory.models.node_cluster_id`) over ``pools_pool pp``
# joined to its cluster ``c``: its cluster's id, 0 for the environment's (no cluster, or the
# row the variables define); the credential kind is a code constant, not input.
_NODE_CLUSTER_SQL = (
    f"COALESCE(CASE WHEN c.credential_kind = '{CredentialKind.ENVIRONMENT.value}' THEN NULL "
    "ELSE pp.cluster_id END, 0)"
)
_WIN_SQL = f"""
win AS MATERIALIZED (
  SELECT a.id, a.starts_at, a.ends_at, a.card_count
    FROM {Allocation._meta.db_table} a
   WHERE a.pool_id = %(pool)s AND a.gpu_model_id = %(model)s AND a.mig_profile = %(profile)s
     AND a.status IN ({_HOLDING}) AND a.id <> %(exclude)s
     AND tstzrange(a.starts_at, a.ends_at, '[)') && tstzrange(%(start)s, %(end)s, '[)')
)"""
# The running sums of the sweep line over the clipped endpoints; {placed} says which rows of
# ``win`` are placed.
_SWEEP_SQL = """
sweep AS (
  SELECT SUM(ev.delta) OVER w AS held_all,
         SUM(ev.delta) FILTER (WHERE NOT ({placed})) OVER w AS held_unplaced
    FROM win
   CROSS JOIN LATERAL (VALUES (GREATEST(win.starts_at, %(start)s), win.card_count),
                              (LEAST(win.ends_at, %(end)s), -win.card_count)) AS ev(t, delta)
  WINDOW w AS (ORDER BY ev.t, ev.delta ROWS UNBOUNDED PRECEDING)
), peaks AS (
  SELECT (SELECT generation FROM pools_inventorystamp) AS generation,
         COALESCE(MAX(held_all), 0) AS peak, COALESCE(MAX(held_unplaced), 0) AS unplaced,
         EXISTS (SELECT 1 FROM {recurring} r
                  WHERE r.pool_id = %(pool)s AND r.gpu_model_id = %(model)s
                    AND r.status = 'active' AND %(profile)s = ''
                    AND r.first_date <= %(last_day)s AND r.last_date >= %(first_day)s)
         AS recurring,
         EXISTS (SELECT 1 FROM {maintenance} w
                      JOIN {maintenance_nodes} wn ON wn.maintenancewindow_id = w.id
                      JOIN {node} n ON n.id = wn.node_id
                     WHERE n.pool_id = %(pool)s AND w.status = '{planned}'
                       AND w.starts_at < %(end)s AND w.ends_at > %(start)s) AS maintenance
    FROM sweep
)"""
_SWEEP_SQL = (
    _SWEEP_SQL.replace("{recurring}", RecurringReservation._meta.db_table)
    .replace("{maintenance}", MaintenanceWindow._meta.db_table)
    .replace("{maintenance_nodes}", MaintenanceWindow.nodes.through._meta.db_table)
    .replace("{node}", Node._meta.db_table)
    .replace("{planned}", MaintenanceStatus.PLANNED)
)
_WINDOW_SQL = (
    "WITH"
    + _WIN_SQL
    + ","
    + _SWEEP_SQL.replace("{placed}", "false")
    + "\nSELECT generation, peak, NULL, NULL, NULL, recurring, maintenance FROM peaks"
)
# With the cards per node: the holding allocations of *every* pool overlapping the window
# (``near``, one range-index scan), this pool × model's among them (``win``), and the placed
# cards of those in this pool's cluster (``spots``; a pool's node cluster is ``here``, 0 for
# the environment's): a node moved to another pool keeps the cards placed on it, and the
# caller keeps the hostnames of its own pool's nodes.
_WINDOW_NODES_SQL = (
    f"""WITH
near AS MATERIALIZED (
  SELECT a.id, a.pool_id, a.gpu_model_id, a.mig_profile, a.starts_at, a.ends_at, a.card_count
    FROM {Allocation._meta.db_table} a
   WHERE a.status IN ({_HOLDING}) AND a.id <> %(exclude)s
     AND tstzrange(a.starts_at, a.ends_at, '[)') && tstzrange(%(start)s, %(end)s, '[)')
), win AS MATERIALIZED (
  SELECT id, starts_at, ends_at, card_count FROM near
   WHERE pool_id = %(pool)s AND gpu_model_id = %(model)s AND mig_profile = %(profile)s
), here AS (
  SELECT {_NODE_CLUSTER_SQL} AS k
    FROM {Pool._meta.db_table} pp LEFT JOIN {Cluster._meta.db_table} c ON c.id = pp.cluster_id
   WHERE pp.id = %(pool)s
), spots AS MATERIALIZED (
  SELECT p.allocation_id, p.hostname, p.gpu_mask
    FROM {PlacedCards._meta.db_table} p
    JOIN near n ON n.id = p.allocation_id
    JOIN {Pool._meta.db_table} pp ON pp.id = n.pool_id
    LEFT JOIN {Cluster._meta.db_table} c ON c.id = pp.cluster_id
   WHERE {_NODE_CLUSTER_SQL} = (SELECT k FROM here)
), held AS (
  SELECT hostname, bit_or(gpu_mask) AS mask FROM spots GROUP BY hostname
),"""
    + _SWEEP_SQL.replace("{placed}", "win.id IN (SELECT allocation_id FROM spots)")
    + """
SELECT generation, peak, unplaced, NULL, NULL, recurring, maintenance FROM peaks
UNION ALL
SELECT NULL, NULL, NULL, hostname, mask, NULL, NULL FROM held"""
)


def window_holds_reusing(
    holds: WindowHolds | None,
    *,
    pool: Pool,
    gpu_model: GpuModel,
    start: datetime,
    end: datetime,
    exclude_allocation: int | None = None,
    per_node: bool = False,
) -> WindowHolds:
    """``holds`` when the caller already read them (with the cards per node when ``per_node``
    asks for them), else :func:`window_holds` now: the approval reads a window once for the
    card count, the shape and an extension's cards."""
    if holds is not None and (holds.held is not None or not per_node):
        return holds
    return window_holds(
        pool=pool,
        gpu_model=gpu_model,
        start=start,
        end=end,
        exclude_allocation=exclude_allocation,
        per_node=per_node,
    )


def _holds_sql(pool, gpu_model, start, end, exclude, per_node, profile) -> WindowHolds:
    params = {
        "pool": pool.pk,
        "model": gpu_model.pk,
        "profile": profile,
        "start": start,
        "end": end,
        "exclude": exclude or 0,  # ids start at 1
        # recurring reservations' dates are local: a day either side of UTC's covers them
        "first_day": start.astimezone(UTC).date() - timedelta(days=1),
        "last_day": end.astimezone(UTC).date() + timedelta(days=1),
    }
    with connection.cursor() as cursor:
        cursor.execute(_WINDOW_NODES_SQL if per_node else _WINDOW_SQL, params)
        rows = cursor.fetchall()
    # the one row of peaks has no hostname (a UNION ALL does not promise an order)
    ((generation, peak, unplaced, _, _, recurring, maintenance),) = [
        row for row in rows if row[3] is None
    ]
    if recurring or maintenance:  # occurrences, windows are not rows: the sweep runs in Python
        holds = _holds_orm(pool, gpu_model, start, end, exclude, per_node, profile,
                           recurring=recurring, maintenance=maintenance)  # fmt: skip
        return WindowHolds(generation, holds.peak, holds.unplaced_peak, holds.held, holds.away)
    if not per_node:  # the card count alone: unplaced ones are not told apart
        return WindowHolds(generation, int(peak), None, None)
    held = {host: mask for _, _, _, host, mask, _, _ in rows if host is not None}
    return WindowHolds(generation, int(peak), int(unplaced), held)


def _holds_orm(
    pool, gpu_model, start, end, exclude, per_node, profile, *, recurring=True, maintenance=True
) -> WindowHolds:
    """The same through the ORM; ``recurring`` / ``maintenance`` say whether the statement saw
    reservations / windows to read (SQLite reads both)."""
    holds = holding_allocations(
        pool=pool,
        gpu_model=gpu_model,
        start=start,
        end=end,
        exclude_allocation=exclude,
        profile=profile,
    )
    rows = list(holds.values_list("pk", "starts_at", "ends_at", "card_count"))
    occurring = []  # recurring occurrences: whole cards only, "any N cards"
    if recurring and not profile:
        occurring = recurring_intervals(pool, gpu_model, start, end)
    gone = []  # maintenance windows: cards (or slices of ``profile``) away
    if maintenance:
        gone = (
            maintenance_slice_intervals(pool, gpu_model, profile, start, end)
            if profile
            else maintenance_intervals(pool, gpu_model, start, end)
        )
    intervals = [(s, e, n) for pk, s, e, n in rows] + occurring + gone
    if not per_node:
        return WindowHolds(None, peak_cards(intervals, start, end), None, None)
    placed: dict[str, int] = {}
    placed_ids: set[int] = set()
    anywhere = (
        Allocation.objects.holding()
        .overlapping(start, end)
        .exclude(pk=exclude or 0)
        .filter(pool__in=_same_cluster_pools(pool))
    )
    spots = PlacedCards.objects.filter(allocation__in=anywhere.values("pk"))
    for allocation_id, hostname, mask in spots.values_list("allocation_id", "hostname", "gpu_mask"):
        placed_ids.add(allocation_id)
        placed[hostname] = placed.get(hostname, 0) | mask
    # an occurrence is "any N cards": the shape check lays it on the nodes as unplaced; a
    # maintenance window names its nodes: each holds all its cards
    away = maintenance_away_nodes(pool, start, end) if gone else ()
    for spot in away:
        placed[spot.node] = ALL_CARDS
    unplaced = [(s, e, n) for pk, s, e, n in rows if pk not in placed_ids] + occurring
    return WindowHolds(
        None, peak_cards(intervals, start, end), peak_cards(unplaced, start, end), placed, away
    )


def _same_cluster_pools(pool: Pool):
    """The pools whose nodes are of ``pool``'s cluster (the ORM twin of ``here`` above), as a
    subquery: no query of its own."""
    key = Coalesce(
        Case(
            When(cluster__credential_kind=CredentialKind.ENVIRONMENT, then=Value(None)),
            default=F("cluster_id"),
            output_field=IntegerField(),
        ),
        0,
    )
    here = Pool.objects.filter(pk=pool.pk).annotate(k=key).values("k")[:1]
    return Pool.objects.annotate(k=key).filter(k=Subquery(here)).values("pk")


def recurring_intervals(
    pool: Pool, gpu_model: GpuModel, start: datetime, end: datetime
) -> list[tuple[datetime, datetime, int]]:
    """``(starts_at, ends_at, cards)`` of the occurrences of the pool × model's active recurring
    reservations that overlap ``[start, end)``. One query."""
    rules = RecurringReservation.objects.holding(
        pool_id=pool.pk, gpu_model_id=gpu_model.pk, start=start, end=end
    )
    return [(s, e, r.card_count) for r in rules for s, e in occurrences(r.rule, start, end)]


def maintenance_intervals(
    pool: Pool, gpu_model: GpuModel, start: datetime, end: datetime
) -> list[tuple[datetime, datetime, int]]:
    """``(starts_at, ends_at, cards)`` of the planned maintenance windows overlapping
    ``[start, end)`` that take schedulable cards of ``gpu_model`` in ``pool`` away (see
    :func:`maintenance_intervals_by_pool_model`). One query."""
    found = maintenance_intervals_by_pool_model(
        start, end, pool_id=pool.pk, gpu_model_id=gpu_model.pk
    )
    return found.get((pool.pk, gpu_model.pk), [])


def maintenance_away_nodes(pool: Pool, start: datetime, end: datetime) -> tuple[AwayNode, ...]:
    """The nodes of ``pool`` that planned maintenance windows overlapping ``[start, end)`` take
    out, one :class:`pools.capacity.placement.AwayNode` per node and window, by host name then
    window end. One query."""
    rows = (
        MaintenanceWindow.nodes.through.objects.filter(
            overlap_q(start, end, via="maintenancewindow"),
            node__pool=pool,
            maintenancewindow__status=MaintenanceStatus.PLANNED,
        )
        .values_list(
            "node__hostname",
            "maintenancewindow_id",
            "maintenancewindow__title",
            "maintenancewindow__ends_at",
        )
        .order_by("node__hostname", "maintenancewindow__ends_at", "maintenancewindow_id")
    )
    return tuple(AwayNode(host, pk, title, until) for host, pk, title, until in rows)


def maintenance_slice_intervals(
    pool: Pool, gpu_model: GpuModel, profile: str, start: datetime, end: datetime
) -> list[tuple[datetime, datetime, int]]:
    """``(starts_at, ends_at, slices)`` of the planned maintenance windows overlapping
    ``[start, end)`` that take MIG slices of ``profile`` of ``gpu_model`` in ``pool`` away: the
    slices of that profile on the window's nodes' cards in MIG mode (the ones
    :func:`pools.inventory.selectors.mig_slices` counts,
    :data:`pools.inventory.models.SLICED_CARD`). No over-commit (a slice is a hardware
    partition). One query."""
    cards = Gpu.objects.sliced().filter(node__pool=pool, gpu_model=gpu_model)
    rows = (
        MigDevice.objects.filter(
            overlap_q(start, end, via="gpu__node__maintenance_windows"),
            gpu__in=cards.values("pk"),
            profile=profile,
            gpu__node__maintenance_windows__status=MaintenanceStatus.PLANNED,
        )
        .values_list(
            "gpu__node__maintenance_windows",
            "gpu__node__maintenance_windows__starts_at",
            "gpu__node__maintenance_windows__ends_at",
        )
        .annotate(n=Count("id"))
        .order_by()
    )
    return [(s, e, n) for _, s, e, n in rows]


def maintenance_slice_intervals_by_key(
    start: datetime, end: datetime, *, pool_ids: Iterable[int]
) -> dict[tuple[int, int, str], list[tuple[datetime, datetime, int]]]:
    """:func:`maintenance_slice_intervals` for every GPU model and MIG profile of the pools
    ``pool_ids`` at once, by ``(pool id, model id, profile)``: ``(starts_at, ends_at,
    slices)`` of each planned maintenance window overlapping ``[start, end)``, ``slices`` the
    instances of that profile on the window's nodes' cards in MIG mode. One query."""
    cards = Gpu.objects.sliced().filter(node__pool_id__in=list(pool_ids))
    rows = (
        MigDevice.objects.filter(
            overlap_q(start, end, via="gpu__node__maintenance_windows"),
            gpu__in=cards.values("pk"),
            gpu__node__maintenance_windows__status=MaintenanceStatus.PLANNED,
        )
        .values_list(
            "gpu__node__pool",
            "gpu__gpu_model",
            "profile",
            "gpu__node__maintenance_windows",
            "gpu__node__maintenance_windows__starts_at",
            "gpu__node__maintenance_windows__ends_at",
        )
        .annotate(n=Count("id"))
        .order_by()
    )
    found: dict[tuple[int, int, str], list[tuple[datetime, datetime, int]]] = {}
    for pool_id, model_id, profile, _window, s, e, n in rows:
        found.setdefault((pool_id, model_id, profile), []).append((s, e, n))
    return found


def maintenance_intervals_by_pool_model(
    start: datetime, end: datetime, *, pool_id: int | None = None, gpu_model_id: int | None = None
) -> dict[tuple[int, int], list[tuple[datetime, datetime, int]]]:
    """By ``(pool id, model id)``: ``(starts_at, ends_at, cards)`` of each planned maintenance
    window overlapping ``[start, end)`` (:func:`maintenance_windows_by_pool_model`). One query."""
    found = maintenance_windows_by_pool_model(
        start, end, pool_id=pool_id, gpu_model_id=gpu_model_id
    )
    return {key: [(s, e, n) for _, _, s, e, n in rows] for key, rows in found.items()}


def maintenance_windows_by_pool_model(
    start: datetime, end: datetime, *, pool_id: int | None = None, gpu_model_id: int | None = None
) -> dict[tuple[int, int], list[tuple[int, str, datetime, datetime, int]]]:
    """By ``(pool id, model id)``: ``(window id, title, starts_at, ends_at, cards)`` of each
    planned maintenance window overlapping ``[start, end)``, ``cards`` being ``ceil(away ×
    over-commit ratio)`` for the ``away`` schedulable cards of the model on the window's nodes
    in the pool, so that ``floor(schedulable × ratio) − held − cards`` never offers more than
    ``floor((schedulable − away) × ratio) − held`` (equal at ratio 1). Whole cards only: MIG
    slices are not counted. One query."""
    gpus = Gpu.objects.schedulable().filter(
        overlap_q(start, end, via="node__maintenance_windows"),
        node__pool__isnull=False,
        node__maintenance_windows__status=MaintenanceStatus.PLANNED,
    )
    if pool_id is not None:
        gpus = gpus.filter(node__pool_id=pool_id)
    if gpu_model_id is not None:
        gpus = gpus.filter(gpu_model_id=gpu_model_id)
    rows = (
        gpus.values_list(
            "node__pool",
            "gpu_model",
            "node__pool__overcommit_ratio",
            "node__maintenance_windows",
            "node__maintenance_windows__title",
            "node__maintenance_windows__starts_at",
            "node__maintenance_windows__ends_at",
        )
        .annotate(n=Count("id"))
        .order_by()
    )
    found: dict[tuple[int, int], list[tuple[int, str, datetime, datetime, int]]] = {}
    for pool, model, ratio, window, title, s, e, n in rows:
        found.setdefault((pool, model), []).append((window, title, s, e, ceil(n * ratio)))
    return found


def gpu_mask(gpus: Iterable[int]) -> int:
    """The bit mask of GPU indices (bit *i* for index *i*). Raises :class:`ValueError` for an
    index outside 0–62 (a mask must stay a positive 64-bit integer; nvidia-smi numbers a node's
    cards from 0 and the largest boards have 16)."""
    mask = 0
    for gpu in gpus:
        if not 0 <= gpu <= MAX_PLACED_INDEX:
            raise ValueError(f"GPU index {gpu} is outside 0–{MAX_PLACED_INDEX}")
        mask |= 1 << gpu
    return mask


@lru_cache(maxsize=4096)
def mask_gpus(mask: int) -> frozenset[int]:
    """The GPU indices of a bit mask (inverse of :func:`gpu_mask`; kept, as a pool's masks are
    a few hundred distinct values)."""
    return frozenset(i for i in range(mask.bit_length()) if mask >> i & 1)
