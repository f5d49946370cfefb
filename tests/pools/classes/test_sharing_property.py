"""Property (issue 36): over random approvals of random workload classes on an over-committed
pool, no two classes ever share a card and exclusive classes never share at all.

The oracle is written from the rule's words, not from the code: at each day of the week, the
cards held by each class must fit on cards of that class's own. An exclusive class needs one
card per card held. Any other class (the unclassed requests are one more group) may put up to
``floor(k × r)`` held cards on ``k`` cards of its own (the pool's over-commit rule, r = 2 here):
the least such ``k`` is found by counting up, not by a formula. The groups' ``k`` added up must
be at most the pool's cards. Each approval must succeed exactly when the grant keeps that true
(and the pool's plain count, held ≤ floor(cards × r), which it implies), and a refusal must
leave nothing behind.
"""

from __future__ import annotations

import math
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import transaction
from factories import PoolFactory, TeamFactory, UserFactory, next_week_9am, node_with_gpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pools.capacity.models import Allocation, CapacityRequest
from pools.capacity.services.requests import capacity_request_approve
from pools.classes.models import WorkloadClass
from pools.classes.sharing import ClassHold, peak_cards_needed
from pools.common.choices import RequestStatus, Scheduler, WorkloadKind
from pools.common.errors import InsufficientCapacity
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db

RATIO = Decimal("2.00")
GROUPS = ["production", "batch", "internal", None]  # production is the exclusive one

# (class, cards asked, first day, days): windows inside next week
asks = st.lists(
    st.tuples(st.sampled_from(GROUPS), st.integers(1, 6), st.integers(0, 4), st.integers(1, 3)),
    min_size=1,
    max_size=7,
)


def own_cards(held: int, exclusive: bool, ratio: Decimal) -> int:
    """The least k with floor(k × ratio) >= held (k = held for an exclusive class)."""
    if exclusive:
        return held
    k = 0
    while math.floor(k * ratio) < held:
        k += 1
    return k


def needed_on(granted, day: int) -> int:
    held: dict = {}
    for group, first, last, cards in granted:
        if first <= day < last:
            held[group] = held.get(group, 0) + cards
    return sum(own_cards(n, g == "production", RATIO) for g, n in held.items())


def fits(granted, cards_in_pool: int, first: int, last: int) -> bool:
    return all(needed_on(granted, day) <= cards_in_pool for day in range(first, last))


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(pool_cards=st.integers(1, 6), requests=asks)
def test_approvals_never_put_two_classes_on_one_card(db, pool_cards, requests):
    with transaction.atomic():
        pool = PoolFactory(
            slug="share", scheduler=Scheduler.KUBERNETES, slurm_partition="", overcommit_ratio=RATIO
        )
        node_with_gpus(pool_cards, gpu_model="rtx4090", hostname="share-01", pool=pool,
                       scheduler=Scheduler.KUBERNETES)  # fmt: skip
        rtx = GpuModel.objects.get(slug="rtx4090")
        classes = {c.slug: c for c in WorkloadClass.objects.all()}
        # production on consumer cards here, so every class meets on the one model
        classes["production"].gpu_models.add(rtx)
        team, user = TeamFactory(slug="share"), UserFactory(username="share-member")
        admin = UserFactory(username="share-admin", is_staff=True)
        monday = next_week_9am()
        granted: list[tuple] = []
        for group, asked, first, days in requests:
            request = CapacityRequest.objects.create(
                team=team, requested_by=user, workload_kind=WorkloadKind.INFERENCE,
                workload_class=classes[group] if group else None, pool=pool, gpu_model=rtx,
                card_count=asked, starts_at=monday + timedelta(days=first),
                ends_at=monday + timedelta(days=first + days), justification="property",
                status=RequestStatus.SUBMITTED,
            )  # fmt: skip
            expected = fits([*granted, (group, first, first + days, asked)], pool_cards,
                            first, first + days)  # fmt: skip
            try:
                capacity_request_approve(request=request, actor=admin)
            except InsufficientCapacity:
                assert not expected, (pool_cards, granted, group, asked, first, days)
                request.refresh_from_db()
                assert request.status == RequestStatus.SUBMITTED
                assert not Allocation.objects.filter(request=request).exists()
            else:
                assert expected, (pool_cards, granted, group, asked, first, days)
                granted.append((group, first, first + days, asked))
            assert fits(granted, pool_cards, 0, 7)
        transaction.set_rollback(True)


holds = st.lists(
    st.tuples(st.sampled_from(GROUPS), st.integers(1, 9), st.integers(0, 6), st.integers(1, 4)),
    max_size=10,
)


@given(rows=holds, ratio=st.sampled_from([Decimal("1.00"), Decimal("1.50"), Decimal("2.00"),
                                           Decimal("3.25")]))  # fmt: skip
def test_the_sweep_finds_the_day_by_day_peak(rows, ratio):
    """The sweep over starts and ends agrees with the need counted day by day (holds start and
    end on day boundaries, so each day's start is an instant of every change)."""
    monday = next_week_9am()
    at = [ClassHold(monday + timedelta(days=a), monday + timedelta(days=a + d), n, g,
                    g == "production") for g, n, a, d in rows]  # fmt: skip
    by_day = 0
    for day in range(0, 10):
        held: dict = {}
        for g, n, a, d in rows:
            if a <= day < a + d:
                held[g] = held.get(g, 0) + n
        by_day = max(by_day, sum(own_cards(n, g == "production", ratio) for g, n in held.items()))

    found = peak_cards_needed(
        at, start=monday, end=monday + timedelta(days=10), overcommit_ratio=ratio
    )

    assert found == by_day
