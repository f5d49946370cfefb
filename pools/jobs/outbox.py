"""Sending queued jobs to the broker, and what a request learns when it could not.

A job is sent under its row's lock (``FOR UPDATE SKIP LOCKED``), deleted in the same
transaction before the send (and put back if the broker refuses it), so the send after commit
and a drain running at the same moment never both send it: each job reaches the broker once
(twice only if the process dies between the broker's acceptance and the delete's commit, which
every task tolerates: they are safe to run twice).

That transaction, when it is one of its own, commits without waiting for its WAL to reach the
disk (PostgreSQL's ``synchronous_commit`` off for it alone, "Asynchronous Commit" in the
PostgreSQL manual): the approval that queued the jobs has committed durably already, and a
delete lost to a database crash in the next fraction of a second (at most three
``wal_writer_delay``) only leaves the row for the drain to send again, the same duplicate a
process dying after the send makes. Every approval sends its jobs so, and the flush was a
second disk wait per approval (about 3 ms on the bench's machine).
"""

from __future__ import annotations

import contextvars
import logging
import threading
from typing import Literal

from celery import current_app
from django.db import connection, transaction
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
    """Hand queued job ``job_id`` to the broker and delete it: :func:`jobs_send` of one."""
    return jobs_send(job_ids=[job_id])[job_id]


def jobs_send(*, job_ids: list[int]) -> dict[int, Sent]:
    """Hand the queued jobs ``job_ids`` to the broker, oldest first, in one transaction that
    takes them out of the outbox first (BEGIN, one ``DELETE … WHERE id IN (SELECT … FOR UPDATE
    SKIP LOCKED) RETURNING …``, COMMIT, however many jobs): the rows stay locked, and are gone
    only if that transaction commits, so a process that dies before the commit leaves them for
    the drain. A change that queues two jobs pays 3 statements after its commit, not 8.
    Returns each id's outcome:

    ``"sent"``; ``"taken"`` when it is gone or another process holds it (sending or sent it);
    ``"failed"`` when the broker is unreachable (kombu's ``OperationalError``): that row is put
    back (same id and ``created_at``) with one more attempt recorded, the failure is logged and
    noted for the watching request, and the jobs after it are put back untried (``"failed"``
    too, noted, no attempt recorded), as are all of them when the watching request was refused
    already (kombu retries for ~0.6 s: the caller must not wait that again).
    Raises ``KeyError`` for a task name Celery does not know (a bug, not an outage; the
    transaction rolls back and the rows stay).
    """
    outcome: dict[int, Sent] = dict.fromkeys(job_ids, "taken")
    deferred = _deferred.get()
    if deferred:
        for pk, name in QueuedJob.objects.filter(pk__in=job_ids).values_list("pk", "task_name"):
            deferred.append(name)
            outcome[pk] = "failed"
        return outcome
    own = not connection.in_atomic_block  # a caller's transaction keeps its durable commit
    with transaction.atomic():
        unsent: list[tuple[QueuedJob, tuple]] = []
        for job, row in _jobs_taken(job_ids, commit_async=own):
            if unsent:  # the broker refused an earlier one: this one waits with it
                outcome[job.pk] = "failed"
                if deferred is not None:
                    deferred.append(job.task_name)
                unsent.append((job, row))
                continue
            try:
                current_app.tasks[job.task_name].apply_async(args=job.args)
            except BrokerUnreachable as exc:
                _record_refusal(job, exc, deferred)
                outcome[job.pk] = "failed"
                unsent.append((job, row))
                continue
            outcome[job.pk] = "sent"
        if unsent:
            _put_back(unsent)
    return outcome


# The outbox's statements written out: every approval writes a row or two and pays the send's
# statement after its commit, and the ORM took longer to build them than PostgreSQL to run
# them (issue #29 item 7: approvals within 2x the bare transaction). SQLite has no row locks
# (a write transaction locks the database).
_TABLE = QueuedJob._meta.db_table
_TAKE = (
    f"DELETE FROM {_TABLE} WHERE id IN (SELECT id FROM {_TABLE} WHERE id IN ({{ids}}){{lock}}) "
    "RETURNING id, task_name, args, attempts, created_at, last_attempt_at, last_error"
)
_COLUMNS = ["id", "task_name", "args", "attempts"]
# The same, setting the transaction's synchronous_commit off as it deletes (no statement of its
# own; see the module docstring). Evaluated for each row: with no row nothing is deleted.
_TAKE_ASYNC = _TAKE + ", set_config('synchronous_commit', 'off', true)"
_PUT_BACK = (
    f"INSERT INTO {_TABLE} (id, task_name, args, attempts, created_at, last_attempt_at, "
    "last_error) VALUES (%s, %s, %s, %s, %s, %s, %s)"
)
_INSERT_INTO = (
    f"INSERT INTO {_TABLE} (task_name, args, created_at, attempts, last_attempt_at, last_error)"
)
_INSERT_VALUES = "(%s, %s, %s, 0, NULL, '')"


def job_write(task_name: str, args: list) -> int:
    """Write one outbox row (``task_name`` with JSON ``args``, no attempt yet) in the caller's
    transaction; returns its id (:func:`jobs_write` of one)."""
    return jobs_write([(task_name, args)])[0]


def jobs_write(jobs: list[tuple[str, list]]) -> list[int]:
    """Write an outbox row for each ``(task_name, args)`` of ``jobs`` in one INSERT, in the
    caller's transaction, no attempt yet; returns their ids in that order (ids follow the VALUES
    order). The approval's hot path writes one or two per request."""
    if not jobs:
        return []
    args = QueuedJob._meta.get_field("args")
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    values = ", ".join([_INSERT_VALUES] * len(jobs))
    params = [p for name, job_args in jobs
              for p in (name, args.get_db_prep_save(job_args, connection), now)]  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(f"{_INSERT_INTO} VALUES {values} RETURNING id", params)
        return sorted(pk for (pk,) in cursor.fetchall())


def _jobs_taken(job_ids: list[int], *, commit_async: bool = False) -> list[tuple]:
    """The rows of ``job_ids`` no other process holds, oldest first, deleted (locked until the
    caller's transaction ends, gone for good if it commits): ``(job, row)`` pairs, the job with
    its id, task name, args and attempts (what a send and a refusal use), the row as the
    database returned it (for :func:`_put_back`). ``commit_async``: that transaction (the
    send's own) commits without waiting for the disk, on PostgreSQL."""
    asynchronous = commit_async and connection.vendor == "postgresql"
    skip = connection.features.has_select_for_update_skip_locked
    sql = (_TAKE_ASYNC if asynchronous else _TAKE).format(
        ids=", ".join(["%s"] * len(job_ids)), lock=" FOR UPDATE SKIP LOCKED" if skip else ""
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, job_ids)
        rows = sorted(cursor.fetchall())  # RETURNING has no order
    args = QueuedJob._meta.get_field("args")
    return [
        (QueuedJob.from_db(connection.alias, _COLUMNS,
                           (row[0], row[1], args.from_db_value(row[2], None, connection), row[3])),
         row)
        for row in rows
    ]  # fmt: skip


def _put_back(unsent: list[tuple]) -> None:
    """Insert the jobs of ``unsent`` (``(job, row)`` from :func:`_jobs_taken`) again under
    their own ids and ``created_at``, with the attempts and last error the job now carries."""
    args = QueuedJob._meta.get_field("args")
    with connection.cursor() as cursor:
        cursor.executemany(
            _PUT_BACK,
            [
                (job.pk, job.task_name, args.get_db_prep_save(job.args, connection), job.attempts,
                 row[4], *_refusal(job, row))
                for job, row in unsent
            ],
        )  # fmt: skip


def _refusal(job: QueuedJob, row: tuple) -> tuple:
    """``(last_attempt_at, last_error)`` to write back: the refusal :func:`_record_refusal`
    set on ``job``, else what ``row`` held (an untried job)."""
    when = vars(job).get("last_attempt_at")  # set on a refused job only: no deferred read
    if when is None:
        return row[5], row[6]
    return connection.ops.adapt_datetimefield_value(when), job.last_error


def _record_refusal(job: QueuedJob, exc: Exception, deferred: list[str] | None) -> None:
    """One more failed attempt on ``job`` (the broker refused it; :func:`_put_back` writes it),
    logged and noted."""
    job.attempts += 1
    job.last_attempt_at = timezone.now()
    job.last_error = type(exc).__name__
    logger.warning(
        "broker unreachable (%s): %s #%s stays in the outbox, attempt %s",
        type(exc).__name__,
        job.task_name,
        job.pk,
        job.attempts,
    )
    if deferred is not None:
        deferred.append(job.task_name)


# Jobs queued on this thread's connection whose after-commit send has not run yet: the first
# callback of a transaction sends them all, the later ones find nothing left to do.
_unsent = threading.local()


def job_send_after_commit(*, job_id: int) -> None:
    """Register queued job ``job_id`` (written in the current transaction) to be sent once it
    commits, together with the other jobs that transaction queued (:func:`jobs_send`).

    Each job registers its own on-commit callback, so that a job queued inside a savepoint that
    is rolled back takes nobody's send with it; the first callback to run sends every job
    registered so far (ids whose rows were rolled back are simply not found), the later ones
    find the list empty. After commit the change and its jobs are safe in the outbox whatever
    happens in the send, so nothing may turn the caller's answer into a 500: an unexpected
    error is logged with its traceback and the jobs left for the drain."""
    if not hasattr(_unsent, "ids"):
        _unsent.ids = []
    _unsent.ids.append(job_id)
    transaction.on_commit(_send_unsent)


def _send_unsent() -> None:
    job_ids, _unsent.ids = _unsent.ids, []
    if not job_ids:
        return
    try:
        jobs_send(job_ids=job_ids)
    except Exception:
        logger.exception("queued jobs %s could not be sent; they stay in the outbox", job_ids)
        deferred = _deferred.get()
        if deferred is not None:
            deferred.extend(f"job #{pk}" for pk in job_ids)


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
