"""Generation tokens: a random token per cache key, replaced once a transaction that wrote what
the key stands for commits, for readers that keep sums of those rows in the shared cache under
the token (the capacity plan's and timeline's held cards: :mod:`pools.capacity.generation`; the
forecast's hourly demand: :mod:`pools.dashboards.demand_history`; the finance month's sums of
statements: :mod:`billing.generation`).

A reader puts :func:`generation` in its cache key and reads and keeps its entry through
:func:`cached`; a writer calls :func:`changed`. The token is replaced after the commit, so that
no reader stores sums read before it under the new token; a reader that read the old token and
then newer rows stores newer sums under an old token, which no one reads again. A key the cache
lost (first use, cleared, evicted) gets a new token, so no entry stored under an earlier one is
read again.

Inside a transaction the token says nothing: rows the transaction wrote are in no generation
until it commits (and in none at all if it rolls back), so a reader there neither reads an entry
(it would miss its own writes) nor keeps one (others would read rows that may never commit);
:func:`cached` reads afresh there. Pages run outside one (``ATOMIC_REQUESTS`` is off); the
imports, approvals and closes that check inside theirs read afresh.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.cache import cache
from django.db import connection, transaction

T = TypeVar("T")

_MISSING = object()


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


def in_transaction() -> bool:
    """Whether the default connection is inside ``atomic`` (a test's own transaction too: tests
    that read as a page reads patch this)."""
    return connection.in_atomic_block


def cached(
    key: str,
    read: Callable[[], T],
    timeout: int,
    *,
    fits: Callable[[Any], bool] = lambda found: True,
) -> T:
    """The entry under cache ``key`` (a key that names a :func:`generation` token), or
    ``read()`` kept there for at most ``timeout`` seconds when there is none or ``fits(entry)``
    is false (an entry of another shape, or kept for another instant). Inside a transaction
    (:func:`in_transaction`) ``read()`` alone: no entry is read or kept (the module says why)."""
    if in_transaction():
        return read()
    found = cache.get(key, _MISSING)
    if found is not _MISSING and fits(found):
        return found
    found = read()
    cache.set(key, found, timeout)
    return found
