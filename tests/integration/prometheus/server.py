"""A real Prometheus for the integration tests: Debian's package, started by
``scripts/services/prometheus.sh`` on a free loopback port with its TSDB backfilled from an
OpenMetrics history (``promtool tsdb create-blocks-from openmetrics``) before it starts, and
stopped after. Missing Prometheus is a failure, never a skip."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "services" / "prometheus.sh"


def openmetrics(families: Mapping[str, list[str]]) -> str:
    """The OpenMetrics text of ``families`` (metric name -> its sample lines, in time order):
    one contiguous gauge block per family, ``# EOF`` at the end, as promtool reads it."""
    lines: list[str] = []
    for metric, rows in families.items():
        lines += [f"# HELP {metric} {metric}", f"# TYPE {metric} gauge", *rows]
    return "\n".join(lines + ["# EOF"]) + "\n"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def backfilled_prometheus(workdir: Path, history: str) -> Iterator[str]:
    """Start Prometheus in ``workdir`` with ``history`` (OpenMetrics text) backfilled; yields
    its base URL (``http://127.0.0.1:<port>``); stops it on leaving."""
    for tool in ("prometheus", "promtool"):
        assert shutil.which(tool), (
            f"{tool} is not installed: run scripts/ensure_services.sh "
            "(apt-get install --no-install-recommends prometheus)"
        )
    backfill = workdir / "history.om"
    backfill.write_text(history, encoding="utf-8")
    env = {
        **os.environ,
        "PROM_PORT": str(_free_port()),
        "PROM_DIR": str(workdir),
        "PROM_BACKFILL": str(backfill),
    }
    started = subprocess.run(
        ["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=120
    )
    assert started.returncode == 0, started.stderr + started.stdout
    try:
        yield f"http://127.0.0.1:{env['PROM_PORT']}"
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop"], env=env, timeout=30, check=False)
