"""What the benchmarks on a test database share: running on one (:func:`on_test_database`)
and the serving fleet of the serving and advisor benchmarks (:func:`serving_fleet`). Import it
after ``django.setup()``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import django
from django.test.utils import get_runner, setup_test_environment


def on_test_database(run: Callable[[], None]) -> None:
    """Call ``run`` on a freshly migrated test database (``test_`` + the configured name),
    dropped afterwards."""
    setup_test_environment()
    runner = get_runner(django.conf.settings)(verbosity=0, interactive=False)
    old = runner.setup_databases()
    try:
        run()
    finally:
        runner.teardown_databases(old)


def serving_fleet(n: int, user, now: datetime) -> list:
    """``n`` teams (slugs ``0001`` …), each with one approved two-card L40S inference request
    in the Kubernetes pool ``serve`` requested by ``user`` and its active allocation, from two
    days before ``now`` to five days after; returns the allocations."""
    from pools.capacity.models import Allocation, CapacityRequest
    from pools.common.choices import AllocationStatus, RequestStatus, Scheduler
    from pools.inventory.models import GpuModel, Pool
    from pools.tenancy.models import Team

    pool, _ = Pool.objects.get_or_create(
        slug="serve", defaults={"name": "Serving", "scheduler": Scheduler.KUBERNETES}
    )
    model = GpuModel.objects.get(slug="l40s")
    window = {"starts_at": now - timedelta(days=2), "ends_at": now + timedelta(days=5)}
    teams = Team.objects.bulk_create(
        [Team(slug=f"{i:04d}", name=f"Team {i}") for i in range(1, n + 1)]
    )
    shared = {"pool": pool, "gpu_model": model, "card_count": 2, **window}
    requests = CapacityRequest.objects.bulk_create(
        [
            CapacityRequest(team=t, requested_by=user, workload_kind="inference",
                            justification="bench", status=RequestStatus.APPROVED, **shared)
            for t in teams
        ]
    )  # fmt: skip
    return Allocation.objects.bulk_create(
        [
            Allocation(request=r, team=r.team, status=AllocationStatus.ACTIVE, **shared)
            for r in requests
        ]
    )
