"""Fixtures shared by the integration tiers: a real Prometheus (Debian's package, started by
``scripts/services/prometheus.sh``) on a free loopback port, its TSDB backfilled with
dcgm-exporter history (three hours before ``end``; the Slurm node's an hour past it too, see
dcgm_history.py) before it starts. Missing Prometheus is a failure, never a skip."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from integration.prometheus.dcgm_history import generate

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "services" / "prometheus.sh"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory) -> Iterator[tuple[str, float]]:
    """``(url, end)``: query at ``end`` (Unix seconds) so the window does not drift."""
    for tool in ("prometheus", "promtool"):
        assert shutil.which(tool), (
            f"{tool} is not installed: run scripts/ensure_services.sh "
            "(apt-get install --no-install-recommends prometheus)"
        )
    workdir = tmp_path_factory.mktemp("prometheus")
    end = float(int(time.time()))
    history = workdir / "dcgm.om"
    history.write_text(generate(end=end), encoding="utf-8")
    env = {
        **os.environ,
        "PROM_PORT": str(_free_port()),
        "PROM_DIR": str(workdir),
        "PROM_BACKFILL": str(history),
    }
    started = subprocess.run(
        ["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=60
    )
    assert started.returncode == 0, started.stderr + started.stdout
    try:
        yield f"http://127.0.0.1:{env['PROM_PORT']}", end
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop"], env=env, timeout=30, check=False)
