"""Property (issue 38): over any mix of whole cards, cards in MIG mode, cards in error and nodes
up or drained, approvals never hand out more whole cards at any instant than the fleet has.

The oracle is written here from the rule's words, not from the code: a card counts when its node
is up, its health is not ``error`` and it is not in MIG mode (``mig_mode`` True); unknown MIG
mode counts. Requests are approved one after another; each must succeed exactly when the cards
counted minus the most already granted at any instant of its window (half-open windows) is at
least what it asks, and a refusal must leave nothing behind.

The second property adds requests for MIG slices (issue 38): whole cards and the slices of each
profile are separate kinds of capacity, each with the same invariant.
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
from pools.common.choices import GpuHealth, NodeState, RequestStatus, Scheduler, WorkloadKind
from pools.common.errors import InsufficientCapacity
from pools.inventory.models import Gpu, GpuModel, MigDevice, Node

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


PROFILES = ["1g.10gb", "2g.20gb"]
sliced_cards = st.lists(
    st.tuples(
        st.sampled_from([GpuHealth.OK, GpuHealth.UNKNOWN, GpuHealth.ERROR]),
        st.sampled_from([False, None, True]),
        st.lists(st.sampled_from(PROFILES), max_size=4),  # its MIG instances, when in MIG mode
    ),
    min_size=1,
    max_size=6,
)
sliced_nodes = st.lists(
    st.tuples(st.sampled_from([NodeState.UP, NodeState.UP, NodeState.DRAIN]), sliced_cards),
    min_size=1,
    max_size=3,
)
# (profile or "" for cards, how many, first day, days)
mixed_asks = st.lists(
    st.tuples(
        st.sampled_from(["", *PROFILES]),
        st.integers(1, 8),
        st.integers(0, 4),
        st.integers(1, 3),
    ),
    min_size=1,
    max_size=8,
)


def capacity_of(fleet) -> dict[str, int]:
    """Whole cards (key ``""``) and slices per profile, from the rule's words: a card counts
    when its node is up and its health is not ``error``; whole when not in MIG mode (unknown
    counts), its slices when in MIG mode."""
    found = dict.fromkeys(["", *PROFILES], 0)
    for state, node_cards in fleet:
        for health, mig, profiles in node_cards:
            if state != NodeState.UP or health == GpuHealth.ERROR:
                continue
            if mig is True:
                for profile in profiles:
                    found[profile] += 1
            else:
                found[""] += 1
    return found


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(fleet=sliced_nodes, requests=mixed_asks)
def test_cards_and_slices_per_profile_are_never_over_granted(db, fleet, requests):
    """Random mixes of whole cards, cards in MIG mode with random instances, and requests for
    cards or slices: each kind (whole cards, each profile) is granted exactly while what it
    has minus its own peak in the window covers the ask; the kinds never borrow from each
    other."""
    with transaction.atomic():
        a100 = GpuModel.objects.get(slug="a100_80g_sxm")
        pool = PoolFactory(slug="mix", scheduler=Scheduler.KUBERNETES, slurm_partition="")
        for n, (state, node_cards) in enumerate(fleet):
            node = Node.objects.create(hostname=f"mix-{n}", pool=pool, state=state)
            for i, (health, mig, profiles) in enumerate(node_cards):
                card = Gpu.objects.create(
                    node=node, index=i, gpu_model=a100, health=health, mig_mode=mig
                )
                MigDevice.objects.bulk_create(
                    MigDevice(gpu=card, index=k, profile=p) for k, p in enumerate(profiles)
                )
        team, user = TeamFactory(slug="mix"), UserFactory(username="mix-member")
        admin = UserFactory(username="mix-admin", is_staff=True)
        monday = next_week_9am()
        has = capacity_of(fleet)
        granted: dict[str, list[tuple[int, int, int]]] = {kind: [] for kind in has}
        for profile, asked, first, days in requests:
            request = CapacityRequest.objects.create(
                team=team, requested_by=user, workload_kind=WorkloadKind.INFERENCE, pool=pool,
                gpu_model=a100, card_count=asked, mig_profile=profile,
                starts_at=monday + timedelta(days=first),
                ends_at=monday + timedelta(days=first + days),
                justification="property", status=RequestStatus.SUBMITTED,
            )  # fmt: skip
            fits = has[profile] - peak(granted[profile], first, first + days) >= asked
            try:
                capacity_request_approve(request=request, actor=admin)
            except InsufficientCapacity:
                assert not fits, (has, granted, profile, asked, first, days)
                assert not Allocation.objects.filter(request=request).exists()
            else:
                assert fits, (has, granted, profile, asked, first, days)
                granted[profile].append((first, first + days, asked))
            for kind, held in granted.items():
                assert peak(held, 0, 7) <= has[kind]
            held = Allocation.objects.filter(pool=pool)
            assert held.whole_cards().count() == len(granted[""])
        transaction.set_rollback(True)
