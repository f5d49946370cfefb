"""The inventory generation across connections, on PostgreSQL (pools.capacity.node_kinds and
migration 0017): another connection's uncommitted inventory write is not seen, and its commit
is seen by the very next read in this process, whose kept read it replaces; two writers of the
inventory wait for each other (the stamp is taken before any row) instead of deadlocking."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections, transaction
from factories import PoolFactory, node_with_gpus

from pools.capacity.node_kinds import pool_nodes
from pools.common.choices import NodeState
from pools.inventory.models import GpuModel, Node

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fleet():
    if connection.vendor != "postgresql":
        pytest.fail("the inventory generation needs PostgreSQL (triggers)")
    from pools.inventory.catalogue.sync import catalogue_sync
    from pools.inventory.models import GpuModelAlias

    catalogue_sync(GpuModel, GpuModelAlias)
    pool = PoolFactory(slug="p", name="P")
    for host in ("a-1", "a-2", "a-3"):
        node_with_gpus(4, hostname=host, pool=pool)
    return pool, GpuModel.objects.get(slug="a100_80g_sxm")


def schedulable(pool, model) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT generation FROM pools_inventorystamp")
        (generation,) = cursor.fetchone()
    return pool_nodes(pool=pool, gpu_model=model, generation=generation).schedulable(None)


def in_thread(work, started: threading.Event, release: threading.Event, errors: list):
    def run():
        try:
            with transaction.atomic():
                work()
                started.set()
                assert release.wait(timeout=30)
        except Exception as exc:  # reported to the test
            errors.append(exc)
            started.set()
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_an_uncommitted_write_is_not_seen_and_its_commit_is(fleet):
    pool, model = fleet
    assert schedulable(pool, model) == 12
    started, release, errors = threading.Event(), threading.Event(), []
    thread = in_thread(
        lambda: Node.objects.filter(hostname="a-1").update(state=NodeState.DOWN),
        started,
        release,
        errors,
    )
    assert started.wait(timeout=30)
    assert schedulable(pool, model) == 12  # not committed yet: the kept read stands
    release.set()
    thread.join(timeout=30)
    assert errors == []
    assert schedulable(pool, model) == 8  # committed: read again


def test_two_inventory_writers_wait_for_each_other(fleet):
    """Writer 1 changes a-1, and later a-2, in one transaction; writer 2 changes a-2, then a-1,
    in between. Were the stamp taken after each statement's rows, writer 2 would hold a-2 while
    waiting for the stamp, and writer 1 wanting a-2 would deadlock (PostgreSQL aborts one).
    Taken before, writer 2 waits at its first statement, touching nothing, and both commit."""
    pool, model = fleet
    started, go, errors = threading.Event(), threading.Event(), []

    def first():
        try:
            with transaction.atomic():
                Node.objects.filter(hostname="a-1").update(state=NodeState.DOWN)
                started.set()
                assert go.wait(timeout=30)
                Node.objects.filter(hostname="a-2").update(state=NodeState.MAINTENANCE)
        except Exception as exc:
            errors.append(exc)
            started.set()
        finally:
            connections.close_all()

    def second():
        try:
            with transaction.atomic():
                Node.objects.filter(hostname="a-2").update(state=NodeState.DOWN)
                Node.objects.filter(hostname="a-1").update(state=NodeState.DRAIN)
        except Exception as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    one = threading.Thread(target=first)
    one.start()
    assert started.wait(timeout=30)
    two = threading.Thread(target=second)
    two.start()
    two.join(timeout=1)
    assert two.is_alive()  # writer 2 waits for writer 1
    go.set()
    one.join(timeout=30)
    two.join(timeout=30)
    assert errors == []
    states = dict(Node.objects.values_list("hostname", "state"))
    # writer 1 committed first; writer 2's statements ran after it
    assert (states["a-1"], states["a-2"], states["a-3"]) == ("drain", "down", "up")
    assert schedulable(pool, model) == 4
