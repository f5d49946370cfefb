"""A reclamation what-if asked through the API, run by a real Celery worker against a real
Prometheus (issue 29: no request waits on the range query).

The path crosses every boundary it does in production: the API's ``POST`` answers 202 and
writes the job to the outbox; after commit it travels through Redis to a separate worker
process (its own settings: this test's PostgreSQL database, ``PROMETHEUS_URL`` of a Prometheus
started for this test with the dcgm-exporter history of dcgm_history.py ending when it starts),
which reads Prometheus and writes the report; the status URL then answers it.

By hand, with ``now`` the worker's clock (the report's ``end``, within minutes of the history's
end): days=1 steps every hour from ``now`` - 24 h; a 30-minute window is covered from
``now`` - 2 h (its window starts 2.5 h back, inside the 3 h of history). ``team-idle`` (2 %,
0 MiB: certainly idle) first idles at ``now`` - 2 h and, with a 1 h grace, would be reclaimed
at ``now`` - 1 h: its 1 card x 1 h to ``now`` = 1.0 card-hour freed. ``team-busy`` (85 %):
never idle.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.db import connection
from factories import AllocationFactory, GpuFactory, NodeFactory, PoolFactory, TeamFactory
from integration.processes import celery_worker_command
from integration.prometheus.dcgm_history import generate
from integration.prometheus.server import backfilled_prometheus

from pools.common.choices import AllocationStatus, GpuHealth, Scheduler
from pools.inventory.models import GpuModel, GpuModelAlias
from portal.celery import app as celery_app

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[3]
BROKER = os.environ.get("TEST_WHATIF_BROKER_URL", "redis://127.0.0.1:6379/13")


def _drop_connections() -> None:
    """Forget the app's broker connections, so the next send uses the broker set now."""
    celery_app.close()
    for name in ("_pool", "_producer_pool"):
        for owner in (celery_app, celery_app.amqp):
            if hasattr(owner, name):
                setattr(owner, name, None)


@pytest.fixture
def fresh_prometheus(tmp_path):
    """A Prometheus whose dcgm-exporter history ends now (the session's may be hours old)."""
    with backfilled_prometheus(tmp_path, generate(end=float(int(time.time())))) as url:
        yield url


@pytest.fixture
def worker(fresh_prometheus):
    from pools.inventory.catalogue.sync import catalogue_sync

    catalogue_sync(GpuModel, GpuModelAlias)  # transactional tests start from an empty database
    db = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "CELERY_BROKER_URL": BROKER,
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "PROMETHEUS_URL": fresh_prometheus,
    }
    subprocess.run([sys.executable, "-m", "celery", "-A", "portal", "purge", "-f"], cwd=ROOT,
                   env=env, capture_output=True, timeout=60, check=False)  # fmt: skip
    process = subprocess.Popen(
        celery_worker_command(name="whatif@%h"),
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        lines.append(line)
        if " ready." in line:
            break
        if process.poll() is not None:
            pytest.fail("the Celery worker exited:\n" + "".join(lines))
    else:
        process.kill()
        pytest.fail("the Celery worker did not start within 60 s:\n" + "".join(lines))
    previous = (celery_app.conf.task_always_eager, celery_app.conf.broker_url)
    celery_app.conf.update(task_always_eager=False, broker_url=BROKER)
    _drop_connections()
    yield process
    celery_app.conf.update(task_always_eager=previous[0], broker_url=previous[1])
    _drop_connections()
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()


def test_a_worker_runs_the_what_if_the_api_queued(worker, admin_api):
    l40s = GpuModel.objects.get(slug="l40s")
    pool = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    node = NodeFactory(hostname="k8s-n1", pool=pool, scheduler=Scheduler.KUBERNETES)
    for index in range(8):
        GpuFactory(node=node, index=index, gpu_model=l40s, health=GpuHealth.OK)
    started = datetime.now().astimezone()
    ids = {
        slug: AllocationFactory(
            team=TeamFactory(slug=slug), pool=pool, gpu_model=l40s, card_count=1,
            status=AllocationStatus.ACTIVE, starts_at=started - timedelta(days=2),
            ends_at=started + timedelta(days=1),
        ).pk
        for slug in ("busy", "idle")
    }  # fmt: skip

    queued = admin_api.post("/api/v1/reclamation-policies/infer/what-if/",
                            {"days": 1, "grace_hours": 1}, format="json")  # fmt: skip
    assert queued.status_code == 202, queued.content
    assert queued.json()["status"] == "pending"  # the request did not run it
    deadline = time.monotonic() + 120
    while True:
        body = admin_api.get(queued["Location"]).json()
        if body["status"] in ("done", "failed") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert (body["status"], body["progress"], body["error"]) == ("done", 100, "")
    report = body["result"]
    now = datetime.fromisoformat(report["end"])
    rows = {row["team"]: row for row in report["rows"]}
    assert rows["idle"] == {
        "allocation": ids["idle"], "team": "idle", "card_count": 1,
        "first_idle": (now - timedelta(hours=2)).isoformat(),
        "would_reclaim_at": (now - timedelta(hours=1)).isoformat(),
        "cards_reclaimed": 1, "card_hours_freed": "1.000", "findings": 1, "note": "",
    }  # fmt: skip
    assert (rows["busy"]["first_idle"], rows["busy"]["would_reclaim_at"]) == (None, None)
    assert (report["findings"], report["reclaimed"], report["card_hours_freed"]) == (1, 1, "1.000")
