"""A pool that allocations and requests refer to: deleting it or moving its scheduler binding is a
409 with a code, and changes nothing (no row, no audit event)."""

from __future__ import annotations

import pytest
from factories import (
    AllocationFactory,
    CapacityRequestFactory,
    MaintenanceWindowFactory,
    PoolFactory,
)

from pools.audit.models import AuditEvent
from pools.common.choices import AllocationStatus, RequestStatus, Scheduler
from pools.inventory.models import Pool

pytestmark = pytest.mark.django_db

URL = "/api/v1/pools/"


@pytest.fixture
def train():
    return PoolFactory(slug="train", name="Train", slurm_partition="train")


def snapshot(pool: Pool) -> tuple:
    pool.refresh_from_db()
    return (pool.slug, pool.name, pool.scheduler, pool.slurm_partition, pool.overcommit_ratio)


@pytest.mark.parametrize("status", [AllocationStatus.ACTIVE, AllocationStatus.ENDED])
def test_deleting_a_pool_with_allocations_is_409_and_changes_nothing(admin_api, train, status):
    AllocationFactory(pool=train, status=status)
    AllocationFactory(pool=train, status=AllocationStatus.CANCELLED)
    before = snapshot(train)

    response = admin_api.delete(f"{URL}train/")

    assert response.status_code == 409
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["code"] == "pool_in_use"
    holding = 1 if status == AllocationStatus.ACTIVE else 0
    # Two allocations, each with the approved request it came from.
    assert body["data"] == {"holding_allocations": holding, "allocations": 2, "requests": 2}
    assert snapshot(train) == before
    assert not AuditEvent.objects.exists()


def test_deleting_a_pool_a_maintenance_window_names_is_409_and_changes_nothing(admin_api, train):
    """Found by schemathesis (a 500): a row that protects the pool other than an allocation or
    a request — here a maintenance window — is named in the 409, and nothing is deleted."""
    MaintenanceWindowFactory(pool=train)
    before = snapshot(train)

    response = admin_api.delete(f"{URL}train/")

    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "pool_in_use"
    assert body["data"] == {
        "holding_allocations": 0,
        "allocations": 0,
        "requests": 0,
        "referred_by": ["maintenance windows"],
    }
    assert snapshot(train) == before
    assert not AuditEvent.objects.exists()


def test_deleting_a_pool_only_requests_name_is_409(admin_api, train):
    CapacityRequestFactory(pool=train, status=RequestStatus.REJECTED)

    response = admin_api.delete(f"{URL}train/")

    assert response.status_code == 409
    assert response.json()["data"] == {"holding_allocations": 0, "allocations": 0, "requests": 1}
    assert Pool.objects.filter(slug="train").exists()
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize(
    ("change", "fields"),
    [
        ({"scheduler": Scheduler.KUBERNETES}, ["scheduler"]),
        ({"slug": "train-2"}, ["slug"]),
        ({"slurm_partition": "other"}, ["slurm_partition"]),
        ({"slug": "train-2", "scheduler": Scheduler.KUBERNETES}, ["scheduler", "slug"]),
    ],
)
@pytest.mark.parametrize(
    "status",
    [
        AllocationStatus.APPROVED,
        AllocationStatus.PROVISIONING,
        AllocationStatus.ACTIVE,
        AllocationStatus.EXPIRING,
    ],
)
def test_the_scheduler_binding_cannot_move_while_allocations_hold_cards(
    admin_api, train, change, fields, status
):
    AllocationFactory(pool=train, status=status)
    before = snapshot(train)

    response = admin_api.patch(f"{URL}train/", change, format="json")

    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "pool_in_use"
    assert body["data"]["fields"] == fields
    assert body["data"]["holding_allocations"] == 1
    assert snapshot(train) == before
    assert not AuditEvent.objects.exists()


def test_other_fields_change_while_allocations_hold_cards(admin_api, train):
    AllocationFactory(pool=train, status=AllocationStatus.ACTIVE)

    response = admin_api.patch(
        f"{URL}train/", {"name": "Training", "slug": "train", "overcommit_ratio": "1.25"}
    )

    assert response.status_code == 200, response.content
    assert response.json()["name"] == "Training"
    event = AuditEvent.objects.get()
    assert (event.action, event.before["name"], event.after["name"]) == (
        "pool.updated",
        "Train",
        "Training",
    )


def test_the_binding_moves_once_the_allocations_ended(admin_api, train):
    AllocationFactory(pool=train, status=AllocationStatus.ENDED)

    response = admin_api.patch(f"{URL}train/", {"slug": "train-2"}, format="json")

    assert response.status_code == 200, response.content
    assert Pool.objects.get(pk=train.pk).slug == "train-2"
