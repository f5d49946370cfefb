"""Generation tokens: a random token per cache key, replaced once a transaction that wrote what
the key stands for commits, for readers that keep sums of those rows in the shared cache under
the token (the capacity plan's and timeline's held cards: :mod:`pools.capacity.generation`; the
forecast's hourly demand: :mod:`pools.dashboards.demand_history`; the finance month's sums of
statements: :mod:`billing.generation`).

A reader puts :func:`generation` in its cache key; a writer calls :func:`changed`. The token is
replaced after the commit, so that no reader stores sums read before it under the new token; a
reader that read the old token and then newer rows stores newer sums under an old token, which
no one reads again. A key the cache lost (first use, cleared, evicted) gets a new token, so no
entry stored under an earlier one is read again.
"""

from __future__ import annotations

import uuid

from django.core.cache import cache
from django.db import transaction


def generation(key: str) -> str:
    """The current token under cache ``key`` (32 hex digits), stored without expiry; a new one
    when the cache has none. Two readers racing on an empty key agree (``cache.add``)."""
    token = cache.get(key)
    if token is None:
        cache.add(key, uuid.uuid4().hex, None)
        token = cache.get(key) or ""
    return token


def changed(key: str) -> None:
    """What ``key`` stands for was written: a new token once the current transaction commits
    (at once outside one; never if it rolls back)."""
    transaction.on_commit(lambda: cache.set(key, uuid.uuid4().hex, None))
