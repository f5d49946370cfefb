"""Provisioning through a real Celery worker on the machine's Redis, against the real Slurm.

The worker is a separate process with its own settings (broker: Redis db 15; database: this
test's PostgreSQL database; Slurm from the test cluster's env file), so everything the worker
does crosses the same boundaries it does in production: the approval commits, the task travels
through Redis, the worker calls slurmrestd and writes the database.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection
from integration.processes import celery_worker_command
from integration.slurm.slurm_cluster import eventually, sacctmgr

from pools.capacity.models import Allocation
from pools.capacity.services.allocations import allocation_release
from pools.capacity.services.requests import capacity_request_approve
from pools.common.choices import AllocationStatus
from pools.inventory.models import GpuModel, GpuModelAlias
from portal.celery import app as celery_app

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[3]
BROKER = os.environ.get("TEST_CELERY_BROKER_URL", "redis://127.0.0.1:6379/15")


def _drop_connections() -> None:
    """Forget the app's broker connections and producers, so the next send uses the broker
    configured now."""
    celery_app.close()
    for name in ("_pool", "_producer_pool"):
        for owner in (celery_app, celery_app.amqp):
            if hasattr(owner, name):
                setattr(owner, name, None)


@pytest.fixture
def worker(slurm_settings, cleanup):
    from pools.inventory.catalogue.sync import catalogue_sync

    catalogue_sync(GpuModel, GpuModelAlias)  # transactional tests start from an empty database
    db = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "CELERY_BROKER_URL": BROKER,
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "SLURM_REST_URL": slurm_settings["SLURMRESTD_URL"],
        "SLURM_ADMIN_USER": slurm_settings["SLURM_ADMIN_USER"],
        "SLURM_CLUSTER": slurm_settings["SLURM_CLUSTER"],
        "SLURM_JWT_KEY_PATH": slurm_settings["SLURM_JWT_KEY"],
        "SLURM_API_VERSION": slurm_settings.get("SLURM_API_VERSION", ""),
    }
    subprocess.run(
        [sys.executable, "-m", "celery", "-A", "portal", "purge", "-f"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    process = subprocess.Popen(
        celery_worker_command(),
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
    _drop_connections()  # earlier tests may have built pools for the default broker
    yield process
    celery_app.conf.update(task_always_eager=previous[0], broker_url=previous[1])
    _drop_connections()
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()


def test_a_worker_applies_the_approval_in_slurm_and_zeroes_it_on_release(
    worker, slurm, slurm_settings, cleanup, portal_slurm_team
):
    pool, a100, team, alice, admin, submit = portal_slurm_team
    account = team.slug
    request = submit(2)

    allocation = capacity_request_approve(request=request, actor=admin)

    active = eventually(
        lambda: Allocation.objects.get(pk=allocation.pk),
        lambda a: (
            a.status != AllocationStatus.APPROVED and a.status != AllocationStatus.PROVISIONING
        ),
        timeout_s=60,
    )
    assert active.status == AllocationStatus.ACTIVE, active.status_reason
    assert active.scheduler_binding["grp_tres"] == "gres/gpu:a100=2"
    assert "gres/gpu:a100=2" in sacctmgr(
        "show", "assoc", f"account={account}", "user=", "format=account,grptres"
    )

    allocation_release(allocation=active, actor=alice, reason="done")
    eventually(
        lambda: [(lim.gres_type, lim.cards) for lim in slurm.get_gpu_limits(account)],
        lambda limits: limits == [("a100", 0)],  # 0 cards, not "no limit" (unlimited)
        timeout_s=60,
    )
