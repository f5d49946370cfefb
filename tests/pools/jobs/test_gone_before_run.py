"""A task whose row was deleted before a worker ran it (an admin deleted the allocation, the
elastic policy, the override, the pool) logs a warning and finishes: no exception (so no
failure and no retry), nothing written, and the result says the row was missing
(:func:`pools.jobs.run_unless_gone`)."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from celery import current_app
from django.utils import timezone
from factories import AllocationFactory, ElasticPolicyFactory, PoolFactory, TeamFactory

from pools import jobs
from pools.audit.models import AuditEvent
from pools.common.choices import AllocationStatus
from pools.inventory.models import GpuModel
from pools.overrides.models import TemporaryOverride

pytestmark = pytest.mark.django_db


def _deleted(obj) -> int:
    """``obj``'s id, after deleting its row (as the Django admin does)."""
    pk = obj.pk
    obj.delete()
    return pk


def _run(task_name: str, *args):
    """Run the task registered as ``task_name`` as a worker would (``apply``: no broker,
    exceptions propagated); returns its ``EagerResult``."""
    return current_app.tasks[task_name].apply(args=args)


def _gone_warnings(caplog, service: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and r.getMessage().startswith(f"{service}(")
    ]


@pytest.mark.parametrize(
    ("task_name", "service", "status", "expected"),
    [
        (jobs.ALLOCATION_PROVISION, "allocation_provision", AllocationStatus.APPROVED, "missing"),
        (jobs.ALLOCATION_UNBIND, "allocation_unbind", AllocationStatus.ENDED, None),
        (jobs.ALLOCATION_REBIND, "allocation_rebind", AllocationStatus.ACTIVE, None),
    ],
)
def test_an_allocation_task_finds_its_allocation_deleted(
    caplog, task_name, service, status, expected
):
    caplog.set_level(logging.WARNING, logger="pools.jobs")
    now = timezone.now()
    allocation_id = _deleted(AllocationFactory(status=status, starts_at=now - timedelta(hours=1)))
    events_before = AuditEvent.objects.count()

    result = _run(task_name, allocation_id)

    assert result.successful()
    assert result.get() == expected
    assert AuditEvent.objects.count() == events_before
    [warning] = _gone_warnings(caplog, service)
    assert warning.startswith(f"{service}({{'allocation_id': {allocation_id}")
    assert warning.endswith(
        "): row gone (Allocation matching query does not exist.); task finished"
    )


def test_the_elastic_apply_finds_its_policy_deleted(caplog):
    caplog.set_level(logging.WARNING, logger="pools.jobs")
    policy_id = _deleted(ElasticPolicyFactory())

    result = _run(jobs.ELASTIC_APPLY, policy_id)

    assert result.successful()
    assert result.get() is None
    assert len(_gone_warnings(caplog, "elastic_apply")) == 1


def test_the_hand_back_finds_its_pool_deleted(caplog):
    caplog.set_level(logging.WARNING, logger="pools.jobs")
    pool_id = _deleted(PoolFactory(slug="gone"))
    l40s = GpuModel.objects.get(slug="l40s")
    now = timezone.now()

    result = _run(
        jobs.ELASTIC_HAND_BACK,
        pool_id,
        l40s.pk,
        now.isoformat(),
        (now + timedelta(days=1)).isoformat(),
    )

    assert result.successful()
    assert result.get() == []
    assert len(_gone_warnings(caplog, "elastic_hand_back_run")) == 1


def test_the_override_sync_finds_its_override_deleted():
    pool = PoolFactory(slug="train")
    override = TemporaryOverride.objects.create(
        team=TeamFactory(slug="vision"),
        pool=pool,
        kind="ceiling",
        gpu_model=GpuModel.objects.get(slug="l40s"),
        cards=3,
        reason="deadline",
        until=timezone.now() + timedelta(days=1),
        created_at=timezone.now(),
    )
    override_id = _deleted(override)

    result = _run(jobs.OVERRIDE_SYNC, override_id)

    assert result.successful()
    assert result.get() is None
