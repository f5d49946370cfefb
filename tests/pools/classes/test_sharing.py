"""Never two classes on one card, by hand (issue 36): pool ``shared`` has 4 GeForce RTX 4090
and over-commits ×2, so the plain count allows floor(4 × 2) = 8 cards held at once."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from factories import CapacityRequestFactory, PoolFactory, next_week_9am, node_with_gpus

from pools.audit.models import AuditEvent
from pools.capacity.models import Allocation
from pools.capacity.services.requests import capacity_request_approve
from pools.classes.models import WorkloadClass
from pools.common.choices import Scheduler
from pools.common.errors import InsufficientCapacity
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


def test_class_change_that_would_share_a_card_is_a_409_listing_the_conflicts(
    grant, api_as, pool_admin
):
    """batch 3 (2 cards of its own), internal 3 (2 cards), batch 1: all 4 cards taken (batch
    4 held on 2 cards). Moving the batch 1 to development needs ceil(3/2) + 2 + 1 = 5 cards:
    refused, naming the allocations of the other classes (the internal one and the batch 3;
    the three windows are the same week). Nothing changes."""
    first, internal, small = grant("batch", 3), grant("internal", 3), grant("batch", 1)

    response = api_as(pool_admin).post(
        f"/api/v1/allocations/{small.pk}/class/", {"workload_class": "development"}, format="json"
    )

    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "class_conflict"
    assert (body["data"]["needed"], body["data"]["schedulable"]) == (5, 4)
    assert [(c["allocation"], c["workload_class"]) for c in body["data"]["conflicts"]] == [
        (first.pk, "batch"),
        (internal.pk, "internal"),
    ]
    small.refresh_from_db()
    assert small.workload_class.slug == "batch"


def test_class_change_with_room_is_audited(grant, api_as, pool_admin):
    """internal 3 (2 cards) and batch 1 (1 card): moving the batch 1 to internal makes 4
    internal held on 2 cards."""
    grant("internal", 3)
    small = grant("batch", 1)

    response = api_as(pool_admin).post(
        f"/api/v1/allocations/{small.pk}/class/",
        {"workload_class": "internal", "reason": "it is a tool"},
        format="json",
    )

    assert response.status_code == 200
    assert response.json()["workload_class"] == "internal"
    event = AuditEvent.objects.get(action="allocation.class_changed")
    assert (event.before, event.after, event.reason) == (
        {"workload_class": "batch"},
        {"workload_class": "internal"},
        "it is a tool",
    )


def test_class_change_to_a_class_that_may_not_use_the_model_is_a_400(grant, api_as, pool_admin):
    small = grant("batch", 1)

    response = api_as(pool_admin).post(
        f"/api/v1/allocations/{small.pk}/class/", {"workload_class": "production"}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["errors"] == {
        "gpu_model": [
            "Production may not run on GeForce RTX 4090: consumer class (it may use: none "
            "of the fleet's models)."
        ]
    }
