"""A generation of the allocations, for readers that keep sums of them in the shared cache (the
admin dashboard's plan of held cards per day: :func:`pools.dashboards.capacity.allocation_plan`,
issue #29 item 7).

At 100,800 GPUs the plan reads ~37,000 holding allocations' windows per page to find each
day's busiest instant (the timeline's same sweep cost ~380 ms of CPU a page there,
:func:`pools.capacity.selectors.timeline_peaks`). Its 56 days move only at midnight, so those
peaks change only when an allocation is written: they are kept per first day and generation.

Generation: a token of :mod:`pools.common.generation`, replaced once a transaction that wrote an
allocation commits (:func:`allocations_changed`). It is connected to ``post_save`` and
``post_delete`` of :class:`~pools.capacity.models.Allocation` in :mod:`pools.apps`; a writer
that bypasses them and changes what holds cards (status, window, card count, pool, model, MIG
profile) calls it itself: the approval's INSERT (:mod:`pools.capacity.services.requests`), the
demo's back-dated windows, the benchmarks' ``bulk_create``. The UPDATEs of a binding or a
status reason change nothing summed.
"""

from __future__ import annotations

from pools.common.generation import changed, generation

GENERATION_KEY = "capacity:allocations-generation"


def allocations_generation() -> str:
    """The current generation token (32 hex digits); a new one when the cache has none (first
    use, cleared, evicted), so no entry stored under an earlier token is read again."""
    return generation(GENERATION_KEY)


def allocations_changed(**_signal_kwargs) -> None:
    """Allocations were written: a new generation once the transaction commits (at once
    outside one)."""
    changed(GENERATION_KEY)
