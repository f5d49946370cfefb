"""The lifecycle sweep lists the allocations due, then locks each in turn: one deleted in
between (an admin deleted it) is skipped and the sweep goes on with the others."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from factories import AllocationFactory, PoolFactory, TeamFactory

from pools.capacity.models import Allocation
from pools.capacity.services import allocations
from pools.common.choices import AllocationStatus, Scheduler
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db

NOW = datetime(2031, 6, 2, 12, 0, tzinfo=UTC)  # a fixed clock, years away from the real one


def test_an_allocation_deleted_after_the_sweep_listed_it_is_skipped(monkeypatch):
    team = TeamFactory(slug="vision")
    pool = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    l40s = GpuModel.objects.get(slug="l40s")

    def alloc(status, start_h, end_h):
        return AllocationFactory(
            team=team,
            pool=pool,
            gpu_model=l40s,
            status=status,
            starts_at=NOW + timedelta(hours=start_h),
            ends_at=NOW + timedelta(hours=end_h),
        )

    # the first of each pair is gone when the sweep comes to lock it: its lock finds no row
    # (the row stays here, since a delete in the sweep's own transaction would roll back with it)
    opened_gone, opened = alloc("approved", -1, 240), alloc("approved", -1, 240)
    ending_gone, ending = alloc("active", -100, 71), alloc("active", -100, 71)
    over_gone, over = alloc("active", -100, -0.1), alloc("active", -100, -0.1)
    gone = {opened_gone.pk, ending_gone.pk, over_gone.pk}
    lock = allocations.allocation_lock

    def deleted_since_listed(allocation_id):
        if allocation_id in gone:
            raise Allocation.DoesNotExist("Allocation matching query does not exist.")
        return lock(allocation_id)

    monkeypatch.setattr(allocations, "allocation_lock", deleted_since_listed)

    counts = allocations.allocation_lifecycle_sweep(now=NOW)

    assert counts == {"provisioned": 1, "expiring": 1, "ended": 1}
    status = dict(Allocation.objects.values_list("pk", "status"))
    assert status == {
        opened_gone.pk: AllocationStatus.APPROVED,
        opened.pk: AllocationStatus.ACTIVE,
        ending_gone.pk: AllocationStatus.ACTIVE,
        ending.pk: AllocationStatus.EXPIRING,
        over_gone.pk: AllocationStatus.ACTIVE,
        over.pk: AllocationStatus.ENDED,
    }
