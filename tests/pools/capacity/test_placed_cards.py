"""PlacedCards, the rows that index Allocation.placement (issue #20): an approval writes one per
node of its placement with the GPU indices as a mask, the migration copies placements made
before the rows existed, and what a window holds reads the same on PostgreSQL and the ORM."""

from __future__ import annotations

import importlib
import random
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.apps import apps
from factories import (
    AllocationFactory,
    CapacityRequestFactory,
    PoolFactory,
    UserFactory,
    next_week_9am,
    node_with_gpus,
)

from pools.capacity import window
from pools.capacity.models import Allocation, PlacedCards
from pools.capacity.services.requests import capacity_request_approve
from pools.capacity.window import window_holds
from pools.common.choices import RequestStatus, Scheduler
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup():
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    pool = PoolFactory(slug="dgx", scheduler=Scheduler.SLURM)
    for i in (1, 2):
        node_with_gpus(8, hostname=f"dgx-{i}", pool=pool, nvlink_domains=[list(range(8))])
    return SimpleNamespace(pool=pool, a100=a100, admin=UserFactory(is_staff=True))


def _approve(s, cards_per_node, nodes, start, *, shared=False):
    request = CapacityRequestFactory(
        pool=s.pool,
        gpu_model=s.a100,
        card_count=cards_per_node * nodes,
        cards_per_node=cards_per_node,
        node_count=nodes,
        one_nvlink_domain=True,
        shared_nodes=shared,
        starts_at=start,
        ends_at=start + timedelta(days=7),
        status=RequestStatus.SUBMITTED,
    )
    return capacity_request_approve(request=request, actor=s.admin)


def rows(allocation):
    return sorted(allocation.placed_cards.values_list("hostname", "gpu_mask"))


def test_an_approval_writes_one_row_per_node_of_its_placement(setup):
    start = next_week_9am()
    # 2 nodes x 4 cards, one task per node: GPUs 0-3 of each (lowest indices first)
    two = _approve(setup, 4, 2, start)
    assert two.placement == [{"node": "dgx-1", "gpus": [0, 1, 2, 3]},
                             {"node": "dgx-2", "gpus": [0, 1, 2, 3]}]  # fmt: skip
    assert rows(two) == [("dgx-1", 0b1111), ("dgx-2", 0b1111)]
    # 2 groups of 2 that may share a node: both on dgx-1 (best fit: 4 left there), one row
    shared = _approve(setup, 2, 2, start, shared=True)
    assert shared.placement == [{"node": "dgx-1", "gpus": [4, 5]},
                                {"node": "dgx-1", "gpus": [6, 7]}]  # fmt: skip
    assert rows(shared) == [("dgx-1", 0b11110000)]


def test_an_unshaped_approval_writes_none(setup):
    request = CapacityRequestFactory(
        pool=setup.pool, gpu_model=setup.a100, card_count=3, status=RequestStatus.SUBMITTED
    )
    allocation = capacity_request_approve(request=request, actor=setup.admin)
    assert allocation.placement == [] and rows(allocation) == []


def test_the_migration_copies_placements_made_before_the_rows(setup):
    old = AllocationFactory(pool=setup.pool, gpu_model=setup.a100, card_count=3)
    Allocation.objects.filter(pk=old.pk).update(
        placement=[{"node": "dgx-1", "gpus": [0, 2]}, {"node": "dgx-2", "gpus": [5]}]
    )
    AllocationFactory(pool=setup.pool, gpu_model=setup.a100, card_count=1)  # unplaced
    migration = importlib.import_module("pools.migrations.0017_placed_cards_inventory_stamp")
    migration.copy_placements(apps, None)
    assert sorted(PlacedCards.objects.values_list("allocation_id", "hostname", "gpu_mask")) == [
        (old.pk, "dgx-1", 0b101),
        (old.pk, "dgx-2", 0b100000),
    ]


def test_what_a_window_holds_reads_the_same_both_ways(setup, monkeypatch):
    """120 random allocations, placed or not, holding or not, over 30 days; 60 random windows
    with and without an excluded allocation: the PostgreSQL statement and the ORM agree."""
    rng = random.Random(7)
    t0 = next_week_9am()
    made = []
    for i in range(120):
        start = t0 + timedelta(hours=rng.randrange(0, 24 * 30))
        cards = rng.choice((1, 2, 4))
        placed = rng.random() < 0.7
        first = rng.randrange(0, 9 - cards)
        made.append(
            AllocationFactory(
                pool=setup.pool,
                gpu_model=setup.a100,
                card_count=cards,
                starts_at=start,
                ends_at=start + timedelta(hours=rng.randrange(1, 24 * 7)),
                status=rng.choice(("approved", "active", "ended", "cancelled")),
                placement=[{"node": f"dgx-{i % 2 + 1}", "gpus": list(range(first, first + cards))}]
                if placed
                else [],
            )
        )
    windows = []
    for _ in range(60):
        start = t0 + timedelta(hours=rng.randrange(-24, 24 * 31))
        windows.append((start, start + timedelta(hours=rng.randrange(1, 24 * 10))))

    def read_all():
        return [
            window_holds(
                pool=setup.pool,
                gpu_model=setup.a100,
                start=start,
                end=end,
                exclude_allocation=exclude,
                per_node=True,
            )
            for start, end in windows
            for exclude in (None, rng.choice(made).pk)
        ]

    state = rng.getstate()
    sql = read_all()
    monkeypatch.setattr(window, "connection", SimpleNamespace(vendor="other"))
    rng.setstate(state)
    orm = read_all()
    assert [(h.peak, h.unplaced_peak, h.held) for h in sql] == [
        (h.peak, h.unplaced_peak, h.held) for h in orm
    ]
    assert sum(h.peak for h in sql) > 0 and any(h.held for h in sql)  # not all empty
    assert {h.generation is not None for h in sql} == {True}


def test_a_node_moved_to_another_pool_keeps_the_cards_it_holds(setup):
    """dgx-1's GPUs 0-7 are held by a dgx allocation; the node then moves to pool ``dev``
    (through the admin, say). A 1 x 8 in ``dev`` over the same week must not be placed on
    them: held cards are the node's, whatever pool holds them."""
    from pools.capacity.placement import Shape
    from pools.capacity.shapes import shape_fit
    from pools.inventory.models import Node

    start = next_week_9am()
    held = _approve(setup, 8, 1, start)
    assert held.placement == [{"node": "dgx-1", "gpus": list(range(8))}]
    dev = PoolFactory(slug="dev", scheduler=Scheduler.SLURM)
    Node.objects.filter(hostname="dgx-1").update(pool=dev)
    eight = Shape(cards_per_node=8, nodes=1, one_nvlink_domain=True)
    for vendor in ("postgresql", "other"):
        with pytest.MonkeyPatch.context() as patch:
            if vendor == "other":
                patch.setattr(window, "connection", SimpleNamespace(vendor="other"))
            fit = shape_fit(
                pool=dev, gpu_model=setup.a100, shape=eight, start=start, end=start + timedelta(7)
            )
        assert not fit.fits, (vendor, fit.message())


def test_a_namesake_node_in_another_cluster_holds_nothing_here(setup):
    """Host names are unique per cluster (issue 35): ``dgx-1`` of cluster ``east`` and
    ``dgx-1`` of cluster ``west`` are two nodes. GPUs 0-7 of east's dgx-1 are held by an east
    allocation; west's pool sees nothing held on its own dgx-1 (a 1 × 8 fits there), while a
    second pool of east still sees east's cards held — on PostgreSQL and through the ORM. The
    environment's pools (``setup.pool``) see neither."""
    from factories import ClusterFactory

    from pools.capacity.placement import Shape
    from pools.capacity.shapes import shape_fit

    east, west = ClusterFactory(slug="east"), ClusterFactory(slug="west")
    pools = {}
    for cluster in (east, west):
        pools[cluster.slug] = PoolFactory(slug=f"{cluster.slug}-dgx", cluster=cluster)
        node_with_gpus(8, hostname="dgx-1", pool=pools[cluster.slug],
                       nvlink_domains=[list(range(8))])  # fmt: skip
    east_more = PoolFactory(slug="east-more", cluster=east)
    start = next_week_9am()
    AllocationFactory(pool=pools["east"], gpu_model=setup.a100, card_count=8, status="approved",
                      starts_at=start, ends_at=start + timedelta(days=7),
                      placement=[{"node": "dgx-1", "gpus": list(range(8))}])  # fmt: skip
    eight = Shape(cards_per_node=8, nodes=1, one_nvlink_domain=True)
    for vendor in ("postgresql", "other"):
        with pytest.MonkeyPatch.context() as patch:
            if vendor == "other":
                patch.setattr(window, "connection", SimpleNamespace(vendor="other"))
            held = {
                slug: window_holds(pool=pool, gpu_model=setup.a100, start=start,
                                   end=start + timedelta(days=7), per_node=True).held
                for slug, pool in [("east-more", east_more), ("west", pools["west"]),
                                   ("environment", setup.pool)]
            }  # fmt: skip
            west_fit = shape_fit(pool=pools["west"], gpu_model=setup.a100, shape=eight,
                                 start=start, end=start + timedelta(days=7))  # fmt: skip
        assert held == {"east-more": {"dgx-1": 0xFF}, "west": {}, "environment": {}}, vendor
        assert west_fit.fits, (vendor, west_fit.message())
