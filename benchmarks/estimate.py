"""``manage.py estimate --json`` over 1,000 inputs, start-up included (issue 34, "Speed": < 5 s).

The inputs are every measurement row of the three sizing validation files
(``tests/fixtures/sizing_dataset*.json``, 340 rows of dense, weight-only, MoE and NVFP4 models on
Ampere to Blackwell) turned into estimator inputs by ``benchmarks/sizing.py``'s
:func:`request_for`, repeated in order up to ``BENCH_INPUTS`` (1,000). The command runs
``BENCH_RUNS`` times (3) as a child process on a migrated database
``gpu_pool_portal_bench_estimate`` (created when absent; the command reads the fleet's
calibration records, one query per model, precision and engine), and as often with an empty
list, which is the start-up alone (Django set-up and the imports every command pays).

Printed per case: the best and median wall time and the child's CPU time (user + system) of the
best run. On this shared 2-core machine the wall time includes the wait for a core, so the load
average is printed too; the CPU time is what the command itself costs.
Run: ``.venv/bin/python benchmarks/estimate.py`` (PostgreSQL on 127.0.0.1:5432); exit status 0
when the best wall time of 1,000 inputs is under the target.
"""

from __future__ import annotations

import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_database import ensure_database  # noqa: E402
from benchmarks.sizing import DATASET_2026_MOE, DATASETS, load_rows, request_for  # noqa: E402

BENCH_DB = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpu_pool_portal_bench_estimate"
)
INPUTS = int(os.environ.get("BENCH_INPUTS", "1000"))
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
TARGET_S = 5.0


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": BENCH_DB,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
    }


def estimator_inputs(count: int) -> list[dict]:
    """``count`` estimator inputs: the validation rows' requests, repeated in order."""
    requests = []
    for row in load_rows([*DATASETS, DATASET_2026_MOE]):
        request, _ = request_for(row)
        if request is not None:
            requests.append({key: value for key, value in request.items() if value is not None})
    return list(itertools.islice(itertools.cycle(requests), count))


def timed_run(path: Path) -> tuple[float, float, int]:
    """(wall s, child CPU s, exit status) of one ``manage.py estimate --json path``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "estimate", "--json", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_env(),
        cwd=ROOT,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):  # 1: some input refused, still estimated
        raise SystemExit(f"estimate failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    return wall, cpu, done.returncode


def measure(label: str, inputs: list[dict]) -> float:
    """Run the command ``RUNS`` times on ``inputs``; print and return the best wall time."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "inputs.json"
        path.write_text(json.dumps(inputs), encoding="utf-8")
        runs = [timed_run(path) for _ in range(RUNS)]
    best = min(runs)
    print(
        f"{label:<28} best {best[0]:6.2f} s  median {statistics.median(r[0] for r in runs):6.2f} s"
        f"  CPU of best {best[1]:5.2f} s  exit {best[2]}"
    )
    return best[0]


def main() -> int:
    ensure_database(BENCH_DB, _env())
    inputs = estimator_inputs(INPUTS)
    print(f"estimate --json: {len(inputs)} inputs, {RUNS} runs, load {os.getloadavg()[0]:.1f}")
    measure("start-up alone (empty list)", [])
    best = measure(f"{len(inputs):,} inputs", inputs)
    print(f"target < {TARGET_S:.0f} s wall: {'met' if best < TARGET_S else 'NOT met'}")
    return 0 if best < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
