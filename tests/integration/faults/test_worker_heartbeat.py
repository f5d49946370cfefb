"""A real Celery worker during a broker outage (a closed port, from its start): it keeps
retrying the broker, and its liveness heartbeat stays fresh, so the probe passes and
Kubernetes restarts nothing. ``celery inspect ping`` (the old probe) fails at once then."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from broker_support import CLOSED_BROKER
from integration.processes import celery_worker_command

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def test_the_heartbeat_stays_fresh_while_the_broker_is_down(tmp_path):
    beat = tmp_path / "heartbeat"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "CELERY_BROKER_URL": CLOSED_BROKER,
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "WORKER_HEARTBEAT_FILE": str(beat),
        "WORKER_HEARTBEAT_S": "1",
        "WORKER_HEARTBEAT_MAX_AGE_S": "5",
    }
    log = tmp_path / "worker.log"
    with log.open("w") as out:
        worker = subprocess.Popen(
            celery_worker_command(name="faults-heartbeat@%h"), cwd=ROOT, env=env, stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not beat.exists():
            time.sleep(0.2)
        assert beat.exists(), log.read_text()[-3000:]
        time.sleep(8)  # past the 5 s limit: only a rewritten file is fresh now
        assert worker.poll() is None, log.read_text()[-3000:]
        probe = [sys.executable, "-m", "portal.worker_health"]
        ran = subprocess.run(probe, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        # The broker really was down for the worker the whole time.
        assert "Error 111 connecting to 127.0.0.1:1. Connection refused" in log.read_text()
        assert " ready." not in log.read_text()
        ping = [sys.executable, "-m", "celery", "-A", "portal", "inspect", "ping", "--timeout", "2"]
        pinged = subprocess.run(ping, env=env, cwd=ROOT, capture_output=True, text=True,
                                timeout=120)  # fmt: skip
        assert pinged.returncode != 0  # what the old probe would have answered
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(timeout=30)
