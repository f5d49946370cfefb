"""CPU per approval, client and server, on PostgreSQL: what load on a shared machine cannot
inflate (issue #29 item 7).

On the database ``benchmarks/approvals.py`` leaves (``BENCH_DATABASE_URL``), approve
``BENCH_CPU_APPROVALS`` (150) fresh submitted requests through the service in one process, in
``BENCH_CPU_ROUNDS`` (3) rounds per variant, the variants alternating round by round, each
round in its own process: its CPU (``time.process_time``) and that of its PostgreSQL backend
(``/proc/<pid>/stat`` utime + stime, clock ticks; the server must run on this machine) per
approval, and the statements per approval. Variants: ``client`` (parameters bound by Django,
as the default settings) and ``server`` (``DB_SERVER_SIDE_BINDING=1``: server-side binding and
prepared statements). Budgets as the approvals bench builds them are kept
(``BENCH_CPU_BUDGETS=1``, the default) or dropped first (``0``: approvals with no budget).
Run after ``benchmarks/approvals.py``: ``.venv/bin/python benchmarks/approval_cpu.py``.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPROVALS = int(os.environ.get("BENCH_CPU_APPROVALS", "150"))
ROUNDS = int(os.environ.get("BENCH_CPU_ROUNDS", "3"))
BUDGETS = os.environ.get("BENCH_CPU_BUDGETS", "1") == "1"
VARIANTS = {"client": "0", "server": "1"}


def _ticks(pid: int) -> int:
    """utime + stime of process ``pid`` in clock ticks (proc(5), fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def one_round() -> None:
    """In this process: approve APPROVALS new requests; print client ms, server ms and
    statements per approval as one line."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import approvals as bench  # sets DATABASE_URL from BENCH_DATABASE_URL
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection

    from billing.budgets.models import Budget
    from pools.capacity.services.requests import capacity_request_approve
    from pools.inventory.models import GpuModel, Pool
    from pools.tenancy.models import Team
    from portal.celery import app

    app.conf.broker_url = "memory://"
    app.conf.task_always_eager = False
    if not BUDGETS:
        Budget.objects.all().delete()
    pools = list(Pool.objects.order_by("pk"))
    models = list(GpuModel.objects.filter(slug__in=bench.MODELS).order_by("pk"))
    teams = list(Team.objects.order_by("pk"))
    users = [t.memberships.first().user for t in teams]
    rng = random.Random(os.getpid())
    queue = bench.build_pending(APPROVALS + 5, pools, models, teams, users, rng)
    admin = get_user_model().objects.get(username="bench-admin")
    for request in queue[:5]:  # warm: caches, and statements prepared on this connection
        capacity_request_approve(request=request, actor=admin)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    count = 0

    def counter(execute, sql, params, many, context):
        nonlocal count
        count += 1
        return execute(sql, params, many, context)

    hz = os.sysconf("SC_CLK_TCK")
    server, cpu, wall = _ticks(backend), time.process_time(), time.perf_counter()
    with connection.execute_wrapper(counter):
        for request in queue[5:]:
            capacity_request_approve(request=request, actor=admin)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    server = (_ticks(backend) - server) / hz
    n = len(queue) - 5
    print(f"{cpu * 1000 / n:.3f} {server * 1000 / n:.3f} {count / n:.2f} {wall * 1000 / n:.3f}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "round":
        one_round()
        return
    results: dict[str, list[list[float]]] = {v: [] for v in VARIANTS}
    for _ in range(ROUNDS):
        for variant, flag in VARIANTS.items():
            out = subprocess.run(
                [sys.executable, __file__, "round"],
                env={**os.environ, "DB_SERVER_SIDE_BINDING": flag},
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            results[variant].append([float(x) for x in out.stdout.split()[-4:]])
    load = os.getloadavg()[0]
    print(f"\n{APPROVALS} approvals x {ROUNDS} rounds per variant, budgets {BUDGETS}, "
          f"load average {load:.1f}")  # fmt: skip
    print("variant | client CPU ms | server CPU ms | total CPU ms | statements | wall ms")
    for variant, runs in results.items():
        client = statistics.median(r[0] for r in runs)
        server = statistics.median(r[1] for r in runs)
        print(f"{variant:7} | {client:13.2f} | {server:13.2f} | {client + server:12.2f} | "
              f"{runs[0][2]:10.2f} | {statistics.median(r[3] for r in runs):7.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
