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
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Max

from pools.capacity.arithmetic import peak_cards, usable_cards
from pools.capacity.lifecycle import HOLDING_STATUSES
from pools.capacity.models import Allocation
from pools.capacity.node_kinds import pool_nodes
from pools.capacity.window import holding_allocations, window_holds
from pools.inventory.models import GpuModel, Pool


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

    def as_dict(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "gpu_model": self.gpu_model,
            "usable": self.usable,
            "peak": self.peak,
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "allocations": list(self.allocations),
        }

    def __str__(self) -> str:
        ids = ", ".join(f"#{i}" for i in self.allocations)
        return (
            f"{self.pool} {self.gpu_model}: up to {self.peak} cards held until "
            f"{self.end:%Y-%m-%d %H:%M}, {self.usable} usable — allocations {ids}"
        )


def overcommitted_windows(*, now: datetime) -> list[Overcommit]:
    """Every pool × GPU model over-committed at some instant from ``now`` on (see the module
    doc), by pool and model slug. One query for the pairs, then one per pair with holds; the
    allocations concerned are looked for only where the peak is over."""
    pairs = (
        Allocation.objects.whole_cards()
        .filter(status__in=HOLDING_STATUSES, ends_at__gt=now)
        .values_list("pool", "gpu_model")
        .annotate(last=Max("ends_at"))
        .order_by()
    )
    found = []
    if not pairs:
        return found
    pools = Pool.objects.in_bulk({p for p, _m, _e in pairs})
    models = GpuModel.objects.in_bulk({m for _p, m, _e in pairs})
    for pool_id, model_id, last in pairs:
        pool, model = pools[pool_id], models[model_id]
        holds = window_holds(pool=pool, gpu_model=model, start=now, end=last)
        nodes = pool_nodes(pool=pool, gpu_model=model, generation=holds.generation)
        usable = usable_cards(nodes.schedulable(None), pool.overcommit_ratio)
        if holds.peak <= usable:
            continue
        found.append(
            Overcommit(
                pool.slug,
                model.slug,
                usable,
                holds.peak,
                now,
                last,
                _concerned(pool, model, now, last, usable),
            )
        )
    found.sort(key=lambda o: (o.pool, o.gpu_model))
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
