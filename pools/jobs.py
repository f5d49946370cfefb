"""How services hand work to Celery, without importing the tasks that call them back.

Services queue a task by its registered name (:func:`enqueue_on_commit`); the tasks modules import
the services. So the dependency runs one way (tasks -> services), and nothing imports lazily to
dodge a cycle. Every name used here is checked against Celery's registry by a test.
"""

from __future__ import annotations

from typing import Any

from celery import current_app
from celery.result import EagerResult
from django.db import transaction

MAX_RETRIES = 8

# Registered names of the tasks services queue (module path + function name, Celery's default).
ALLOCATION_PROVISION = "pools.capacity.tasks.allocation_provision_task"
ALLOCATION_UNBIND = "pools.capacity.tasks.allocation_unbind_task"
ALLOCATION_REBIND = "pools.reclamation.tasks.allocation_rebind_task"
SIZING_ESTIMATE = "pools.sizing.tasks.sizing_estimate_task"
ELASTIC_APPLY = "pools.elastic.tasks.elastic_apply_task"
ELASTIC_HAND_BACK = "pools.elastic.tasks.elastic_hand_back_task"
RECONCILE = "pools.capacity.tasks.reconcile_task"
IDLE_SCAN = "pools.reclamation.tasks.idle_scan_task"
SERVING_ROLLUP = "pools.serving.tasks.serving_rollup_task"
SERVING_COMPACT = "pools.serving.tasks.serving_compact_task"


def retry_countdown(retries: int) -> int:
    """Seconds before retry ``retries`` + 1: 5, 10, 20 … capped at 10 minutes."""
    return min(600, 5 * 2**retries)


def enqueue_on_commit(task_name: str, *args) -> None:
    """Queue the task registered as ``task_name`` with ``args`` once the current transaction
    commits (at once outside one); never queued when it rolls back.

    With no broker configured (the demo) the task runs eagerly in this process, as ``delay``
    would. Raises ``KeyError`` at commit time for a name Celery does not know.
    """
    transaction.on_commit(lambda: current_app.tasks[task_name].delay(*args))


def enqueue(task_name: str, *args) -> Any | None:
    """Queue the task registered as ``task_name`` now, for a page that must not call a
    scheduler or Prometheus in its own request.

    Returns the task's return value when tasks run eagerly (the demo: it has already run), else
    ``None`` (queued for a worker; the page says so). Never asks a result backend, which a
    deployment need not configure.
    """
    result = current_app.tasks[task_name].delay(*args)
    return result.get() if isinstance(result, EagerResult) else None
