"""The capacity calendar of an NVIDIA driver group (issue 32 item 2): the week and month views
across every pool × GPU model in which the group's nodes hold schedulable cards.

Allocations hold cards of a pool × GPU model, not of a driver branch (the scheduler places
them on any of the pool's nodes of the model), so a driver group has no free cards of its own:
per day the calendar shows, for each pool × model the group has cards in, the cards free there
over the whole day (:func:`pools.calendar.week.free_per_day`, the pool calendar's own
figure) beside the group's schedulable cards there. A driver upgrade of the group fits a day
on which every column's free cards reach the group's cards (its nodes can leave without a
granted card going short, at over-commit ratio 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from django.db.models import Count

from pools.calendar.week import free_per_day, local_midnight, week_name
from pools.inventory.models import DriverGroup, Gpu, GpuModel, Pool


@dataclass(frozen=True)
class GroupColumn:
    """A pool × GPU model the group has ``group_cards`` schedulable cards in."""

    pool: Pool
    gpu_model: GpuModel
    group_cards: int


@dataclass(frozen=True)
class GroupDay:
    """One local day: each column with its free cards that day, in the columns' order."""

    day: date
    free: list[tuple[GroupColumn, int]]
    week: str


def group_columns(group: DriverGroup) -> list[GroupColumn]:
    """The pools × GPU models the group's nodes hold schedulable cards in, by pool and model
    name. Three queries (the cards, their pools, their models)."""
    rows = (
        Gpu.objects.schedulable()
        .filter(node__driver_group=group, node__pool__isnull=False)
        .values_list("node__pool", "gpu_model")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts = {(pool_id, model_id): n for pool_id, model_id, n in rows}
    pools = Pool.objects.in_bulk({pool_id for pool_id, _ in counts})
    models = GpuModel.objects.in_bulk({model_id for _, model_id in counts})
    columns = [GroupColumn(pools[p], models[m], n) for (p, m), n in counts.items()]
    return sorted(columns, key=lambda c: (c.pool.name, c.gpu_model.name))


def group_days(*, columns: list[GroupColumn], first: date, count: int) -> list[GroupDay]:
    """The ``count`` local days from ``first``: each column's free cards per day. Five
    queries per column (:func:`free_per_day`), whatever the number of days or allocations."""
    bounds = [local_midnight(first + timedelta(days=i)) for i in range(count + 1)]
    free = [free_per_day(pool=c.pool, gpu_model=c.gpu_model, bounds=bounds) for c in columns]
    days = []
    for i in range(count):
        day = first + timedelta(days=i)
        cells = [(column, free[at][i]) for at, column in enumerate(columns)]
        days.append(GroupDay(day, cells, week_name(day)))
    return days
