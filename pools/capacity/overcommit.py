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

from pools.capacity.arithmetic import peak_cards, usable_cards
from pools.capacity.availability import pool_slices
from pools.capacity.generation import allocations_generation
from pools.capacity.models import Allocation
from pools.capacity.node_kinds import pool_nodes
from pools.capacity.window import (
    holding_allocations,
    maintenance_intervals_by_pool_model,
    window_holds,
)
from pools.common.generation import cached
from pools.inventory.models import GpuModel, Pool
from pools.inventory.selectors import inventory_census
from pools.recurring.models import RecurringReservation


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
    """Every pool × GPU model over-committed at some instant from ``now`` on (see the module
    doc), by pool and model slug. One query for the pairs with the cards they hold from now on
    in all (kept per allocations' generation: :func:`_holding_pairs`; and one for the
    slices'), the census of cards
    (:func:`pools.inventory.selectors.inventory_census`, kept per inventory generation), the
    recurring reservations and maintenance windows from now on (two), the holds of the pairs
    that could be over (one, :func:`_future_holds`, swept here), and one per pair with recurring
    occurrences or maintenance windows (:func:`pools.capacity.window.window_holds`, which
    counts them); the allocations concerned are looked for only where the peak is over.

    A pair whose allocations from now on hold, all added up, no more than its usable cards
    cannot peak above them (the peak at any instant is a sum of some of them), so it is not
    swept: the census counts the same schedulable cards as :func:`pool_nodes`
    (:data:`pools.inventory.models.SCHEDULABLE_CARD`, any driver)."""
    pairs = _holding_pairs(now)
    found = _overcommitted_slices(now)
    if not pairs:
        return found
    pools = Pool.objects.in_bulk({p for p, _m, _e, _h in pairs})
    models = GpuModel.objects.in_bulk({m for _p, m, _e, _h in pairs})
    schedulable = inventory_census().count_cards(
        lambda g: (g.pool_id, g.gpu_model_id), lambda g: g.schedulable
    )
    horizon = max(last for _p, _m, last, _h in pairs)
    # recurring occurrences and maintenance windows count in a pair's peak too: swept always
    swept_always = {
        (r.pool_id, r.gpu_model_id)
        for r in RecurringReservation.objects.overlapping_dates(now, horizon)
    } | set(maintenance_intervals_by_pool_model(now, horizon))
    usable_now = {
        (p, m): usable_cards(schedulable.get((p, m), 0), pools[p].overcommit_ratio)
        for p, m, _e, _h in pairs
    }
    candidates = {
        (p, m) for p, m, _e, held in pairs if held > usable_now[(p, m)]
    } - swept_always  # even every hold at once fits the others
    holds_of = _future_holds(candidates, now)
    for pool_id, model_id, last, _held in pairs:
        pool, model = pools[pool_id], models[model_id]
        if (pool_id, model_id) in swept_always:
            holds = window_holds(pool=pool, gpu_model=model, start=now, end=last)
            nodes = pool_nodes(pool=pool, gpu_model=model, generation=holds.generation)
            usable, peak = usable_cards(nodes.schedulable(None), pool.overcommit_ratio), holds.peak
        elif (pool_id, model_id) in candidates:
            usable = usable_now[(pool_id, model_id)]
            peak = peak_cards(holds_of[(pool_id, model_id)], now, last)
        else:
            continue
        if peak <= usable:
            continue
        found.append(
            Overcommit(
                pool.slug,
                model.slug,
                usable,
                peak,
                now,
                last,
                _concerned(pool, model, now, last, usable),
            )
        )
    found.sort(key=lambda o: (o.pool, o.gpu_model, o.mig_profile))
    return found


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
    """``(starts_at, ends_at, cards)`` of the whole-card holding allocations of ``pairs``
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
        .values_list("pool_id", "gpu_model_id", "starts_at", "ends_at", "card_count")
    )
    found: dict[tuple[int, int], list] = defaultdict(list)
    for pool_id, model_id, start, end, cards in rows:
        if (pool_id, model_id) in pairs:
            found[(pool_id, model_id)].append((start, end, cards))
    return found


def _overcommitted_slices(now: datetime) -> list[Overcommit]:
    """The slice allocations' half: per pool × model × profile holding slices from ``now``,
    the peak held against the slices of that profile the pool has now. One query for the
    triples, then two per triple."""
    triples = (
        Allocation.objects.holding()
        .slices()
        .filter(ends_at__gt=now)
        .values_list("pool", "gpu_model", "mig_profile")
        .annotate(last=Max("ends_at"))
        .order_by()
    )
    found: list[Overcommit] = []
    if not triples:
        return found
    pools = Pool.objects.in_bulk({p for p, _m, _f, _e in triples})
    models = GpuModel.objects.in_bulk({m for _p, m, _f, _e in triples})
    for pool_id, model_id, profile, last in triples:
        pool, model = pools[pool_id], models[model_id]
        holds = window_holds(pool=pool, gpu_model=model, start=now, end=last, profile=profile)
        has = pool_slices(pool=pool, gpu_model=model).get(profile, 0)
        if holds.peak <= has:
            continue
        rows = list(
            holding_allocations(pool=pool, gpu_model=model, start=now, end=last, profile=profile)
            .order_by("starts_at", "id")
            .values_list("id", "starts_at", "ends_at", "card_count")
        )
        intervals = [(s, e, n) for _i, s, e, n in rows]
        concerned = tuple(
            pk for pk, s, e, _n in rows if peak_cards(intervals, max(s, now), e) > has
        )
        found.append(
            Overcommit(pool.slug, model.slug, has, holds.peak, now, last, concerned, profile)
        )
    return found


def _concerned(pool: Pool, model: GpuModel, now: datetime, last: datetime, usable: int):
    """Holding allocations during whose window (from ``now``) more than ``usable`` cards are
    held at some instant, by the invariant's own sweep line."""
    rows = list(
        holding_allocations(pool=pool, gpu_model=model, start=now, end=last)
        .order_by("starts_at", "id")
        .values_list("id", "starts_at", "ends_at", "card_count")
    )
    intervals = [(s, e, n) for _i, s, e, n in rows]
    return tuple(pk for pk, s, e, _n in rows if peak_cards(intervals, max(s, now), e) > usable)
