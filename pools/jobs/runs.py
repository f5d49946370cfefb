"""Queued runs (:class:`~pools.jobs.models.QueuedRun`): stored pending and queued through the
outbox, run by their task with progress, swept by beat. Each kind of run (the elastic and the
reclamation what-ifs) brings only its own computation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, TypeVar

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from pools.common.choices import EstimateStatus
from pools.common.errors import DomainError, NotFound
from pools.jobs import enqueue_on_commit, jobs_waiting
from pools.jobs.models import QueuedRun

logger = logging.getLogger(__name__)

Run = TypeVar("Run", bound=QueuedRun)


class RunFailed(Exception):
    """A failure the computation foresaw (no history source, Prometheus unreachable): the run
    is failed with ``message`` as its ``error`` and ``code`` as its ``error_code``."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def days_refusal(days: Any, *, most: int) -> str | None:
    """Why ``days`` cannot be the days of history a run replays (a whole number from 1 to
    ``most``; ``True`` is not one), or ``None`` when it can."""
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= most:
        return f"A whole number of days from 1 to {most}."
    return None


def params_json(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` as a run keeps them in JSON: Decimals as their text (``"30.00"``; the model
    field's ``to_python`` reads them back), the rest as they are."""
    return {k: str(v) if isinstance(v, Decimal) else v for k, v in values.items()}


def queued_run_create(model: type[Run], *, task_name: str, actor: Any, **fields: Any) -> Run:
    """Store a pending ``model`` run with ``fields`` (``created_by``: ``actor`` when signed in)
    and queue the task registered as ``task_name`` with its id once the transaction commits
    (:func:`~pools.jobs.enqueue_on_commit`); both or neither."""
    with transaction.atomic():
        run = model.objects.create(
            created_by=actor if getattr(actor, "is_authenticated", False) else None, **fields
        )
        enqueue_on_commit(task_name, run.pk)
    return run


def queued_run_execute(
    model: type[Run], *, run_id: int, compute: Callable[[Run, Callable[[int], None]], dict]
) -> Run:
    """Run queued ``model`` run ``run_id``: running at 0 %, then ``compute(run, progress)``
    (``progress(percent)`` stores the per cent done) and done with the JSON it returns as
    ``result``, or failed with ``error`` and ``error_code``: a :class:`RunFailed`'s or a
    :class:`~pools.common.errors.DomainError`'s message and code, ``internal`` for any other
    exception (a bug, logged: it must not leave the run running for ever). ``progress`` 100
    either way.

    Idempotent: a done or failed run is returned as it is (a redelivered task does nothing);
    an interrupted one runs again (computations write nothing else). Raises
    :class:`~pools.common.errors.NotFound` when the row is gone (what it was about was deleted)."""
    name = model._meta.verbose_name
    with transaction.atomic():
        run = model.objects.select_for_update().filter(pk=run_id).first()
        if run is None:
            raise NotFound(f"No {name} #{run_id}.", id=run_id)
        if run.finished:
            return run
        run.status, run.progress = EstimateStatus.RUNNING, 0
        run.save(update_fields=["status", "progress"])

    def progress(percent: int) -> None:
        model.objects.filter(pk=run_id).update(progress=percent)

    result, error, code = None, "", ""
    try:
        result = compute(run, progress)
    except (RunFailed, DomainError) as exc:
        error, code = exc.message, exc.code
    except Exception as exc:
        logger.exception("%s %s failed", name, run_id)
        error = f"The what-if failed with an internal error ({type(exc).__name__}); see the logs."
        code = "internal"
    model.objects.filter(pk=run_id).update(
        status=EstimateStatus.FAILED if error else EstimateStatus.DONE,
        progress=100,
        result=result,
        error=error,
        error_code=code,
        finished_at=timezone.now(),
    )
    run.refresh_from_db()
    return run


def queued_runs_sweep(
    model: type[QueuedRun], *, task_name: str, keep_days: int, now: datetime | None = None
) -> dict[str, int]:
    """Beat's housekeeping of ``model`` runs: queue ``task_name`` again for those whose task
    was lost (pending or running since before ``now`` minus ``settings.TASK_TIME_LIMIT_S``,
    the longest a task may run, unless their job still waits in the outbox), and delete those
    finished more than ``keep_days`` days ago. Returns ``{"requeued", "deleted"}``."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.TASK_TIME_LIMIT_S)
    waiting = {args[0] for args in jobs_waiting(task_name) if args}
    stranded = [
        pk
        for pk in model.objects.filter(
            status__in=(EstimateStatus.PENDING, EstimateStatus.RUNNING), created_at__lt=cutoff
        ).values_list("pk", flat=True)
        if pk not in waiting
    ]
    for pk in stranded:
        enqueue_on_commit(task_name, pk)
    deleted, _ = model.objects.filter(finished_at__lt=now - timedelta(days=keep_days)).delete()
    return {"requeued": len(stranded), "deleted": deleted}
