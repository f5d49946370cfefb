"""A Celery worker hard-killed (SIGKILL) in the middle of an ``acks_late`` task: the message
was never acknowledged, so once the Redis visibility timeout has passed a live worker gets it
again and the task runs to completion exactly once.

The task is the real sizing estimate (``pools.sizing.tasks.sizing_estimate_task``), queued by
the real API on a queue of this test's own on the machine's Redis. The first worker stalls
inside the arithmetic (the estimate already says ``running``) and is killed there; a second
worker, started after the visibility timeout, restores the message and runs it. Both workers
are ``integration.faults.stalling_worker``: the portal's app with the visibility timeout cut
to a few seconds (production: 960 s, ``portal.settings.base``; the arithmetic of that value is
tested in tests/portal) and unacknowledged-message keys of the test's own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import redis
from broker_support import catalogue_loaded, celery_broker
from django.db import connection
from integration.processes import celery_worker_command

from pools import jobs
from pools.audit.models import AuditEvent
from pools.common.choices import EstimateStatus
from pools.sizing.models import SizingEstimate

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[3]
REDIS = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
VISIBILITY_TIMEOUT_S = 4
ESTIMATE = {
    "model": "qwen2_5_72b",
    "precision": "FP8",
    "input_len": 1000,
    "output_len": 200,
    "demand_kind": "output_rate",
    "output_tok_s": 2000,
}


@pytest.fixture
def queue():
    """A queue name of this test's own on the real Redis; it and its keys removed afterwards."""
    name = f"faults-kill-{uuid.uuid4().hex[:12]}"
    yield name
    client = redis.Redis.from_url(REDIS)
    for key in [name, *client.scan_iter(match=f"*{name}*")]:
        client.delete(key)


@pytest.fixture(autouse=True)
def _catalogue():
    catalogue_loaded()


def _start_worker(queue: str, log: Path, **extra_env: str) -> subprocess.Popen:
    db = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "CELERY_BROKER_URL": REDIS,
        "CELERY_QUEUE": queue,
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "FAULT_VISIBILITY_TIMEOUT_S": str(VISIBILITY_TIMEOUT_S),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")]),
        **extra_env,
    }
    command = celery_worker_command(
        name=f"{queue}-{log.stem}@%h", app="integration.faults.stalling_worker"
    )
    with log.open("w") as out:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def _wait_for(predicate, timeout_s: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} within {timeout_s} s; worker log:\n{log.read_text()[-3000:]}")


def _tasks_in(raw_messages: list[bytes]) -> list[str]:
    """Task names of raw kombu messages: a queue's items are the message JSON, the unacked
    hash's values ``[message, exchange, routing key]``."""
    names = []
    for raw in raw_messages:
        message = json.loads(raw)
        if isinstance(message, list):
            message = message[0]
        names.append(message["headers"]["task"])
    return names


def _succeeded(log: Path, task: str) -> int:
    return sum(
        1
        for line in log.read_text().splitlines()
        if f"Task {task}[" in line and "] succeeded in" in line
    )


def test_a_task_of_a_killed_worker_is_delivered_again_and_runs_once(
    api_as, team_member, queue, tmp_path
):
    with celery_broker(REDIS, queue=queue):
        response = api_as(team_member).post("/api/v1/estimates/", ESTIMATE, format="json")
    assert response.status_code == 202, response.content
    estimate_id = response.json()["id"]
    stall_file = tmp_path / "stalled"
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"

    started = time.monotonic()
    first = _start_worker(queue, first_log, FAULT_STALL_FILE=str(stall_file))
    try:
        _wait_for(stall_file.exists, 90, "the first worker did not start the task", first_log)
        assert SizingEstimate.objects.get(pk=estimate_id).status == EstimateStatus.RUNNING
        killed_at = time.monotonic()
        os.kill(first.pid, signal.SIGKILL)
        assert first.wait(timeout=30) == -signal.SIGKILL
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=30)

    client = redis.Redis.from_url(REDIS)
    # The estimate's message is neither acknowledged nor waiting: it sits in the unacked hash.
    # (What waits is the outbox drain the first worker queued as it started, never run: the
    # solo worker was busy with the estimate.)
    assert _tasks_in(client.hvals(f"{queue}-unacked")) == [jobs.SIZING_ESTIMATE]
    assert _tasks_in(client.lrange(queue, 0, -1)) == [jobs.OUTBOX_DRAIN]
    assert SizingEstimate.objects.get(pk=estimate_id).status == EstimateStatus.RUNNING

    second = _start_worker(queue, second_log)
    try:
        _wait_for(
            lambda: _succeeded(second_log, jobs.SIZING_ESTIMATE) >= 1,
            120,
            "the second worker did not finish the redelivered task",
            second_log,
        )
        finished_at = time.monotonic()
        time.sleep(2 * VISIBILITY_TIMEOUT_S)  # a second delivery would show by now
    finally:
        second.terminate()
        second.wait(timeout=30)

    estimate = SizingEstimate.objects.get(pk=estimate_id)
    assert estimate.status == EstimateStatus.DONE
    assert estimate.progress == 100
    assert estimate.results
    # Once to completion: one finished run, one audit event of it, nothing left in Redis.
    assert _succeeded(second_log, jobs.SIZING_ESTIMATE) == 1
    assert _succeeded(first_log, jobs.SIZING_ESTIMATE) == 0
    assert AuditEvent.objects.filter(action="sizing_estimate.done").count() == 1
    assert client.hlen(f"{queue}-unacked") == 0
    assert client.llen(queue) == 0
    # Timings for the issue (visible with -s): kill to redelivered completion.
    print(
        f"\nworker kill: task started after {killed_at - started:.1f} s; "
        f"redelivered and finished {finished_at - killed_at:.1f} s after the kill "
        f"(visibility timeout {VISIBILITY_TIMEOUT_S} s)"
    )
