"""Fixtures shared by the integration tiers: a real Prometheus (Debian's package, started by
``scripts/services/prometheus.sh``) on a free loopback port, its TSDB backfilled with
dcgm-exporter history (three hours before ``end``; the Slurm node's an hour past it too, see
dcgm_history.py) before it starts. Missing Prometheus is a failure, never a skip."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from integration.prometheus.dcgm_history import generate
from integration.prometheus.server import backfilled_prometheus


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory) -> Iterator[tuple[str, float]]:
    """``(url, end)``: query at ``end`` (Unix seconds) so the window does not drift."""
    end = float(int(time.time()))
    with backfilled_prometheus(tmp_path_factory.mktemp("prometheus"), generate(end=end)) as url:
        yield url, end
