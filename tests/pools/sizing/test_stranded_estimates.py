"""Beat's sweep of stranded estimates: pending or running longer than the longest task may run
(TASK_TIME_LIMIT_S) means their job was lost (a hard-killed worker, a flushed queue); they are
queued again, unless their job is still waiting in the outbox for the broker (QA round 2:
such an estimate stayed pending for ever)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from broker_support import CLOSED_BROKER, celery_broker
from django.conf import settings
from django.test import override_settings
from django.utils import timezone
from factories import SizingEstimateFactory

from pools import jobs
from pools.common.choices import EstimateStatus
from pools.jobs.models import QueuedJob
from pools.sizing.models import SizingEstimate
from pools.sizing.services import sizing_estimates_requeue_stranded

pytestmark = pytest.mark.django_db


NOW = timezone.now()


def _estimate(status: str, *, created_s_ago: int, started_s_ago: int | None = None) -> int:
    """An estimate in ``status`` created (and started) that many seconds before :data:`NOW`."""
    now = NOW
    estimate = SizingEstimateFactory(
        status=status, results={} if status == EstimateStatus.DONE else None
    )
    SizingEstimate.objects.filter(pk=estimate.pk).update(
        created_at=now - timedelta(seconds=created_s_ago),
        started_at=None if started_s_ago is None else now - timedelta(seconds=started_s_ago),
    )
    return estimate.pk


@override_settings(TASK_TIME_LIMIT_S=900)
def test_only_estimates_older_than_the_longest_task_and_not_waiting_are_queued_again(
    django_capture_on_commit_callbacks,
):
    """Limit 900 s: pending 901 s and running since 901 s are stranded; pending 899 s, running
    since 10 s, done and failed are not; pending 7,200 s with its job in the outbox waits."""
    pending_old = _estimate(EstimateStatus.PENDING, created_s_ago=901)
    _estimate(EstimateStatus.PENDING, created_s_ago=899)
    running_old = _estimate(EstimateStatus.RUNNING, created_s_ago=2000, started_s_ago=901)
    _estimate(EstimateStatus.RUNNING, created_s_ago=2000, started_s_ago=10)
    _estimate(EstimateStatus.DONE, created_s_ago=9000)
    _estimate(EstimateStatus.FAILED, created_s_ago=9000)
    waiting = _estimate(EstimateStatus.PENDING, created_s_ago=7200)
    QueuedJob.objects.create(task_name=jobs.SIZING_ESTIMATE, args=[waiting])

    with celery_broker(CLOSED_BROKER), django_capture_on_commit_callbacks(execute=True):
        requeued = sizing_estimates_requeue_stranded(now=NOW)

    assert sorted(requeued) == sorted([pending_old, running_old])
    queued = QueuedJob.objects.filter(task_name=jobs.SIZING_ESTIMATE).exclude(args=[waiting])
    assert sorted(args[0] for args in queued.values_list("args", flat=True)) == sorted(requeued)


def test_the_sweep_is_registered_and_scheduled_by_beat():
    from celery import current_app

    task = "pools.sizing.tasks.sizing_requeue_stranded_task"
    assert task in current_app.tasks
    beat = {entry["task"]: entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert beat[task] == 300


def test_the_visibility_timeout_outlasts_the_longest_task_and_retry_countdown():
    """Defaults: tasks stop at 900 s (hard), retries wait at most 600 s
    (pools.jobs.retry_countdown), so Redis may hand a message out again after 900 + 60 s."""
    assert settings.CELERY_TASK_TIME_LIMIT == 900
    assert settings.CELERY_TASK_SOFT_TIME_LIMIT == 870
    assert jobs.retry_countdown(20) == 600
    assert settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] == 960
