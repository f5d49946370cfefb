"""The outbox (pools.jobs): a committed change keeps its job when the broker is down, and a
drain later sends each job exactly once.

The broker is played by a closed port (an outage: kombu's ``OperationalError``) and by kombu's
in-memory transport (a broker that works, whose queue the test can count); the same drain
against the machine's real Redis is in ``tests/integration/faults/``.
"""

from __future__ import annotations

import logging

import pytest
from broker_support import CLOSED_BROKER, celery_broker
from celery import current_app
from django.db import transaction

from pools import jobs
from pools.jobs.models import QueuedJob
from pools.jobs.outbox import deferred_unwatch, deferred_watch, outbox_drain

pytestmark = pytest.mark.django_db(transaction=True)


def _memory_queue_messages() -> list[dict]:
    """Every message in the in-memory broker's default queue, as (task name, args), taken."""
    taken = []
    with current_app.connection_for_write() as conn:
        queue = conn.SimpleQueue("celery")
        while queue.qsize():
            message = queue.get(block=False)
            taken.append((message.headers["task"], message.payload[0]))
            message.ack()
        queue.close()
    return taken


def test_a_broker_outage_keeps_the_job_in_the_outbox_and_logs_it(caplog):
    caplog.set_level(logging.WARNING, logger="pools.jobs.outbox")
    with celery_broker(CLOSED_BROKER):
        token = deferred_watch()
        with transaction.atomic():
            jobs.enqueue_on_commit(jobs.RECONCILE)
            jobs.enqueue_on_commit(jobs.SIZING_ESTIMATE, 42)
        deferred = deferred_unwatch(token)

    # The second job is not tried: the broker refused this unit of work already.
    rows = list(QueuedJob.objects.values_list("task_name", "args", "attempts", "last_error"))
    assert rows == [
        (jobs.RECONCILE, [], 1, "OperationalError"),
        (jobs.SIZING_ESTIMATE, [42], 0, ""),
    ]
    assert deferred == [jobs.RECONCILE, jobs.SIZING_ESTIMATE]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "stays in the outbox" in warnings[0]


def test_a_refused_job_stays_under_its_own_id_and_time():
    """The send takes the rows out before it tries the broker; a refused job is put back as it
    was (id, task, args, created_at), with its attempt recorded."""
    from datetime import UTC, datetime

    from pools.jobs.outbox import job_send

    queued = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
    job = QueuedJob.objects.create(task_name=jobs.SIZING_ESTIMATE, args=[5], created_at=queued)
    with celery_broker(CLOSED_BROKER):
        outcome = job_send(job_id=job.pk)

    assert outcome == "failed"
    assert list(
        QueuedJob.objects.values_list("pk", "task_name", "args", "created_at", "attempts")
    ) == [(job.pk, jobs.SIZING_ESTIMATE, [5], queued, 1)]
    assert QueuedJob.objects.get().last_attempt_at is not None


def test_a_rolled_back_change_queues_nothing():
    with celery_broker(CLOSED_BROKER):
        with pytest.raises(RuntimeError), transaction.atomic():
            jobs.enqueue_on_commit(jobs.RECONCILE)
            raise RuntimeError("the change failed")

    assert QueuedJob.objects.count() == 0


def test_an_unknown_task_name_fails_before_anything_is_written():
    with celery_broker(CLOSED_BROKER), pytest.raises(KeyError):
        jobs.enqueue_on_commit("pools.nope_task")

    assert QueuedJob.objects.count() == 0


def test_a_reachable_broker_takes_the_job_and_the_outbox_is_left_empty():
    with celery_broker("memory://"):
        with transaction.atomic():
            jobs.enqueue_on_commit(jobs.SIZING_ESTIMATE, 7)
        sent = _memory_queue_messages()

    assert sent == [(jobs.SIZING_ESTIMATE, [7])]
    assert QueuedJob.objects.count() == 0


def test_the_jobs_of_one_transaction_are_sent_together_in_three_statements():
    """Two jobs queued by one change: after its commit one transaction sends both (BEGIN, one
    DELETE that locks and returns them, COMMIT), not one transaction each (issue #29 item 7:
    approvals queue two and paid 8 statements for them, then 4 with a SELECT and a DELETE)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with celery_broker("memory://"):
        with CaptureQueriesContext(connection) as ctx:
            with transaction.atomic():
                jobs.enqueue_on_commit(jobs.SIZING_ESTIMATE, 7)
                jobs.enqueue_on_commit(jobs.RECONCILE)
                inside = len(ctx.captured_queries)  # BEGIN and the two INSERTs
        after = [q["sql"].split()[0] for q in ctx.captured_queries[inside:]]
        sent = _memory_queue_messages()

    assert after == ["COMMIT", "BEGIN", "DELETE", "COMMIT"]
    assert sent == [(jobs.SIZING_ESTIMATE, [7]), (jobs.RECONCILE, [])]
    assert QueuedJob.objects.count() == 0


def test_jobs_queued_together_are_written_by_one_insert_and_sent_in_order():
    """``enqueue_all_on_commit``: the approval's two jobs cost one INSERT in its transaction
    (issue #29 item 7), and reach the broker in the order given."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with celery_broker("memory://"):
        with CaptureQueriesContext(connection) as ctx:
            with transaction.atomic():
                jobs.enqueue_all_on_commit((jobs.SIZING_ESTIMATE, 7), (jobs.RECONCILE,))
                inside = [q["sql"].split()[0] for q in ctx.captured_queries]
        sent = _memory_queue_messages()

    assert inside == ["BEGIN", "INSERT"]
    assert sent == [(jobs.SIZING_ESTIMATE, [7]), (jobs.RECONCILE, [])]
    assert QueuedJob.objects.count() == 0


def _synchronous_commit_at_send(monkeypatch) -> list[str]:
    """What ``synchronous_commit`` says in the transaction each send runs in, as the broker
    takes the job."""
    from django.db import connection

    seen = []
    task = current_app.tasks[jobs.SIZING_ESTIMATE]
    original = task.apply_async

    def apply_async(*args, **kwargs):
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            seen.append(cursor.fetchone()[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(task, "apply_async", apply_async)
    return seen


@pytest.mark.postgresql  # synchronous_commit is PostgreSQL's
def test_the_send_after_commit_does_not_wait_for_the_disk_a_callers_transaction_does(
    monkeypatch,
):
    """The send's own transaction commits asynchronously (a delete lost to a crash only means
    a second send); a page that queues inside its own transaction keeps that one durable."""
    from django.db import connection

    seen = _synchronous_commit_at_send(monkeypatch)
    with celery_broker("memory://"):
        with transaction.atomic():
            jobs.enqueue_on_commit(jobs.SIZING_ESTIMATE, 7)
        with transaction.atomic():
            jobs.enqueue(jobs.SIZING_ESTIMATE, 8)
            with connection.cursor() as cursor:
                cursor.execute("SHOW synchronous_commit")
                after = cursor.fetchone()[0]
        sent = _memory_queue_messages()

    assert seen == ["off", "on"]
    assert after == "on"
    assert sent == [(jobs.SIZING_ESTIMATE, [7]), (jobs.SIZING_ESTIMATE, [8])]
    assert QueuedJob.objects.count() == 0


def test_a_job_queued_in_a_rolled_back_savepoint_takes_no_other_job_with_it():
    with celery_broker("memory://"):
        with transaction.atomic():
            with pytest.raises(RuntimeError), transaction.atomic():
                jobs.enqueue_on_commit(jobs.SIZING_ESTIMATE, 1)
                raise RuntimeError("the inner step failed")
            jobs.enqueue_on_commit(jobs.SIZING_ESTIMATE, 2)
        sent = _memory_queue_messages()

    assert sent == [(jobs.SIZING_ESTIMATE, [2])]
    assert QueuedJob.objects.count() == 0


def test_a_drain_after_the_outage_sends_each_job_exactly_once():
    with celery_broker(CLOSED_BROKER):
        for estimate_id in (1, 2, 3):
            jobs.enqueue_on_commit(jobs.SIZING_ESTIMATE, estimate_id)
        # Still down: the drain stops at the first refusal and records one more attempt.
        assert outbox_drain() == {"sent": 0, "left": 3}
    assert list(QueuedJob.objects.values_list("attempts", flat=True)) == [2, 1, 1]

    with celery_broker("memory://"):
        first = outbox_drain()
        second = outbox_drain()
        sent = _memory_queue_messages()

    assert (first, second) == ({"sent": 3, "left": 0}, {"sent": 0, "left": 0})
    assert sent == [(jobs.SIZING_ESTIMATE, [n]) for n in (1, 2, 3)]


def test_a_page_that_queues_now_gets_none_and_keeps_the_job_when_the_broker_is_down():
    with celery_broker(CLOSED_BROKER):
        assert jobs.enqueue(jobs.RECONCILE) is None

    assert list(QueuedJob.objects.values_list("task_name", "attempts")) == [(jobs.RECONCILE, 1)]


def test_the_drain_is_registered_and_scheduled_by_beat():
    from django.conf import settings

    assert jobs.OUTBOX_DRAIN in current_app.tasks
    beat = settings.CELERY_BEAT_SCHEDULE.values()
    schedule = {entry["task"]: entry["schedule"] for entry in beat}
    assert schedule[jobs.OUTBOX_DRAIN] == 60


def test_an_unexpected_send_error_after_commit_is_logged_and_the_job_kept(monkeypatch, caplog):
    """Whatever fails once the change has committed (here the database, as the row is locked
    for sending), the caller's answer must not become a 500: the job stays for the drain."""
    from pools.jobs import outbox

    def broken(**kwargs):
        raise RuntimeError("the database went away")

    with celery_broker(CLOSED_BROKER):
        monkeypatch.setattr(outbox, "jobs_send", broken)
        token = deferred_watch()
        with transaction.atomic():
            jobs.enqueue_on_commit(jobs.RECONCILE)
        deferred = deferred_unwatch(token)

    assert QueuedJob.objects.count() == 1
    assert len(deferred) == 1
    assert "could not be sent; they stay in the outbox" in caplog.text
