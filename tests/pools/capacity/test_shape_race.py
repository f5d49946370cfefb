"""The shape-aware invariant under concurrency, on real PostgreSQL (issue #20).

Three 8-card NVSwitch nodes; dgx-3 already has 6 cards held, so the window has two whole nodes
and a 2-card fragment. 30 threads, each with its own connection, approve 30 requests for
1 node × 8 cards (one NVLink domain) at once: exactly two may win, on two different nodes; the
other 28 are refused naming the largest shape that still fits (1 × 2). Then 30 threads race for
1 × 2: exactly one wins, on the fragment. No card is ever counted by two allocations.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone
from factories import GpuFactory, NodeFactory, PoolFactory, TeamFactory
from race_support import approve_at_once

from pools.capacity.models import Allocation, CapacityRequest, PlacedCards
from pools.capacity.shapes import placed_cards
from pools.common.choices import RequestStatus, Scheduler
from pools.inventory.models import GpuModel
from pools.tenancy.models import Membership

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 30


@pytest.fixture
def dgx_pool(django_user_model):
    if connection.vendor != "postgresql":
        pytest.fail("the concurrency test needs PostgreSQL (row locks)")
    from pools.inventory.catalogue.sync import catalogue_sync
    from pools.inventory.models import GpuModelAlias

    catalogue_sync(GpuModel, GpuModelAlias)
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    pool = PoolFactory(slug="dgx", scheduler=Scheduler.SLURM)
    for host in range(1, 4):
        node = NodeFactory(pool=pool, hostname=f"dgx-{host}", nvlink_domains=[list(range(8))])
        for index in range(8):
            GpuFactory(node=node, index=index, gpu_model=a100)
    team = TeamFactory(slug="nlp")
    user = django_user_model.objects.create_user("alice", password="x")
    Membership.objects.create(team=team, user=user)
    start = timezone.now() + timedelta(days=7)
    end = start + timedelta(days=7)
    held = CapacityRequest.objects.create(
        team=team,
        requested_by=user,
        workload_kind="training",
        pool=pool,
        gpu_model=a100,
        card_count=6,
        starts_at=start,
        ends_at=end,
        justification="held",
        status=RequestStatus.APPROVED,
    )
    placed = Allocation.objects.create(
        request=held,
        team=team,
        pool=pool,
        gpu_model=a100,
        card_count=6,
        starts_at=start,
        ends_at=end,
        placement=[{"node": "dgx-3", "gpus": [0, 1, 2, 3, 4, 5]}],
    )
    PlacedCards.objects.bulk_create(placed_cards(placed))  # as the approval indexes it

    def requests(cards: int) -> list[CapacityRequest]:
        return [
            CapacityRequest.objects.create(
                team=team,
                requested_by=user,
                workload_kind="training",
                pool=pool,
                gpu_model=a100,
                card_count=cards,
                cards_per_node=cards,
                node_count=1,
                one_nvlink_domain=True,
                starts_at=start,
                ends_at=end,
                justification=f"race {cards} {i}",
                status=RequestStatus.SUBMITTED,
            )
            for i in range(THREADS)
        ]

    admin = get_user_model().objects.create_user("admin", password="x", is_staff=True)
    return pool, requests, admin


def _race(pending, admin) -> list[str]:
    outcomes = approve_at_once(
        pending,
        admin,
        refused=lambda exc: f"insufficient: {(exc.data.get('largest_shape') or {}).get('text')}",
    )
    return list(outcomes.values())


def _cards_counted(pool) -> list[tuple[str, int]]:
    return [
        (spot["node"], gpu)
        for placement in Allocation.objects.filter(pool=pool).values_list("placement", flat=True)
        for spot in placement
        for gpu in spot["gpus"]
    ]


def test_concurrent_shaped_approvals_never_count_a_card_twice(dgx_pool):
    pool, requests, admin = dgx_pool

    outcomes = _race(requests(8), admin)
    assert len(outcomes) == THREADS
    assert outcomes.count("approved") == 2
    # after both whole nodes went, the largest one-domain shape left is dgx-3's 2 free cards
    assert outcomes.count("insufficient: 1 node × 2 cards, one NVLink domain") == THREADS - 2
    whole = Allocation.objects.filter(pool=pool, card_count=8)
    assert sorted(a.placement[0]["node"] for a in whole) == ["dgx-1", "dgx-2"]

    outcomes = _race(requests(2), admin)
    assert outcomes.count("approved") == 1
    assert outcomes.count("insufficient: None") == THREADS - 1  # not a card left in the window
    (pair,) = Allocation.objects.filter(pool=pool, card_count=2)
    assert pair.placement == [{"node": "dgx-3", "gpus": [6, 7]}]

    counted = _cards_counted(pool)
    assert len(counted) == len(set(counted)) == 24  # every card once, none twice
