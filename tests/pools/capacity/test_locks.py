"""The approval's two row locks taken by one statement (issue #29 item 7): both rows are
locked, in the one order (pool, then request), and a missing row is named as before."""

from __future__ import annotations

import threading

import pytest
from django.db import connections, transaction
from factories import CapacityRequestFactory, PoolFactory

from pools.capacity.locks import pool_and_request_lock
from pools.capacity.models import CapacityRequest
from pools.inventory.models import Pool

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def catalogue():
    """The GPU catalogue (the request factory asks for the L40S); a transactional test's flush
    empties it."""
    from pools.inventory.catalogue.sync import catalogue_sync
    from pools.inventory.models import GpuModel, GpuModelAlias

    catalogue_sync(GpuModel, GpuModelAlias)


def _lockable_elsewhere(table: str, pk: int) -> bool:
    """Whether another connection can lock row ``pk`` of ``table`` at once (``NOWAIT``)."""
    answer = []

    def probe():
        other = connections.create_connection("default")
        try:
            with other.cursor() as cursor:
                cursor.execute("BEGIN")
                try:
                    cursor.execute(f"SELECT id FROM {table} WHERE id = %s FOR UPDATE NOWAIT", [pk])
                    answer.append(True)
                except Exception:  # lock_not_available
                    answer.append(False)
                cursor.execute("ROLLBACK")
        finally:
            other.close()

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return answer[0]


@pytest.mark.postgresql  # row locks: fails, never skips, on another database
def test_one_statement_locks_the_pool_and_the_request():
    request = CapacityRequestFactory()
    pool = request.pool
    with transaction.atomic():
        locked_pool, locked = pool_and_request_lock(pool.pk, request)
        assert (locked_pool.pk, locked.pk) == (pool.pk, request.pk)
        assert locked.pool is locked_pool  # the locked pool reused, not read again
        assert not _lockable_elsewhere(Pool._meta.db_table, pool.pk)
        assert not _lockable_elsewhere(CapacityRequest._meta.db_table, request.pk)
    assert _lockable_elsewhere(Pool._meta.db_table, pool.pk)
    assert _lockable_elsewhere(CapacityRequest._meta.db_table, request.pk)


def test_a_missing_pool_or_request_is_named():
    request = CapacityRequestFactory()
    other_pool = PoolFactory()
    with transaction.atomic(), pytest.raises(Pool.DoesNotExist):
        pool_and_request_lock(other_pool.pk + 1000, request)
    gone = CapacityRequestFactory()
    gone_pk = gone.pk
    gone.delete()
    gone.pk = gone_pk
    with transaction.atomic(), pytest.raises(CapacityRequest.DoesNotExist):
        pool_and_request_lock(request.pool_id, gone)
