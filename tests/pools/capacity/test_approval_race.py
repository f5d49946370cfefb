"""The capacity invariant under concurrency, on real PostgreSQL.

60 threads, each with its own database connection, approve 60 one-card requests at once against
a pool with 5 free cards. Exactly 5 approvals may succeed; the other 55 must get a clear
"insufficient capacity" answer, and the cards held never exceed the cards that exist.

Twice: on 8 L40S, and on 8 whole A100 beside a third node whose 4 A100 are in MIG mode (7 ×
1g.10gb each, issue 38): those 4 are no whole cards, so the free cards are 5 there too, not 9.

And with requests for MIG slices among them (issue 38): 30 one-card and 30 one-slice requests
at once, 5 cards and 8 slices free; each invariant holds on its own.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone
from factories import GpuFactory, MigDeviceFactory, NodeFactory, PoolFactory, TeamFactory
from race_support import approve_at_once

from pools.capacity.models import Allocation, CapacityRequest
from pools.common.choices import AllocationStatus, RequestStatus, Scheduler
from pools.common.errors import InsufficientCapacity
from pools.inventory.models import GpuModel
from pools.tenancy.models import Membership

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 60


@pytest.fixture(params=["l40s", "a100-with-mig-cards"])
def crowded_pool(request, django_user_model):
    if connection.vendor != "postgresql":
        pytest.fail("the concurrency test needs PostgreSQL (row locks)")
    from pools.inventory.catalogue.sync import catalogue_sync
    from pools.inventory.models import GpuModelAlias

    catalogue_sync(GpuModel, GpuModelAlias)
    with_mig = request.param == "a100-with-mig-cards"
    gpu_model = GpuModel.objects.get(slug="a100_80g_sxm" if with_mig else "l40s")
    pool = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    for _host in range(2):  # 2 nodes x 4 cards = 8 schedulable cards
        node = NodeFactory(pool=pool, scheduler=Scheduler.KUBERNETES)
        for index in range(4):
            GpuFactory(
                node=node,
                index=index,
                gpu_model=gpu_model,
                raw_model_name=gpu_model.vendor_name,
                mig_mode=False if with_mig else None,
            )
    if with_mig:  # 4 more A100 in MIG mode, 7 x 1g.10gb each: not one whole card among them
        node = NodeFactory(pool=pool, scheduler=Scheduler.KUBERNETES)
        for index in range(4):
            card = GpuFactory(
                node=node,
                index=index,
                gpu_model=gpu_model,
                raw_model_name=gpu_model.vendor_name,
                mig_mode=True,
            )
            for slice_index in range(7):
                MigDeviceFactory(gpu=card, index=slice_index, profile="1g.10gb")
    team = TeamFactory(slug="nlp")
    user = django_user_model.objects.create_user("alice", password="x")
    Membership.objects.create(team=team, user=user)
    start = timezone.now() + timedelta(days=7)
    end = start + timedelta(days=7)
    # 3 cards already held in an overlapping window -> 8 - 3 = 5 free.
    held = CapacityRequest.objects.create(
        team=team,
        requested_by=user,
        workload_kind="inference",
        pool=pool,
        gpu_model=gpu_model,
        card_count=3,
        starts_at=start - timedelta(days=1),
        ends_at=end,
        justification="held",
        status=RequestStatus.APPROVED,
    )
    Allocation.objects.create(
        request=held,
        team=team,
        pool=pool,
        gpu_model=gpu_model,
        card_count=3,
        starts_at=held.starts_at,
        ends_at=end,
    )
    # A 4-card allocation that ended before the window must not compete (interval overlap).
    past = CapacityRequest.objects.create(
        team=team,
        requested_by=user,
        workload_kind="inference",
        pool=pool,
        gpu_model=gpu_model,
        card_count=4,
        starts_at=start - timedelta(days=3),
        ends_at=start,
        justification="past",
        status=RequestStatus.APPROVED,
    )
    Allocation.objects.create(
        request=past,
        team=team,
        pool=pool,
        gpu_model=gpu_model,
        card_count=4,
        starts_at=past.starts_at,
        ends_at=start,
    )
    pending = [
        CapacityRequest.objects.create(
            team=team,
            requested_by=user,
            workload_kind="inference",
            pool=pool,
            gpu_model=gpu_model,
            card_count=1,
            starts_at=start,
            ends_at=end,
            justification=f"race {i}",
            status=RequestStatus.SUBMITTED,
        )
        for i in range(THREADS)
    ]
    admin = get_user_model().objects.create_user("admin", password="x", is_staff=True)
    return pool, gpu_model, pending, admin


def _insufficient(exc: InsufficientCapacity) -> str:
    return "insufficient" if "Insufficient capacity" in exc.message else exc.message


def test_concurrent_approvals_never_over_commit_the_pool(crowded_pool):
    pool, gpu_model, pending, admin = crowded_pool
    outcomes = list(approve_at_once(pending, admin, refused=_insufficient).values())

    assert len(outcomes) == THREADS
    assert outcomes.count("approved") == 5  # 8 cards - 3 held in the window
    assert outcomes.count("insufficient") == THREADS - 5
    new = Allocation.objects.filter(pool=pool, gpu_model=gpu_model, card_count=1)
    assert new.count() == 5
    assert (
        CapacityRequest.objects.filter(
            pk__in=[r.pk for r in pending], status=RequestStatus.APPROVED
        ).count()
        == 5
    )
    assert (
        CapacityRequest.objects.filter(
            pk__in=[r.pk for r in pending], status=RequestStatus.SUBMITTED
        ).count()
        == THREADS - 5
    )
    held = sum(
        a.card_count
        for a in Allocation.objects.filter(
            pool=pool,
            status__in=[AllocationStatus.APPROVED, AllocationStatus.ACTIVE],
            ends_at__gt=pending[0].starts_at,
        )
    )
    assert held == 8  # 3 + 5: exactly the pool's cards, never more


@pytest.fixture
def mixed_queue(django_user_model):
    """Issue 38, slice requests: 8 whole A100 (3 held: 5 free) beside 4 A100 in MIG mode with
    7 × 1g.10gb each (28 slices, 20 held: 8 free); 30 one-card and 30 one-slice requests,
    interleaved."""
    if connection.vendor != "postgresql":
        pytest.fail("the concurrency test needs PostgreSQL (row locks)")
    from pools.inventory.catalogue.sync import catalogue_sync
    from pools.inventory.models import GpuModelAlias

    catalogue_sync(GpuModel, GpuModelAlias)
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    pool = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    for host in range(3):
        node = NodeFactory(pool=pool, scheduler=Scheduler.KUBERNETES)
        for index in range(4):
            card = GpuFactory(
                node=node, index=index, gpu_model=a100, raw_model_name=a100.vendor_name,
                mig_mode=host == 2,
            )  # fmt: skip
            for slice_index in range(7 if host == 2 else 0):
                MigDeviceFactory(gpu=card, index=slice_index, profile="1g.10gb")
    team = TeamFactory(slug="nlp")
    user = django_user_model.objects.create_user("alice", password="x")
    Membership.objects.create(team=team, user=user)
    start = timezone.now() + timedelta(days=7)
    end = start + timedelta(days=7)
    for count, profile in ((3, ""), (20, "1g.10gb")):
        held = CapacityRequest.objects.create(
            team=team, requested_by=user, workload_kind="inference", pool=pool, gpu_model=a100,
            card_count=count, mig_profile=profile, starts_at=start, ends_at=end,
            justification="held", status=RequestStatus.APPROVED,
        )  # fmt: skip
        Allocation.objects.create(
            request=held, team=team, pool=pool, gpu_model=a100, card_count=count,
            mig_profile=profile, starts_at=start, ends_at=end,
        )  # fmt: skip
    pending = [
        CapacityRequest.objects.create(
            team=team,
            requested_by=user,
            workload_kind="inference",
            pool=pool,
            gpu_model=a100,
            card_count=1,
            mig_profile="1g.10gb" if i % 2 else "",
            starts_at=start,
            ends_at=end,
            justification=f"race {i}",
            status=RequestStatus.SUBMITTED,
        )  # fmt: skip
        for i in range(THREADS)
    ]
    admin = get_user_model().objects.create_user("admin", password="x", is_staff=True)
    return pool, a100, pending, admin


def test_concurrent_card_and_slice_approvals_keep_both_invariants(mixed_queue):
    """5 of the 30 card requests and 8 of the 30 slice requests approved, 47 refused; held:
    8 whole cards and 28 slices, exactly what exists."""
    pool, a100, pending, admin = mixed_queue
    outcomes = approve_at_once(pending, admin, refused=_insufficient)

    cards = [outcomes[r.pk] for r in pending if not r.mig_profile]
    slices = [outcomes[r.pk] for r in pending if r.mig_profile]
    assert (cards.count("approved"), cards.count("insufficient")) == (5, 25)
    assert (slices.count("approved"), slices.count("insufficient")) == (8, 22)
    held = Allocation.objects.filter(pool=pool, gpu_model=a100)
    assert sum(a.card_count for a in held.whole_cards()) == 8
    assert sum(a.card_count for a in held.slices("1g.10gb")) == 28
