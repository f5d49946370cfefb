"""How services hand work to Celery, without importing the tasks that call them back.

Services queue a task by its registered name (:func:`enqueue_on_commit`); the tasks modules import
the services. So the dependency runs one way (tasks -> services), and nothing imports lazily to
dodge a cycle. Every name used here is checked against Celery's registry by a test.

With a broker, every job goes through the outbox (``models.QueuedJob``, ``outbox.py``): written
with the change that queues it, sent after commit, drained by beat (``OUTBOX_DRAIN``) and by
every worker as it starts while the broker was away.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from celery.result import EagerResult
from django.core.exceptions import ObjectDoesNotExist
from django.db import transaction
from django.utils import timezone

from pools.common.errors import NotFound
from pools.jobs.models import QueuedJob
from pools.jobs.outbox import job_send, job_send_after_commit, job_write, jobs_write

logger = logging.getLogger(__name__)

MAX_RETRIES = 8

# Registered names of the tasks services queue (module path + function name, Celery's default).
ALLOCATION_PROVISION = "pools.capacity.tasks.allocation_provision_task"
ALLOCATION_UNBIND = "pools.capacity.tasks.allocation_unbind_task"
ALLOCATION_REBIND = "pools.reclamation.tasks.allocation_rebind_task"
SIZING_ESTIMATE = "pools.sizing.tasks.sizing_estimate_task"
ELASTIC_APPLY = "pools.elastic.tasks.elastic_apply_task"
ELASTIC_HAND_BACK = "pools.elastic.tasks.elastic_hand_back_task"
ELASTIC_WHATIF = "pools.elastic.tasks.elastic_whatif_task"
RECLAMATION_WHATIF = "pools.reclamation.tasks.reclamation_whatif_task"
RECONCILE = "pools.capacity.tasks.reconcile_task"
RECONCILE_CLUSTER = "pools.capacity.tasks.reconcile_cluster_task"
RECURRING_SYNC = "pools.recurring.tasks.recurring_sync_task"
MAINTENANCE_SYNC = "pools.maintenance.tasks.maintenance_sync_task"
OVERRIDE_SYNC = "pools.overrides.tasks.override_sync_task"
IDLE_SCAN_CLUSTER = "pools.reclamation.tasks.idle_scan_cluster_task"
SERVING_ROLLUP = "pools.serving.tasks.serving_rollup_task"
SERVING_COMPACT = "pools.serving.tasks.serving_compact_task"
CALIBRATION_REFRESH = "pools.calibration.tasks.calibration_refresh_task"
ADVISOR_PASS = "pools.advisor.tasks.advisor_pass_task"
ADVISOR_DIGEST = "pools.advisor.tasks.advisor_digest_task"
OUTBOX_DRAIN = "pools.jobs.tasks.outbox_drain_task"
PENDING_WORK_REFRESH = "pools.waiting.tasks.pending_work_refresh_task"
PENDING_WORK_CLUSTER = "pools.waiting.tasks.pending_work_refresh_cluster_task"
INVENTORY_UPLOAD = "pools.inventory.tasks.inventory_upload_task"
CLUSTER_CHECK = "pools.clusters.tasks.cluster_check_task"
DASHBOARD_UTILISATION = "pools.dashboards.tasks.utilisation_refresh_task"
IDLE_RECLAIMED_EMAIL = "pools.reclamation.tasks.idle_reclaimed_email_task"


def retry_countdown(retries: int) -> int:
    """Seconds before retry ``retries`` + 1: 5, 10, 20 … capped at 10 minutes."""
    return min(600, 5 * 2**retries)


def retry_note(retries: int, *, now: datetime) -> str:
    """When retry ``retries`` + 1 of :data:`MAX_RETRIES` runs, for a reason shown to people:
    ``"retry 3 of 8 at 14:02"`` (``now`` + :func:`retry_countdown`, in ``TIME_ZONE``)."""
    at = timezone.localtime(now + timedelta(seconds=retry_countdown(retries)))
    return f"retry {retries + 1} of {MAX_RETRIES} at {at:%H:%M}"


def run_unless_gone(service: Callable[..., Any], /, *, gone: Any = None, **ids: Any) -> Any:
    """``service(**ids)`` for a task, or ``gone`` when a row it names was deleted before the
    task ran (an admin deleted the allocation, the policy, the pool): the service's
    ``DoesNotExist`` or :class:`~pools.common.errors.NotFound` is logged as a warning (the
    service, the ids, what was missing) and the task finishes -- no retry, no failure.

    Only for services that read the row before they write anything, or write in a transaction
    the missing row rolls back, or take back themselves what they wrote outside it (a
    provision that finds its allocation deleted after the scheduler applied it): then a missing
    row leaves nothing half-written. Other errors (a
    :class:`~scheduler_adapters.errors.SchedulerError` the task retries) pass through."""
    try:
        return service(**ids)
    except (ObjectDoesNotExist, NotFound) as exc:
        logger.warning("%s(%s): row gone (%s); task finished", service.__name__, ids, exc)
        return gone


def enqueue_on_commit(task_name: str, *args) -> None:
    """Queue the task registered as ``task_name`` with ``args`` (JSON values) once the current
    transaction commits (at once outside one); never queued when it rolls back.

    With a broker, the job is first written to the outbox (:class:`QueuedJob`) in this
    transaction and sent after commit; if the broker is unreachable then, the row stays and
    beat or the next worker to start sends it (:func:`pools.jobs.outbox.outbox_drain`), so a
    committed change never loses its work nor fails its request. With no broker (the demo,
    unit tests) the task runs eagerly in this process, as ``delay`` would. Raises ``KeyError``
    at once for a name Celery does not know.
    """
    task = current_app.tasks[task_name]
    if current_app.conf.task_always_eager:
        transaction.on_commit(lambda: task.delay(*args))
        return
    job_send_after_commit(job_id=job_write(task_name, list(args)))


def enqueue_all_on_commit(*jobs: tuple) -> None:
    """:func:`enqueue_on_commit` of each ``(task_name, *args)`` of ``jobs``, in that order,
    their outbox rows written by one INSERT (a change that queues two jobs pays one round trip
    for them, not two: issue #29 item 7). Raises ``KeyError`` before anything is written for a
    name Celery does not know."""
    tasks = [current_app.tasks[name] for name, *_ in jobs]
    if current_app.conf.task_always_eager:
        for task, (_, *args) in zip(tasks, jobs, strict=True):
            transaction.on_commit(lambda task=task, args=args: task.delay(*args))
        return
    for job_id in jobs_write([(name, list(args)) for name, *args in jobs]):
        job_send_after_commit(job_id=job_id)


def enqueue(task_name: str, *args) -> Any | None:
    """Queue the task registered as ``task_name`` now, for a page that must not call a
    scheduler or Prometheus in its own request.

    Returns the task's return value when tasks run eagerly (the demo: it has already run), else
    ``None`` (queued for a worker, through the outbox as :func:`enqueue_on_commit` does: an
    unreachable broker leaves it there for the next drain; the page says so). Never asks a
    result backend, which a deployment need not configure.
    """
    task = current_app.tasks[task_name]
    if current_app.conf.task_always_eager:
        result = task.delay(*args)
        return result.get() if isinstance(result, EagerResult) else None
    job = QueuedJob.objects.create(task_name=task_name, args=list(args))
    job_send(job_id=job.pk)
    return None


def jobs_waiting(task_name: str) -> list[list]:
    """The ``args`` of every ``task_name`` job still in the outbox (the broker has not taken
    them yet), oldest first."""
    return list(QueuedJob.objects.filter(task_name=task_name).values_list("args", flat=True))
