"""A generation of the allocations, for readers that keep sums of them in the shared cache (the
admin dashboard's plan of held cards per day: :func:`pools.dashboards.capacity.allocation_plan`,
issue #29 item 7).

At 100,800 GPUs the plan sums ~37,000 holding allocations per page (22 ms of PostgreSQL and
6 ms of Python on the bench machine). Its 56 instants (noon of each day) move only at midnight,
so those sums change only when an allocation is written: they are kept per day and generation.

Generation: a random token in the cache, replaced once a transaction that wrote an allocation
commits (:func:`allocations_changed`). It is connected to ``post_save`` and ``post_delete`` of
:class:`~pools.capacity.models.Allocation` in :mod:`pools.apps`; a writer that bypasses them and
changes what holds cards (status, window, card count, pool, model, MIG profile) calls it
itself: the approval's INSERT (:mod:`pools.capacity.services.requests`), the demo's back-dated
windows, the benchmarks' ``bulk_create``. The UPDATEs of a binding or a status reason change
nothing summed. After the commit, so that no reader stores sums read before it under the new
token; a reader that read the old token and then newer rows stores newer sums under an old
token, which no one reads again.
"""

from __future__ import annotations

import uuid

from django.core.cache import cache
from django.db import transaction

GENERATION_KEY = "capacity:allocations-generation"


def allocations_generation() -> str:
    """The current generation token (32 hex digits); a new one when the cache has none (first
    use, cleared, evicted), so no entry stored under an earlier token is read again."""
    token = cache.get(GENERATION_KEY)
    if token is None:
        cache.add(GENERATION_KEY, uuid.uuid4().hex, None)
        token = cache.get(GENERATION_KEY) or ""
    return token


def allocations_changed(**_signal_kwargs) -> None:
    """Allocations were written: a new generation once the transaction commits (at once
    outside one)."""
    transaction.on_commit(lambda: cache.set(GENERATION_KEY, uuid.uuid4().hex, None))
