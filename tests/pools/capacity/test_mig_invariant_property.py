"""Property (issue 38): over any mix of whole cards, cards in MIG mode, cards in error and nodes
up or drained, approvals never hand out more whole cards at any instant than the fleet has.

The oracle is written here from the rule's words, not from the code: a card counts when its node
is up, its health is not ``error`` and it is not in MIG mode (``mig_mode`` True); unknown MIG
mode counts. Requests are approved one after another; each must succeed exactly when the cards
counted minus the most already granted at any instant of its window (half-open windows) is at
least what it asks, and a refusal must leave nothing behind.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from factories import PoolFactory, TeamFactory, UserFactory, next_week_9am
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pools.capacity.models import Allocation, CapacityRequest
from pools.capacity.services.requests import capacity_request_approve
from pools.choices import GpuHealth, NodeState, RequestStatus, Scheduler, WorkloadKind
from pools.errors import InsufficientCapacity
from pools.inventory.models import Gpu, GpuModel, Node

pytestmark = pytest.mark.django_db

cards = st.lists(
    st.tuples(
        st.sampled_from([GpuHealth.OK, GpuHealth.UNKNOWN, GpuHealth.ERROR]),
        st.sampled_from([False, None, True]),
    ),
    min_size=1,
    max_size=8,
)
nodes = st.lists(
    st.tuples(st.sampled_from([NodeState.UP, NodeState.UP, NodeState.DRAIN]), cards),
    min_size=1,
    max_size=4,
)
# (cards asked, first day, days): windows inside the first week from next week's Monday 09:00
asks = st.lists(
    st.tuples(st.integers(1, 10), st.integers(0, 4), st.integers(1, 3)), min_size=1, max_size=6
)


def counted(fleet) -> int:
    return sum(
        1
        for state, node_cards in fleet
        if state == NodeState.UP
        for health, mig in node_cards
        if health != GpuHealth.ERROR and mig is not True
    )


def peak(granted: list[tuple[int, int, int]], first: int, last: int) -> int:
    """Most cards granted at once in days [first, last): the sum at each day's start."""
    return max(
        (sum(n for a, b, n in granted if a <= day < b) for day in range(first, last)), default=0
    )


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(fleet=nodes, requests=asks)
def test_approvals_never_grant_more_whole_cards_than_the_fleet_has(db, fleet, requests):
    with transaction.atomic():
        a100 = GpuModel.objects.get(slug="a100_80g_sxm")
        pool = PoolFactory(slug="prop", scheduler=Scheduler.KUBERNETES, slurm_partition="")
        for n, (state, node_cards) in enumerate(fleet):
            node = Node.objects.create(hostname=f"prop-{n}", pool=pool, state=state)
            Gpu.objects.bulk_create(
                Gpu(node=node, index=i, gpu_model=a100, health=health, mig_mode=mig)
                for i, (health, mig) in enumerate(node_cards)
            )
        team, user = TeamFactory(slug="prop"), UserFactory(username="prop-member")
        admin = UserFactory(username="prop-admin", is_staff=True)
        monday = next_week_9am()
        whole = counted(fleet)
        granted: list[tuple[int, int, int]] = []
        for asked, first, days in requests:
            request = CapacityRequest.objects.create(
                team=team,
                requested_by=user,
                workload_kind=WorkloadKind.INFERENCE,
                pool=pool,
                gpu_model=a100,
                card_count=asked,
                starts_at=monday + timedelta(days=first),
                ends_at=monday + timedelta(days=first + days),
                justification="property",
                status=RequestStatus.SUBMITTED,
            )
            fits = whole - peak(granted, first, first + days) >= asked
            try:
                capacity_request_approve(request=request, actor=admin)
            except InsufficientCapacity:
                assert not fits, (whole, granted, asked, first, days)
                request.refresh_from_db()
                assert request.status == RequestStatus.SUBMITTED
                assert not Allocation.objects.filter(request=request).exists()
            else:
                assert fits, (whole, granted, asked, first, days)
                granted.append((first, first + days, asked))
            assert peak(granted, 0, 7) <= whole
        transaction.set_rollback(True)
