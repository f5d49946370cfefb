"""Never two classes on one card, by hand (issue 36): pool ``shared`` has 4 GeForce RTX 4090
and over-commits ×2, so the plain count allows floor(4 × 2) = 8 cards held at once."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from factories import CapacityRequestFactory, PoolFactory, next_week_9am, node_with_gpus

from pools.capacity.models import Allocation
from pools.capacity.services.requests import capacity_request_approve
from pools.choices import Scheduler
from pools.classes.models import WorkloadClass
from pools.errors import InsufficientCapacity
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db


@pytest.fixture
def grant(pool_admin):
    pool = PoolFactory(slug="shared", name="Shared", scheduler=Scheduler.KUBERNETES,
                       slurm_partition="", overcommit_ratio=Decimal("2.00"))  # fmt: skip
    node_with_gpus(4, gpu_model="rtx4090", hostname="gc-01", pool=pool,
                   scheduler=Scheduler.KUBERNETES)  # fmt: skip
    rtx = GpuModel.objects.get(slug="rtx4090")
    start = next_week_9am()

    def approve(class_slug, cards):
        request = CapacityRequestFactory(
            pool=pool, gpu_model=rtx, card_count=cards, starts_at=start,
            ends_at=start + timedelta(days=7),
            workload_class=WorkloadClass.objects.get(slug=class_slug),
        )  # fmt: skip
        return capacity_request_approve(request=request, actor=pool_admin)

    return approve


def test_a_third_class_finds_no_card_of_its_own(grant):
    """batch holds 3 (shared ×2: ceil(3/2) = 2 cards of its own), internal 3 (2 cards): all 4
    cards are taken. development asks 1, which needs a 5th card; the plain count (7 of 8)
    would have let it share a card with batch or internal."""
    grant("batch", 3)
    grant("internal", 3)

    with pytest.raises(InsufficientCapacity) as refused:
        grant("development", 1)

    assert refused.value.data == {
        "free": 0, "requested": 1, "needed": 5, "schedulable": 4, "pool": "shared",
        "gpu_model": "rtx4090",
    }  # fmt: skip
    assert Allocation.objects.count() == 2


def test_the_same_class_still_shares_its_own_cards(grant):
    """batch 3 + batch 1 = 4 held by one class: ceil(4/2) = 2 cards; internal 3: 2 cards."""
    grant("batch", 3)
    grant("internal", 3)
    grant("batch", 1)

    assert Allocation.objects.count() == 3


def test_an_exclusive_class_never_shares(grant):
    """production (named on the 4090 here) is exclusive: 3 held need 3 cards, not ceil(3/2);
    with batch's 1 held (1 card) the 4 are taken, and batch's second card fits with its first
    (2 held on 1 card), but production's 4th does not."""
    production = WorkloadClass.objects.get(slug="production")
    production.gpu_models.add(GpuModel.objects.get(slug="rtx4090"))
    grant("production", 3)
    grant("batch", 1)
    grant("batch", 1)

    with pytest.raises(InsufficientCapacity):
        grant("production", 1)
