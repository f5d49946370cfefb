"""Redis down, then back: writes made during the outage answer 2xx with JSON, their jobs wait
in the outbox, and once the broker is back each job reaches the real Redis exactly once — by a
drain (beat's) and by a real Celery worker that starts after the outage and runs them.

The outage is a closed port; "back" is the machine's Redis, on a queue of this test's own
(``CELERY_QUEUE``), so nobody else's worker takes the messages and the test can count them.
The machine's Redis is never stopped: others use it.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from broker_support import CLOSED_BROKER, catalogue_loaded, celery_broker
from django.db import connection
from django.utils import timezone
from factories import AllocationFactory, CapacityRequestFactory, inference_fleet
from integration.processes import celery_worker_command

from pools import jobs
from pools.capacity.models import Allocation
from pools.common.choices import AllocationStatus
from pools.jobs.models import QueuedJob
from pools.jobs.outbox import outbox_drain

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[3]
REDIS = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture
def queue():
    """A queue name of this test's own on the real Redis, removed afterwards."""
    name = f"faults-{uuid.uuid4().hex[:12]}"
    yield name
    client = redis.Redis.from_url(REDIS)
    client.delete(name)
    for key in client.scan_iter(match=f"*{name}*"):
        client.delete(key)


@pytest.fixture(autouse=True)
def _catalogue():
    catalogue_loaded()


def _decode(queue: str) -> list[tuple[str, list]]:
    """The (task name, args) of every message waiting on ``queue`` in Redis, oldest first
    (kombu pushes on the left; bodies are base64 JSON ``[args, kwargs, embed]``)."""
    raw = redis.Redis.from_url(REDIS).lrange(queue, 0, -1)
    found = []
    for item in reversed(raw):
        message = json.loads(item)
        body = json.loads(base64.b64decode(message["body"]))
        found.append((message["headers"]["task"], body[0]))
    return found


def test_writes_during_the_outage_reach_the_real_broker_once_when_it_is_back(
    api_as, pool_admin, team, team_manager, team_member, queue
):
    pool = inference_fleet()
    request = CapacityRequestFactory(team=team, pool=pool, card_count=2)
    now = timezone.now()
    active = AllocationFactory(
        team=team,
        pool=pool,
        card_count=1,
        status=AllocationStatus.ACTIVE,
        starts_at=now - timedelta(days=1),
        ends_at=now + timedelta(days=3),
    )
    estimate_body = {
        "model": "qwen2_5_72b",
        "precision": "FP8",
        "input_len": 1000,
        "output_len": 200,
        "demand_kind": "output_rate",
        "output_tok_s": 2000,
    }

    with celery_broker(CLOSED_BROKER):
        answers = [
            api_as(pool_admin).post(f"/api/v1/requests/{request.pk}/approve/", {}),
            api_as(team_manager).post(f"/api/v1/allocations/{active.pk}/release/"),
            api_as(team_member).post("/api/v1/estimates/", estimate_body, format="json"),
        ]

    assert [a.status_code for a in answers] == [200, 200, 202]
    assert all(a.json()["queue"]["status"] == "deferred" for a in answers)
    assert QueuedJob.objects.count() == 4

    with celery_broker(REDIS, queue=queue):
        first, second = outbox_drain(), outbox_drain()

    assert (first, second) == ({"sent": 4, "left": 0}, {"sent": 0, "left": 0})
    approved = Allocation.objects.get(request=request)
    names = [name for name, _args in _decode(queue)]
    assert names == [
        jobs.ELASTIC_HAND_BACK,
        jobs.ALLOCATION_PROVISION,
        jobs.ALLOCATION_UNBIND,
        jobs.SIZING_ESTIMATE,
    ]
    assert _decode(queue)[1] == (jobs.ALLOCATION_PROVISION, [approved.pk])


def test_a_worker_that_starts_after_the_outage_runs_what_waited(
    api_as, pool_admin, team, queue, tmp_path
):
    """The approval's two jobs wait; a worker that starts drains the outbox (worker_ready) and
    runs each once: the provisioning (the window starts next week, so it stays approved) and
    the elastic hand-back."""
    request = CapacityRequestFactory(team=team, pool=inference_fleet(), card_count=1)
    with celery_broker(CLOSED_BROKER):
        response = api_as(pool_admin).post(f"/api/v1/requests/{request.pk}/approve/", {})
    assert response.status_code == 200
    assert QueuedJob.objects.count() == 2

    db = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "CELERY_BROKER_URL": REDIS,
        "CELERY_QUEUE": queue,
        "CELERY_TASK_ALWAYS_EAGER": "0",
    }
    log = tmp_path / "worker.log"
    with log.open("w") as out:
        worker = subprocess.Popen(
            celery_worker_command(name=f"{queue}@%h"),
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                if log.read_text().count("] succeeded in") >= 3:  # drain + its two jobs
                    break
                time.sleep(0.5)
        finally:
            worker.terminate()
            worker.wait(timeout=30)

    output = log.read_text()
    succeeded = [line.split("Task ")[1].split("[")[0] for line in output.splitlines()
                 if "] succeeded in" in line]  # fmt: skip
    assert sorted(succeeded) == sorted(
        [jobs.OUTBOX_DRAIN, jobs.ELASTIC_HAND_BACK, jobs.ALLOCATION_PROVISION]
    ), output[-3000:]
    assert QueuedJob.objects.count() == 0
    assert Allocation.objects.get(request=request).status == AllocationStatus.APPROVED
