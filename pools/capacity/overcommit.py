"""Windows that hold more cards than the inventory now offers: the card invariant read
backwards, after the inventory changed under allocations already granted (issue 27 item 4).

The invariant the approval keeps (:func:`pools.capacity.availability.pool_free_cards`): for a
pool × GPU model, the most cards held at once in a window
(:func:`pools.capacity.window.window_holds`'s ``peak``) never exceeds the usable cards,
``floor(schedulable × over-commit ratio)`` (:func:`pools.capacity.arithmetic.usable_cards`, the
schedulable count of :func:`pools.capacity.node_kinds.pool_nodes`). An inventory import that
takes cards away (a node down, a card gone or in error) can break it for windows granted
before; nothing is taken back automatically, but the import's report and the admin dashboard
say so, with the allocations concerned.

MIG slices the same way, per profile (issue 38): a card whose MIG layout changed (taken out of
MIG mode, re-cut into other profiles) under slice allocations leaves fewer slices of their
profile than they hold — reported with ``mig_profile`` set, ``peak`` and ``usable`` in slices
(no over-commit on slices: :func:`pools.capacity.availability.pool_free_slices`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Max, Sum

from pools.capacity.arithmetic import overlaps_any, peak_cards, spans_over, usable_cards
from pools.capacity.generation import allocations_generation
from pools.capacity.models import Allocation
from pools.capacity.window import (
    maintenance_intervals_by_pool_model,
    maintenance_slice_intervals_by_key,
)
from pools.common.generation import cached
from pools.inventory.models import Gpu, GpuModel, Pool
from pools.inventory.selectors import inventory_census, mig_slices
from pools.recurring.models import RecurringReservation
from pools.recurring.recurrence import occurrences


@dataclass(frozen=True)
class Overcommit:
    """One pool × GPU model whose holds from ``start`` to ``end`` (the last holding end) peak
    at ``peak`` cards against ``usable``; ``allocations`` are the ids of those holding cards
    at some instant where more are held than usable, oldest start first."""

    pool: str
    gpu_model: str
    usable: int
    peak: int
    start: datetime
    end: datetime
    allocations: tuple[int, ...]
    mig_profile: str = ""  # set: peak and usable count slices of this MIG profile

    def as_dict(self) -> dict[str, Any]:
        found = {
            "pool": self.pool,
            "gpu_model": self.gpu_model,
            "usable": self.usable,
            "peak": self.peak,
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "allocations": list(self.allocations),
        }
        if self.mig_profile:
            found["mig_profile"] = self.mig_profile
        return found

    def __str__(self) -> str:
        ids = ", ".join(f"#{i}" for i in self.allocations)
        units = f"MIG {self.mig_profile} slices" if self.mig_profile else "cards"
        return (
            f"{self.pool} {self.gpu_model}: up to {self.peak} {units} held until "
            f"{self.end:%Y-%m-%d %H:%M}, {self.usable} usable — allocations {ids}"
        )


def overcommitted_windows(*, now: datetime) -> list[Overcommit]:
    """Every pool × GPU model (and MIG profile) over-committed at some instant from ``now`` on
    (see the module doc), by pool, model slug and profile. A constant number of queries,
    whatever the number of pairs or of those over (issue #29's N+1): the pairs
    with the cards they hold from now on in all (:func:`_holding_pairs`, kept per allocations'
    generation) and the slice triples (one each); the pools and models (one each); then, for
    whole cards, the census (:func:`pools.inventory.selectors.inventory_census`, kept per
    inventory generation), the recurring reservations and the maintenance windows from now
    on (one each) and the holds of the pairs that could be over (one,
    :func:`_future_holds`); for slices, the slices there are, their holds and the maintenance
    windows over them (one each, :func:`_overcommitted_slices`). Every sweep runs here, in
    Python (:func:`pools.capacity.arithmetic.peak_cards`), over what those read.

    A pair whose allocations from now on hold, all added up, no more than its usable cards
    and that no recurring occurrence or maintenance window touches cannot peak above them (the
    peak at any instant is a sum of some of them), so it is not swept: the census counts the
    same schedulable cards as :func:`pools.capacity.node_kinds.pool_nodes`
    (:data:`pools.inventory.models.SCHEDULABLE_CARD`, any driver)."""
    pairs = _holding_pairs(now)
    triples = _slice_triples(now)
    if not pairs and not triples:
        return []
    pools = Pool.objects.in_bulk({p for p, *_ in pairs} | {p for p, *_ in triples})
    models = GpuModel.objects.in_bulk({m for _p, m, *_ in pairs} | {m for _p, m, *_ in triples})
    found = _overcommitted_cards(now, pairs, pools, models) if pairs else []
    if triples:
        found += _overcommitted_slices(now, triples, pools, models)
    found.sort(key=lambda o: (o.pool, o.gpu_model, o.mig_profile))
    return found


def _overcommitted_cards(
    now: datetime, pairs: list[tuple[int, int, datetime, int]], pools: dict, models: dict
) -> list[Overcommit]:
    """The whole cards' half of :func:`overcommitted_windows` over ``pairs`` (pool id, model
    id, last end, cards held in all): usable cards from the census, and for each pair that
    could be over the sweep of its holds, recurring occurrences and maintenance windows
    (what :func:`pools.capacity.window.window_holds` counts) from ``now`` to its last end.
    Four queries (the census's kept per inventory generation)."""
    schedulable = inventory_census().count_cards(
        lambda g: (g.pool_id, g.gpu_model_id), lambda g: g.schedulable
    )
    horizon = max(last for _p, _m, last, _h in pairs)
    # recurring occurrences and maintenance windows count in a pair's peak as holds do
    others: dict[tuple[int, int], list] = defaultdict(list)
    for rule in RecurringReservation.objects.overlapping_dates(now, horizon):
        spans = occurrences(rule.rule, now, horizon)
        others[(rule.pool_id, rule.gpu_model_id)] += [(s, e, rule.card_count) for s, e in spans]
    for key, spans in maintenance_intervals_by_pool_model(now, horizon).items():
        others[key] += spans
    usable_of = {
        (p, m): usable_cards(schedulable.get((p, m), 0), pools[p].overcommit_ratio)
        for p, m, _e, _h in pairs
    }
    candidates = {(p, m) for p, m, _e, held in pairs if held > usable_of[(p, m)] or others[(p, m)]}
    holds_of = _future_holds(candidates, now)
    found = []
    for pool_id, model_id, last, _held in pairs:
        if (pool_id, model_id) not in candidates:
            continue
        usable = usable_of[(pool_id, model_id)]
        holds = holds_of[(pool_id, model_id)]
        over = _over(holds, others[(pool_id, model_id)], now, last, usable)
        if over is not None:
            peak, concerned = over
            found.append(Overcommit(
                pools[pool_id].slug, models[model_id].slug, usable, peak, now, last, concerned
            ))  # fmt: skip
    return found


def _over(
    holds: list[tuple[int, datetime, datetime, int]],
    others: list[tuple[datetime, datetime, int]],
    now: datetime,
    last: datetime,
    usable: int,
) -> tuple[int, tuple[int, ...]] | None:
    """``(peak, concerned)`` when the allocations ``holds`` (``(id, starts_at, ends_at,
    cards)``) and the ``others`` (occurrences, maintenance windows: ``(starts_at, ends_at,
    cards)``) together peak above ``usable`` in ``[now, last)``, else ``None``. ``concerned``:
    the ids of the allocations during whose window (from ``now``) more than ``usable`` are held
    at some instant, by the invariant's own sweep line (:func:`spans_over`, one sweep for all
    of them), oldest start first."""
    intervals = [(s, e, n) for _i, s, e, n in holds] + others
    peak = peak_cards(intervals, now, last)
    if peak <= usable:
        return None
    over = spans_over(intervals, now, last, usable)
    ordered = sorted(holds, key=lambda h: (h[1], h[0]))
    return peak, tuple(pk for pk, s, e, _n in ordered if overlaps_any(over, max(s, now), e))


PAIRS_CACHE_S = 15 * 60
"""How long the pairs' sums are kept at most, whatever the allocations' generation says."""


def _holding_pairs(now: datetime) -> list[tuple[int, int, datetime, int]]:
    """``(pool id, model id, last end, cards)`` of the whole-card holding allocations ending
    after ``now``, summed per pair (one query), or kept: in the shared cache under the
    allocations' generation (:mod:`pools.capacity.generation`) with the instant they were
    summed at, at most :data:`PAIRS_CACHE_S`, read for any ``now`` from that instant on. At
    100,800 GPUs the sum over ~40,000 allocations took 55-105 ms of the admin dashboard
    (issue #29 item 7).

    Kept sums read later are exact where the caller needs them exact: the allocations that
    ended since are still in ``cards``, an upper bound that only makes more pairs candidates
    (each swept exactly, from ``now``, by :func:`_future_holds`); a pair's last end is the
    same while any of its allocations still ends after ``now`` (the latest does), and a pair
    whose last end has passed is dropped here.

    Summed afresh, and not kept, inside a transaction (:func:`pools.common.generation.cached`):
    its own uncommitted writes are in no generation yet (the import checks inside its
    transaction; the dashboard reads outside one, ``ATOMIC_REQUESTS`` being off)."""
    key = f"capacity:overcommit-pairs:{allocations_generation()}"

    def read() -> tuple[datetime, list]:
        rows = (
            Allocation.objects.holding()
            .whole_cards()
            .filter(ends_at__gt=now)
            .values_list("pool", "gpu_model")
            .annotate(last=Max("ends_at"), held=Sum("card_count"))
            .order_by()
        )
        return now, list(rows)

    def summed_by_now(found) -> bool:
        return isinstance(found, tuple) and found[0] <= now

    _summed_at, rows = cached(key, read, PAIRS_CACHE_S, fits=summed_by_now)
    return [(p, m, last, held) for p, m, last, held in rows if last > now]


def _future_holds(pairs: set[tuple[int, int]], now: datetime) -> dict[tuple[int, int], list]:
    """``(id, starts_at, ends_at, cards)`` of the whole-card holding allocations of ``pairs``
    (pool id, model id) ending after ``now``, by pair. One query, run for no pair too (ids no
    row has: 0), so that the page's query count does not depend on how many pairs are
    candidates."""
    rows = (
        Allocation.objects.holding()
        .whole_cards()
        .filter(
            ends_at__gt=now,
            pool_id__in=sorted({p for p, _m in pairs}) or [0],
            gpu_model_id__in=sorted({m for _p, m in pairs}) or [0],
        )
        .values_list("pool_id", "gpu_model_id", "id", "starts_at", "ends_at", "card_count")
    )
    found: dict[tuple[int, int], list] = defaultdict(list)
    for pool_id, model_id, pk, start, end, cards in rows:
        if (pool_id, model_id) in pairs:
            found[(pool_id, model_id)].append((pk, start, end, cards))
    return found


def _slice_triples(now: datetime) -> list[tuple[int, int, str, datetime]]:
    """``(pool id, model id, MIG profile, last end)`` of the slice allocations holding slices
    after ``now``. One query."""
    return list(
        Allocation.objects.holding()
        .slices()
        .filter(ends_at__gt=now)
        .values_list("pool", "gpu_model", "mig_profile")
        .annotate(last=Max("ends_at"))
        .order_by()
    )


def _overcommitted_slices(
    now: datetime, triples: list[tuple[int, int, str, datetime]], pools: dict, models: dict
) -> list[Overcommit]:
    """The slice allocations' half over ``triples``: per pool × model × profile holding slices
    from ``now``, the peak held (with the slices maintenance windows take away,
    :func:`pools.capacity.window.maintenance_slice_intervals_by_key`) against the slices of
    that profile the pool has now (:func:`pools.inventory.selectors.mig_slices`). Three
    queries: the slices there are, the holds, the maintenance windows."""
    pool_ids = sorted({p for p, *_ in triples})
    has = mig_slices(gpus=Gpu.objects.filter(node__pool_id__in=pool_ids))
    horizon = max(last for *_k, last in triples)
    holds: dict[tuple[int, int, str], list] = defaultdict(list)
    rows = (
        Allocation.objects.holding()
        .slices()
        .filter(ends_at__gt=now, pool_id__in=pool_ids)
        .values_list("pool_id", "gpu_model_id", "mig_profile", "id", "starts_at", "ends_at",
                     "card_count")
    )  # fmt: skip
    for pool_id, model_id, profile, pk, start, end, n in rows:
        holds[(pool_id, model_id, profile)].append((pk, start, end, n))
    away = maintenance_slice_intervals_by_key(now, horizon, pool_ids=pool_ids)
    found: list[Overcommit] = []
    for pool_id, model_id, profile, last in triples:
        key = (pool_id, model_id, profile)
        there = has.get((pool_id, model_id), {}).get(profile, 0)
        over = _over(holds[key], away.get(key, []), now, last, there)
        if over is not None:
            peak, concerned = over
            found.append(Overcommit(
                pools[pool_id].slug, models[model_id].slug, there, peak, now, last, concerned,
                profile,
            ))  # fmt: skip
    return found
