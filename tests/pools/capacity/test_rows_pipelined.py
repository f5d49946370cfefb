"""Pipelined writes (pools.capacity.rows.pipelined; issue #29 item 7: the approval's four writes
in two round trips while the pool is locked): they run in order, a read inside sees the writes
before it, and a write that fails -- its error read by nobody before the block ends -- is
Django's database error and leaves nothing written, in an approval too."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from factories import CapacityRequestFactory, PoolFactory, next_week_9am

from pools.capacity.models import Allocation
from pools.capacity.rows import pipelined
from pools.capacity.services import requests as request_services
from pools.common.choices import RequestStatus
from pools.inventory.models import Pool
from pools.jobs.models import QueuedJob

pytestmark = pytest.mark.django_db

_RENAME = f"UPDATE {Pool._meta.db_table} SET name = %s WHERE id = %s"


def test_writes_run_in_order_and_a_read_sees_those_before_it():
    pool = PoolFactory(name="first")
    with transaction.atomic(), pipelined(), connection.cursor() as cursor:
        cursor.execute(_RENAME, ["second", pool.pk])
        cursor.execute(f"SELECT name FROM {Pool._meta.db_table} WHERE id = %s", [pool.pk])
        seen = cursor.fetchone()[0]
        cursor.execute(_RENAME, ["third", pool.pk])

    assert seen == "second"
    pool.refresh_from_db()
    assert pool.name == "third"


def test_a_failing_write_read_by_nobody_is_djangos_error_and_nothing_is_written():
    pool = PoolFactory(name="kept")

    with pytest.raises(IntegrityError):  # django.db's, not the driver's NotNullViolation
        with transaction.atomic(), pipelined(), connection.cursor() as cursor:
            cursor.execute(_RENAME, ["changed", pool.pk])
            cursor.execute(_RENAME, [None, pool.pk])  # name is NOT NULL

    pool.refresh_from_db()
    assert pool.name == "kept"


def test_an_approval_whose_pipelined_write_fails_writes_nothing(
    infer_pool, l40s, team, team_member, pool_admin, request_state, monkeypatch
):
    """The audit INSERT replaced by a write that fails: the request stays submitted, no
    allocation, audit event or outbox job is left, whether provisioning is queued through the
    outbox (a broker) or run eagerly."""
    start = next_week_9am()
    submitted = CapacityRequestFactory(
        team=team, requested_by=team_member, pool=infer_pool, gpu_model=l40s, card_count=1,
        starts_at=start, ends_at=start + timedelta(days=2), status=RequestStatus.SUBMITTED,
    )  # fmt: skip

    def failing_write(events):
        with connection.cursor() as cursor:
            cursor.execute(_RENAME, [None, infer_pool.pk])

    monkeypatch.setattr(request_services, "audit_events_write", failing_write)
    from portal.celery import app

    before, jobs = request_state(), QueuedJob.objects.count()
    was = app.conf.task_always_eager
    try:
        for eager in (True, False):
            app.conf.task_always_eager = eager
            with pytest.raises(IntegrityError):
                request_services.capacity_request_approve(request=submitted, actor=pool_admin)

            assert request_state() == before
            assert QueuedJob.objects.count() == jobs
            assert not Allocation.objects.filter(request=submitted).exists()
    finally:
        app.conf.task_always_eager = was
