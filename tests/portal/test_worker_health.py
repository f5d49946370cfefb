"""The worker's heartbeat file and the liveness probe reading it (portal/worker_health.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from portal.worker_health import heartbeat_age_s, heartbeat_start, probe

ROOT = Path(__file__).resolve().parents[2]


def test_a_fresh_heartbeat_passes_and_a_stale_or_missing_one_fails(tmp_path):
    beat = tmp_path / "beat"
    env = {"WORKER_HEARTBEAT_FILE": str(beat), "WORKER_HEARTBEAT_MAX_AGE_S": "120"}

    assert probe(env) == (1, f"no heartbeat file {beat}")
    beat.write_text("x")
    assert probe(env)[0] == 0
    # written 121 s ago: one second past the limit
    old = time.time() - 121
    os.utime(beat, (old, old))
    status, message = probe(env)
    assert status == 1 and message.endswith("(limit 120 s)")
    assert probe({}) == (1, "WORKER_HEARTBEAT_FILE is not set")


def test_the_heartbeat_thread_rewrites_the_file(tmp_path):
    beat = tmp_path / "run" / "beat"
    stop = heartbeat_start(beat, interval_s=0.2)
    try:
        old = time.time() - 60
        os.utime(beat, (old, old))
        time.sleep(0.6)  # three beats
        assert heartbeat_age_s(beat) < 1
    finally:
        stop.set()


@pytest.mark.subprocess
def test_the_probe_runs_as_the_manifests_call_it(tmp_path):
    beat = tmp_path / "beat"
    beat.write_text("x")
    env = {**os.environ, "WORKER_HEARTBEAT_FILE": str(beat)}
    command = [sys.executable, "-m", "portal.worker_health"]
    ran = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("heartbeat ")


def test_compose_checks_the_worker_by_its_heartbeat():
    worker = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["worker"]
    assert worker["healthcheck"]["test"] == ["CMD", "python", "-m", "portal.worker_health"]
    # the portal's own environment is kept, the heartbeat file added to it
    assert worker["environment"]["CELERY_BROKER_URL"] == "redis://redis:6379/0"
    assert worker["environment"]["WORKER_HEARTBEAT_FILE"].startswith("/tmp/")
