"""pools.capacity.availability.pool_free_cards on a pool with every kind of card and allocation
that must or must not count, by hand; and its PostgreSQL path (one statement, the inventory
read once per change) against the ORM queries.

Pool ``p`` (Kubernetes), L40S cards:
  n1 up,   driver 550.54.15 (CUDA 12.4), 4 cards, one of them health=error  -> 3
  n2 up,   driver 535.129.03 (CUDA 12.2), 4 cards                          -> 4
  n3 down, driver 550.54.15, 4 cards                                       -> 0
  n4 up,   no driver reported, 2 cards                                     -> 2 (no CUDA asked)
  n5 up,   driver 550.54.15, 4 L20 (another model)                         -> 0
Pool ``q`` has 8 more L40S that never count for ``p``.
Schedulable L40S: no CUDA 9; CUDA 12.2: 3 + 4 = 7; CUDA 12.4: 3; CUDA 12.8: 0.

Allocations of L40S in ``p``, days from T:  a1 approved 2 [0, 5); a2 active 3 [3, 8);
a5 expiring 1 [-2, 1); a6 provisioning 1 [10, 12); cancelled and ended ones, an L20 one and one in
``q`` do not count. Held over [0, 10): [0,1) 3, [1,3) 2, [3,5) 5, [5,8) 3 -> peak 5.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace

import pytest
from factories import AllocationFactory, GpuFactory, NodeFactory, PoolFactory, node_with_gpus

from pools.capacity import availability, node_kinds, window
from pools.capacity.arithmetic import free_cards
from pools.capacity.availability import holding_intervals, pool_free_cards, schedulable_cards
from pools.common.choices import GpuHealth, NodeState, Scheduler
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db

T = datetime(2031, 3, 3, 9, 0, tzinfo=UTC)


def day(n: float) -> datetime:
    return T + timedelta(days=n)


@pytest.fixture
def fleet(team):
    l40s = GpuModel.objects.get(slug="l40s")
    k8s = {"scheduler": Scheduler.KUBERNETES}
    p = PoolFactory(slug="p", name="P", slurm_partition="", **k8s)
    q = PoolFactory(slug="q", name="Q", slurm_partition="", **k8s)
    n1 = node_with_gpus(3, gpu_model="l40s", pool=p, driver_version="550.54.15", **k8s)
    GpuFactory(node=n1, index=3, gpu_model=l40s, health=GpuHealth.ERROR)
    node_with_gpus(4, gpu_model="l40s", pool=p, driver_version="535.129.03", **k8s)
    node_with_gpus(4, gpu_model="l40s", pool=p, state=NodeState.DOWN, **k8s)
    unknown = NodeFactory(pool=p, driver_version="", **k8s)
    for index in range(2):
        GpuFactory(node=unknown, index=index, gpu_model=l40s)
    node_with_gpus(4, gpu_model="l20", pool=p, driver_version="550.54.15", **k8s)
    node_with_gpus(8, gpu_model="l40s", pool=q, **k8s)

    def alloc(status, start, end, cards, pool=p, model=l40s):
        return AllocationFactory(
            team=team,
            pool=pool,
            gpu_model=model,
            status=status,
            card_count=cards,
            starts_at=day(start),
            ends_at=day(end),
        )

    a2 = alloc("active", 3, 8, 3)
    alloc("approved", 0, 5, 2)
    alloc("expiring", -2, 1, 1)
    alloc("provisioning", 10, 12, 1)
    alloc("cancelled", 0, 10, 4)
    alloc("ended", -1, 9, 4)
    alloc("approved", 0, 10, 4, model=GpuModel.objects.get(slug="l20"))
    alloc("approved", 0, 10, 5, pool=q)
    return SimpleNamespace(p=p, q=q, l40s=l40s, a2=a2)


@pytest.fixture(params=["one statement (PostgreSQL)", "ORM queries"])
def path(request, monkeypatch):
    if request.param == "ORM queries":
        for module in (window, node_kinds):
            monkeypatch.setattr(module, "connection", SimpleNamespace(vendor="other"))
    return request.param


@pytest.mark.parametrize(
    ("cuda", "free"),
    [(None, 4), ("12.2", 2), ("12.4", 0), ("12.8", 0)],  # 9-5, 7-5, 3-5 -> 0, 0-5 -> 0
)
def test_free_cards_by_hand(fleet, path, cuda, free):
    assert (
        pool_free_cards(pool=fleet.p, gpu_model=fleet.l40s, start=day(0), end=day(10), cuda=cuda)
        == free
    )


def test_windows_and_exclusion_by_hand(fleet, path):
    def free(start, end, **kw):
        return pool_free_cards(
            pool=fleet.p, gpu_model=fleet.l40s, start=day(start), end=day(end), **kw
        )

    assert free(8, 10) == 9  # nothing held; a6 starts as the window ends
    assert free(5, 8) == 6  # a2 alone: 9 - 3
    assert free(0, 3) == 6  # [0,1): a1 + a5 = 3
    assert free(0, 10, exclude_allocation=fleet.a2.pk) == 6  # peak without a2: 3
    assert free(10, 11) == 8  # a6: 9 - 1


def test_over_commit_by_hand(fleet, path):
    fleet.p.overcommit_ratio = Decimal("1.50")

    # floor(9 x 1.5) = 13 usable, 5 held.
    assert pool_free_cards(pool=fleet.p, gpu_model=fleet.l40s, start=day(0), end=day(10)) == 8


def test_the_one_statement_agrees_with_the_orm_queries_everywhere(fleet):
    """Every window between half-day marks of [-3, 13) days, every CUDA version, with and
    without an excluded allocation: the fast path returns what the ORM definitions give."""
    marks = [day(d / 2) for d in range(-6, 27)]
    checked = 0
    for i, start in enumerate(marks):
        for end in marks[i + 1 :: 7]:  # 90 windows
            for cuda in (None, "12.2", "12.4"):
                for exclude in (None, fleet.a2.pk):
                    expected = free_cards(
                        schedulable=schedulable_cards(
                            pool=fleet.p, gpu_model=fleet.l40s, cuda=cuda
                        ),
                        overcommit_ratio=fleet.p.overcommit_ratio,
                        intervals=holding_intervals(
                            pool=fleet.p,
                            gpu_model=fleet.l40s,
                            start=start,
                            end=end,
                            exclude_allocation=exclude,
                        ),
                        start=start,
                        end=end,
                    )
                    assert (
                        pool_free_cards(
                            pool=fleet.p,
                            gpu_model=fleet.l40s,
                            start=start,
                            end=end,
                            cuda=cuda,
                            exclude_allocation=exclude,
                        )
                        == expected
                    )
                    checked += 1
    assert checked == 540


@pytest.mark.parametrize(
    ("cards", "days", "first_day"),
    [
        (7, 2, 1),  # [0,2) holds 3 of 9; a5 ends on day 1: [1,3) holds 2, 7 free
        (8, 2, 8),  # day 1: 7; day 5 (a1 ends): [5,7) holds 3, 6; day 8 (a2 ends): 9 free
        (9, 3, 12),  # day 8: a6 [10,12) inside [8,11), 8 free; day 12: 9
        (10, 1, None),  # more than the 9 schedulable cards: never
    ],
)
def test_earliest_free_start_by_hand(fleet, cards, days, first_day):
    """The first window of ``days`` from T with ``cards`` L40S free in ``p`` for all of it."""
    start = availability.earliest_free_start(
        pool=fleet.p,
        gpu_model=GpuModel.objects.get(slug="l40s"),
        cards=cards,
        start=day(0),
        length=timedelta(days=days),
    )

    assert start == (None if first_day is None else day(first_day))
    if start is not None:  # and pool_free_cards agrees over that window and not the hour before
        window = {"pool": fleet.p, "gpu_model": GpuModel.objects.get(slug="l40s")}
        assert pool_free_cards(**window, start=start, end=start + timedelta(days=days)) >= cards
        earlier = start - timedelta(hours=1)
        if earlier >= day(0):
            end = earlier + timedelta(days=days)
            assert pool_free_cards(**window, start=earlier, end=end) < cards


def test_earliest_free_start_looks_no_further_than_its_horizon(fleet):
    l40s = GpuModel.objects.get(slug="l40s")
    common = {"pool": fleet.p, "gpu_model": l40s, "cards": 9, "length": timedelta(days=3)}

    assert availability.earliest_free_start(**common, start=day(0)) == day(12)
    assert (
        availability.earliest_free_start(**common, start=day(0), horizon=timedelta(days=10)) is None
    )


def test_the_peak_summed_in_sql_matches_the_sweep_line_with_ties(team):
    """Many allocations starting and ending on the same hours (an end and a start at one
    instant do not overlap): the free count from the PostgreSQL statement equals the one from
    :func:`pools.capacity.arithmetic.peak_cards` over the same rows, window by window."""
    import random

    pool = PoolFactory(slug="ties", scheduler=Scheduler.SLURM)
    l40s = GpuModel.objects.get(slug="l40s")
    node_with_gpus(8, gpu_model="l40s", pool=pool)
    node_with_gpus(8, gpu_model="l40s", pool=pool)
    rng = random.Random(20)
    for _ in range(40):
        start = rng.randrange(0, 20)
        AllocationFactory(team=team, pool=pool, gpu_model=l40s, status="active",
                          card_count=rng.randrange(1, 4), starts_at=day(start / 4),
                          ends_at=day((start + rng.randrange(1, 8)) / 4))  # fmt: skip
    pool.overcommit_ratio = Decimal("2")  # 32 usable: the peak shows, not the floor of 0
    compared = 0
    for a in range(0, 24, 3):
        for b in range(a + 1, 28, 2):
            start, end = day(a / 4), day(b / 4)
            intervals = holding_intervals(pool=pool, gpu_model=l40s, start=start, end=end)
            expected = free_cards(schedulable=16, overcommit_ratio=Decimal("2"),
                                  intervals=intervals, start=start, end=end)  # fmt: skip
            got = pool_free_cards(pool=pool, gpu_model=l40s, start=start, end=end)
            assert got == expected
            compared += expected > 0
    assert compared > 20
