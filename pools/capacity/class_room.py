"""Room for a grant when workload classes never share a card (issue 36): the rule of
:mod:`pools.classes.sharing` over a pool × GPU model's holding allocations. The approval
calls :func:`class_room_check` under the pool lock, after the count check."""

from __future__ import annotations

from datetime import datetime

from pools.capacity.node_kinds import pool_nodes
from pools.capacity.window import holding_allocations
from pools.classes.models import WorkloadClass
from pools.classes.sharing import ClassHold, peak_cards_needed
from pools.common.errors import InsufficientCapacity
from pools.inventory.models import GpuModel, Pool


def class_holds(
    *, pool: Pool, gpu_model: GpuModel, start: datetime, end: datetime, exclude: int | None = None
) -> list[ClassHold]:
    """The whole-card holding allocations of ``pool`` × ``gpu_model`` overlapping
    ``[start, end)`` as :class:`ClassHold` (class id and its exclusive flag). One query."""
    rows = holding_allocations(
        pool=pool, gpu_model=gpu_model, start=start, end=end, exclude_allocation=exclude
    ).values_list(
        "starts_at", "ends_at", "card_count", "workload_class", "workload_class__exclusive"
    )
    return [ClassHold(s, e, n, g, bool(x)) for s, e, n, g, x in rows]


def class_room_need(
    *,
    pool: Pool,
    gpu_model: GpuModel,
    start: datetime,
    end: datetime,
    cards: int,
    workload_class: WorkloadClass | None,
    exclude: int | None = None,
) -> tuple[int, int]:
    """``(needed, schedulable)``: the most cards needed at once in ``[start, end)`` with
    ``cards`` of ``workload_class`` added to the holds (:func:`peak_cards_needed`), and the
    cards the pool has."""
    holds = class_holds(pool=pool, gpu_model=gpu_model, start=start, end=end, exclude=exclude)
    group = workload_class.pk if workload_class is not None else None
    exclusive = workload_class is not None and workload_class.exclusive
    holds.append(ClassHold(start, end, cards, group, exclusive))
    needed = peak_cards_needed(holds, start=start, end=end, overcommit_ratio=pool.overcommit_ratio)
    schedulable = pool_nodes(pool=pool, gpu_model=gpu_model, generation=None).schedulable(None)
    return needed, schedulable


def class_room_check(
    *,
    pool: Pool,
    gpu_model: GpuModel,
    start: datetime,
    end: datetime,
    cards: int,
    workload_class: WorkloadClass | None,
    exclude: int | None = None,
) -> None:
    """Raise :class:`InsufficientCapacity` (data ``needed``, ``schedulable``, ``requested``)
    when ``cards`` of ``workload_class`` over ``[start, end)`` added to the holds would need
    more cards than ``pool`` has schedulable, each class on cards of its own; else nothing.

    Without over-commit (ratio at most 1) every class already has whole cards: the need is
    the cards held, which the count check has just bounded, so nothing is read then."""
    if pool.overcommit_ratio <= 1:
        return
    needed, schedulable = class_room_need(
        pool=pool, gpu_model=gpu_model, start=start, end=end, cards=cards,
        workload_class=workload_class, exclude=exclude,
    )  # fmt: skip
    if needed > schedulable:
        raise InsufficientCapacity(
            f"Insufficient capacity: with every workload class on cards of its own (never two "
            f"classes on one card, exclusive classes never shared), the window would need "
            f"{needed} {gpu_model.name} cards in {pool.name}, which has {schedulable}.",
            free=0,
            requested=cards,
            needed=needed,
            schedulable=schedulable,
            pool=pool.slug,
            gpu_model=gpu_model.slug,
        )
