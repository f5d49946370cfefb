"""The inventory census (``pools.inventory.selectors.inventory_census``) on a hand-counted
fleet, and its keeping per inventory generation: kept while nothing in the inventory is
written, read again after any write."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from factories import NodeFactory, PoolFactory, node_with_gpus

from pools.inventory.models import Gpu, Pool
from pools.inventory.selectors import inventory_census

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet():
    """
    node      pool   state  cards (A100 unless said)
    t-01      train  up     4: index 0 in error, index 1 in MIG mode
    t-02      train  drain  2
    d-01      dev    up     2 unrecognised 'v100'
    s-01      -      down   1
    cpu-01    dev    up     none
    """
    train = PoolFactory(slug="train")
    dev = PoolFactory(slug="dev")
    node = node_with_gpus(4, hostname="t-01", pool=train, driver_version="550.54.15")
    node.gpus.filter(index=0).update(health="error")
    node.gpus.filter(index=1).update(mig_mode=True)
    node_with_gpus(2, hostname="t-02", pool=train, state="drain", driver_version="550.54.15")
    odd = node_with_gpus(2, hostname="d-01", pool=dev, driver_version="550.54.15")
    odd.gpus.update(gpu_model=None, raw_model_name="v100")
    node_with_gpus(1, hostname="s-01", pool=None, state="down", driver_version="")
    NodeFactory(hostname="cpu-01", pool=dev)
    return {"train": train.pk, "dev": dev.pk}


def test_census_counts_by_hand(fleet):
    census = inventory_census()
    train, dev = fleet["train"], fleet["dev"]

    # cards: t-01 4 + t-02 2 = 6 in train, 2 in dev, 1 in no pool
    assert census.count_cards(lambda g: g.pool_id) == {train: 6, dev: 2, None: 1}
    # nodes: train t-01, t-02; dev d-01, cpu-01 (no cards); no pool s-01
    assert census.count_nodes(lambda g: g.pool_id) == {train: 2, dev: 2, None: 1}
    # schedulable: t-01's 4 less the card in error and the one in MIG mode; t-02 drained;
    # d-01's cards have no model
    assert census.count_cards(lambda g: g.pool_id, lambda g: g.schedulable) == {train: 2}
    assert census.count_cards(lambda g: g.pool_id, lambda g: g.sliced) == {train: 1}
    # healthy: up and not in error: t-01 3, d-01 2
    assert census.count_cards(lambda g: g.pool_id, lambda g: g.healthy) == {train: 3, dev: 2}
    assert census.count_cards(lambda g: g.raw_model_name, lambda g: g.gpu_model_id is None) == {
        "v100": 2
    }
    # and the same as counting the rows
    assert sum(census.count_cards(lambda g: 0).values()) == Gpu.objects.count() == 9


@pytest.mark.postgresql  # the stamp is PostgreSQL's
def test_census_is_kept_until_the_inventory_changes(fleet):
    inventory_census()
    with CaptureQueriesContext(connection) as kept:
        census = inventory_census()
    assert len(kept) == 1  # the generation only
    assert census.count_cards(lambda g: g.pool_id)[fleet["train"]] == 6

    node_with_gpus(3, hostname="t-03", pool=Pool.objects.get(slug="train"))
    with CaptureQueriesContext(connection) as read:
        census = inventory_census()
    assert len(read) == 2  # the generation moved: the grouped read again, one statement
    assert census.count_cards(lambda g: g.pool_id)[fleet["train"]] == 9
