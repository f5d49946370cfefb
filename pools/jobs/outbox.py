"""Sending queued jobs to the broker, and what a request learns when it could not.

A job is sent under its row's lock (``SELECT … FOR UPDATE SKIP LOCKED``) and deleted in the
same transaction, so the send after commit and a drain running at the same moment never both
send it: each job reaches the broker once (twice only if the process dies between the broker's
acceptance and the delete's commit, which every task tolerates: they are safe to run twice).
"""

from __future__ import annotations

import contextvars
import logging
from typing import Literal

from celery import current_app
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerUnreachable

from pools.jobs.models import QueuedJob

logger = logging.getLogger(__name__)

# What a request (or any unit of work that watches) could not hand to the broker: task names.
_deferred: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "pools_jobs_deferred", default=None
)

Sent = Literal["sent", "taken", "failed"]


def job_send(*, job_id: int) -> Sent:
    """Hand queued job ``job_id`` to the broker and delete it.

    ``"sent"``; ``"taken"`` when it is gone or another process holds it (sending or sent it);
    ``"failed"`` when the broker is unreachable (kombu's ``OperationalError``): the row stays
    with one more attempt recorded, the failure is logged and noted for the watching request
    (whose later jobs then wait without another try).
    Raises ``KeyError`` for a task name Celery does not know (a bug, not an outage).
    """
    deferred = _deferred.get()
    if deferred:
        # The broker already refused this request once: the job waits with the others rather
        # than make the caller wait another publish timeout (kombu retries for ~0.6 s).
        name = QueuedJob.objects.filter(pk=job_id).values_list("task_name", flat=True).first()
        if name is None:
            return "taken"
        deferred.append(name)
        return "failed"
    with transaction.atomic():
        job = QueuedJob.objects.select_for_update(skip_locked=True).filter(pk=job_id).first()
        if job is None:
            return "taken"
        task = current_app.tasks[job.task_name]
        try:
            task.apply_async(args=job.args)
        except BrokerUnreachable as exc:
            job.attempts += 1
            job.last_attempt_at = timezone.now()
            job.last_error = type(exc).__name__
            job.save(update_fields=["attempts", "last_attempt_at", "last_error"])
            logger.warning(
                "broker unreachable (%s): %s #%s stays in the outbox, attempt %s",
                type(exc).__name__,
                job.task_name,
                job.pk,
                job.attempts,
            )
            if deferred is not None:
                deferred.append(job.task_name)
            return "failed"
        job.delete()
    return "sent"


def job_send_after_commit(*, job_id: int) -> None:
    """:func:`job_send` for an on-commit callback: the change is committed and the job is safe
    in the outbox whatever happens here, so nothing may turn the caller's answer into a 500.
    An unexpected error is logged with its traceback and the job left for the drain."""
    try:
        job_send(job_id=job_id)
    except Exception:
        logger.exception("queued job #%s could not be sent; it stays in the outbox", job_id)
        deferred = _deferred.get()
        if deferred is not None:
            deferred.append(f"job #{job_id}")


def outbox_drain(*, batch: int = 500) -> dict[str, int]:
    """Send up to ``batch`` queued jobs, oldest first; stop at the first the broker refuses
    (it is still down: the next drain tries again). Returns ``{"sent", "left"}`` (``left``:
    rows still in the outbox afterwards, including ones another process was sending)."""
    sent = 0
    for job_id in QueuedJob.objects.values_list("pk", flat=True)[:batch]:
        outcome = job_send(job_id=job_id)
        if outcome == "failed":
            break
        sent += outcome == "sent"
    return {"sent": sent, "left": QueuedJob.objects.count()}


def deferred_watch() -> contextvars.Token:
    """Start noting, in this context (a request), every job the broker could not take."""
    return _deferred.set([])


def deferred_unwatch(token: contextvars.Token) -> list[str]:
    """Stop noting; returns the task names deferred since :func:`deferred_watch`."""
    deferred = _deferred.get() or []
    _deferred.reset(token)
    return deferred
