"""The inventory read once per inventory change (pools.capacity.node_kinds): every kind of write
to the tables it reads changes the PostgreSQL inventory generation, so the next read sees it;
a rolled-back change is never served; and the kinds are what the inventory says, by hand.

Pool ``p``: ``a-1``, ``a-2`` up with 4 A100 each (driver 550, CUDA 12.4), ``a-3`` up with 2.
Kinds: {0..3} × [a-1, a-2] and {0, 1} × [a-3]; schedulable 4 + 4 + 2 = 10.
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from factories import GpuFactory, PoolFactory, node_with_gpus

from pools.capacity.node_kinds import pool_nodes
from pools.capacity.window import gpu_mask, mask_gpus
from pools.common.choices import NodeState
from pools.inventory.models import DriverGroup, Gpu, GpuModel, Node

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet():
    pool = PoolFactory(slug="p", name="P")
    for host, cards in (("a-1", 4), ("a-2", 4), ("a-3", 2)):
        node_with_gpus(cards, hostname=host, pool=pool)
    return pool, GpuModel.objects.get(slug="a100_80g_sxm")


def generation() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT generation FROM pools_inventorystamp")
        return cursor.fetchone()[0]


def read(pool, model):
    return pool_nodes(pool=pool, gpu_model=model, generation=generation())


def test_kinds_by_hand(fleet):
    nodes = read(*fleet)
    assert [(sorted(k.gpus), k.hostnames, k.max_cuda) for k in nodes.kinds] == [
        ([0, 1, 2, 3], ("a-1", "a-2"), "12.4"),
        ([0, 1], ("a-3",), "12.4"),
    ]
    assert nodes.kind_of == {"a-1": 0, "a-2": 0, "a-3": 1}
    assert (nodes.schedulable(None), nodes.schedulable("12.4"), nodes.schedulable("12.8")) == (
        10,
        10,
        0,
    )


def test_a_kept_read_costs_no_query(fleet, django_assert_num_queries):
    pool, model = fleet
    now = generation()
    pool_nodes(pool=pool, gpu_model=model, generation=now)
    with django_assert_num_queries(0):
        again = pool_nodes(pool=pool, gpu_model=model, generation=now)
    assert again.schedulable(None) == 10


@pytest.mark.parametrize(
    ("change", "schedulable"),
    [
        # a card in error: 10 - 1
        (lambda: Gpu.objects.filter(node__hostname="a-1", index=0).update(health="error"), 9),
        # a node down, through save(): 10 - 4
        (lambda: _save(Node.objects.get(hostname="a-2"), state=NodeState.DOWN), 6),
        # a new card on a-3, and a whole new node (bulk and single inserts)
        (lambda: GpuFactory(node=Node.objects.get(hostname="a-3"), index=2), 11),
        (lambda: node_with_gpus(8, hostname="a-4", pool=Node.objects.get(hostname="a-1").pool), 18),
        # cards deleted
        (lambda: Gpu.objects.filter(node__hostname="a-3").delete(), 8),
        # the node moved to another pool
        (lambda: Node.objects.filter(hostname="a-1").update(pool=PoolFactory(slug="q")), 6),
        # raw SQL the ORM never saw
        (lambda: _sql("UPDATE pools_node SET state = 'down' WHERE hostname = 'a-3'"), 8),
    ],
    ids=["card-error", "node-down", "card-added", "node-added", "cards-deleted", "node-moved",
         "raw-sql"],
)  # fmt: skip
def test_every_inventory_write_is_seen_by_the_next_read(fleet, change, schedulable):
    pool, model = fleet
    assert read(pool, model).schedulable(None) == 10
    before = generation()
    change()
    assert generation() != before
    assert read(pool, model).schedulable(None) == schedulable


def test_a_driver_group_and_the_catalogue_are_inventory_too(fleet):
    pool, model = fleet
    assert read(pool, model).schedulable("12.4") == 10
    DriverGroup.objects.filter(branch=550).update(max_cuda="12.2")
    assert read(pool, model).schedulable("12.4") == 0
    # the catalogue's NVLink facts fill in domains no capture gave: 4 SXM cards are one board;
    # a model without NVLink has each card alone
    assert read(pool, model).kinds[0].domains == (frozenset({0, 1, 2, 3}),)
    GpuModel.objects.filter(pk=model.pk).update(nvlink_gbps=None)
    model.refresh_from_db()
    assert read(pool, model).kinds[0].domains == tuple(frozenset({i}) for i in range(4))


def test_a_rolled_back_change_is_never_served(fleet):
    """Read inside a transaction that changed the inventory, then roll it back: the next read
    sees the inventory as committed (the generation read inside is never seen again)."""
    pool, model = fleet
    assert read(pool, model).schedulable(None) == 10
    with pytest.raises(RuntimeError), transaction.atomic():
        Node.objects.filter(hostname="a-1").update(state=NodeState.DOWN)
        assert read(pool, model).schedulable(None) == 6
        raise RuntimeError("roll back")
    assert read(pool, model).schedulable(None) == 10
    Node.objects.filter(hostname="a-2").update(state=NodeState.DOWN)  # a new change reads anew
    assert read(pool, model).schedulable(None) == 6


def test_masks_by_hand():
    assert gpu_mask([0, 1, 7]) == 0b10000011  # 131: bits 0, 1 and 7
    assert mask_gpus(131) == frozenset({0, 1, 7})
    assert gpu_mask([62]) == 2**62
    with pytest.raises(ValueError, match="GPU index 63 is outside 0–62"):
        gpu_mask([63])


def _save(obj, **fields):
    for name, value in fields.items():
        setattr(obj, name, value)
    obj.save()


def _sql(statement: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement)


def test_cards_above_index_62_are_counted_never_placed(fleet):
    """A node numbering a card 70 (only a hand-edited inventory does): the card counts for
    the card invariant, and a shape is placed on the others (a placement is a 64-bit mask)."""
    from datetime import timedelta

    from factories import next_week_9am

    from pools.capacity.placement import Shape
    from pools.capacity.shapes import shape_fit

    pool, model = fleet
    Gpu.objects.filter(node__hostname="a-3", index=1).update(index=70)
    assert read(pool, model).schedulable(None) == 10
    start = next_week_9am()
    two = Shape(cards_per_node=2, nodes=3, one_nvlink_domain=False)
    fit = shape_fit(pool=pool, gpu_model=model, shape=two, start=start, end=start + timedelta(1))
    assert not fit.fits  # a-3 has one placeable card left
    assert fit.largest == Shape(cards_per_node=2, nodes=2, one_nvlink_domain=False)


def test_recorded_domains_sharing_a_card_read_as_unknown(fleet):
    pool, model = fleet
    Node.objects.filter(hostname="a-3").update(nvlink_domains=[[0, 1], [1]])
    kinds = {k.hostnames: k.domains for k in read(pool, model).kinds}
    assert kinds[("a-3",)] is None
