"""The SQLite demo under a burst: 30 simultaneous approvals of one card each for 20 free cards,
through gunicorn (3 processes x 10 threads), answer 20 x 200 and 10 x 409, never a 500
(``benchmarks/sqlite_burst.py``; without ``transaction_mode: IMMEDIATE`` about two thirds
answered 500 "database is locked")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parents[2]


def test_a_30_way_approval_burst_on_sqlite_answers_no_500():
    env = {**os.environ, "BURST_REQUESTS": "30", "BURST_CARDS": "20"}
    env.pop("DATABASE_URL", None)

    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "sqlite_burst.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )

    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["statuses"] == {"200": 20, "409": 10}, result.stderr[-3000:]
    assert report["codes"] == {"insufficient_capacity": 10}
    assert (report["holding_allocations"], report["cards_granted"]) == (20, 20)
    assert report["ok"] is True and result.returncode == 0
