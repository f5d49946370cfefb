"""Every scan leaves a record: counts, errors and notes, and old records are pruned."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from factories import AllocationFactory, PoolFactory

from pools.common.choices import AllocationStatus, Scheduler
from pools.reclamation.models import IdleScanRun, ReclamationPolicy
from pools.reclamation.services.runs import idle_scan_recorded, last_scan_runs
from pools.reclamation.tasks import idle_scan_task

pytestmark = pytest.mark.django_db


def test_a_scan_that_cannot_read_prometheus_is_recorded_with_its_error():
    now = timezone.now().replace(microsecond=0)
    pool = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    ReclamationPolicy.objects.create(pool=pool)
    AllocationFactory(
        pool=pool,
        card_count=2,
        status=AllocationStatus.ACTIVE,
        starts_at=now - timedelta(days=1),
        ends_at=now + timedelta(days=1),
    )
    with override_settings(PROMETHEUS_URL="http://127.0.0.1:9"):
        run = idle_scan_recorded(now=now)
    assert (run.started_at, run.allocations, run.idle) == (now, 1, 0)
    assert run.error.startswith("Prometheus unavailable, nothing changed")
    assert last_scan_runs() == [run]


def test_the_beat_task_records_and_old_runs_are_pruned():
    old = IdleScanRun.objects.create(started_at=timezone.now() - timedelta(days=31))
    kept = IdleScanRun.objects.create(started_at=timezone.now() - timedelta(days=29))
    result = idle_scan_task()
    run = IdleScanRun.objects.get(pk=result["run"])
    assert run.notes == ["no pool has a reclamation policy"]
    assert set(IdleScanRun.objects.values_list("pk", flat=True)) == {kept.pk, run.pk}
    assert not IdleScanRun.objects.filter(pk=old.pk).exists()
