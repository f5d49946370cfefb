"""Row locks, in the one order every service takes them: Pool, then CapacityRequest, then
Allocation. The pool row owns the capacity invariant, so approvals, extensions and releases in
one pool serialise on it; different pools never wait for each other.
"""

from __future__ import annotations

from typing import Any

from django.db import connection

from pools.capacity.models import Allocation, CapacityRequest
from pools.capacity.rows import RowReader
from pools.inventory.models import Pool

# The two locks of every approval as plain statements (issues #16 and #29 item 7: the approval
# within 2x a bare transaction; pools.capacity.rows).


_POOLS = RowReader(Pool)
_REQUESTS = RowReader(CapacityRequest)


def pool_lock(pool_id: int) -> Pool:
    """Lock and return the pool row (``SELECT … FOR UPDATE``); call inside ``atomic()``.
    Raises :class:`Pool.DoesNotExist`."""
    pool = _POOLS.locked(pool_id)
    if pool is None:
        raise Pool.DoesNotExist(f"No pool {pool_id}.")
    return pool


def request_lock(request_id: int) -> CapacityRequest:
    return (
        CapacityRequest.objects.select_for_update(of=("self",))
        .select_related("team", "pool", "gpu_model")
        .get(pk=request_id)
    )


def request_lock_reusing(request: CapacityRequest, *loaded: Any) -> CapacityRequest:
    """Lock ``request``'s row as :func:`request_lock` does, without joining its team, pool and
    GPU model: each is taken from ``loaded`` (objects the caller holds, e.g. the locked pool)
    or from ``request``'s own loaded relations when the locked row still points at it, and read
    by Django on first use otherwise. The approval's hot path (issue #16: the service within 2×
    a bare transaction of its statements; the joins cost more to build than to run)."""
    locked = _REQUESTS.locked(request.pk)
    if locked is None:
        raise CapacityRequest.DoesNotExist(f"No request {request.pk}.")
    return _reusing(locked, request, loaded)


def pool_and_request_lock(pool_id: int, request: CapacityRequest, *loaded: Any) -> tuple:
    """``(pool, request)``: :func:`pool_lock` then :func:`request_lock_reusing` in one
    statement (``SELECT … FROM pool, request … FOR UPDATE`` locks the rows in the order the
    FROM names them: the pool first, as everywhere). One round trip fewer for every approval
    (issue #29 item 7: on a loaded machine each costs a wake-up of client and server). Raises
    :class:`Pool.DoesNotExist` or :class:`CapacityRequest.DoesNotExist`."""
    found = _pool_and_request(pool_id, request.pk)
    if found is None:  # one of them is missing: say which, as the separate locks would
        pool = pool_lock(pool_id)
        return pool, request_lock_reusing(request, pool, *loaded)
    pool, locked = found
    return pool, _reusing(locked, request, (pool, *loaded))


def _pool_and_request(pool_id: int, request_id: int) -> tuple[Pool, CapacityRequest] | None:
    sql = (
        f"SELECT {_POOLS.qualified('p')}, {_REQUESTS.qualified('r')} "
        f"FROM {Pool._meta.db_table} p, {CapacityRequest._meta.db_table} r "
        "WHERE p.id = %s AND r.id = %s"
    )
    if connection.features.has_select_for_update:
        sql += " FOR UPDATE"
    with connection.cursor() as cursor:
        cursor.execute(sql, [pool_id, request_id])
        row = cursor.fetchone()
    if row is None:
        return None
    split = len(_POOLS.fields)
    return _POOLS.model_of(row[:split]), _REQUESTS.model_of(row[split:])


def _reusing(locked: CapacityRequest, request: CapacityRequest, loaded: tuple) -> CapacityRequest:
    """``locked`` with its team, pool and GPU model taken from ``loaded`` or ``request``'s
    own loaded relations where the ids match (see :func:`request_lock_reusing`)."""
    for name in ("team", "pool", "gpu_model"):
        field = CapacityRequest._meta.get_field(name)
        wanted = getattr(locked, field.attname)
        if wanted is None:
            field.set_cached_value(locked, None)
            continue
        known = [obj for obj in loaded if isinstance(obj, field.related_model)]
        if field.is_cached(request):
            known.append(field.get_cached_value(request))
        for obj in known:
            if obj is not None and obj.pk == wanted:
                field.set_cached_value(locked, obj)
                break
    return locked


def allocation_lock(allocation_id: int) -> Allocation:
    return (
        Allocation.objects.select_for_update(of=("self",))
        .select_related("team", "pool", "gpu_model")
        .get(pk=allocation_id)
    )
