"""Benchmarks of the inventory on PostgreSQL; prints a table (``make bench``).

Measures, on a fresh database ``gpu_pool_portal_bench`` (dropped and recreated each run):
- import of 2,000 nodes x 8 GPUs from one slurmrestd ``/nodes`` payload, and from 2,000
  nvidia-smi CSV captures (with UUIDs, serials, bus ids), then the same nvidia-smi import again
  (every node unchanged);
- server-side time (Django test client, no network) and SQL query count of ``GET
  /api/v1/gpus/``, ``GET /api/v1/nodes/`` and the node list page with 16,000 GPUs in the fleet;
- then import of ``BENCH_IMPORT_NODES`` (12,500) more nodes x 8 GPUs (100,000) from one
  slurmrestd payload, new and again unchanged, with the statements each issues.

Targets (issue #2): import under 10 s; p50 under 50 ms; query count constant in fleet size;
(issue #29 item 7) the import of 100,000 GPUs under 30 s.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_DB = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpu_pool_portal_bench"
)
os.environ["DATABASE_URL"] = BENCH_DB
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")

NODES = int(os.environ.get("BENCH_NODES", "2000"))
IMPORT_NODES = int(os.environ.get("BENCH_IMPORT_NODES", "12500"))
GPUS_PER_NODE = 8
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "30"))


def recreate_database() -> None:
    import psycopg

    name = BENCH_DB.rsplit("/", 1)[1]
    admin_url = BENCH_DB.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


def slurm_payload(n: int, prefix: str = "bench") -> str:
    import json

    nodes = [
        {
            "name": f"{prefix}-{i:05d}",
            "state": "idle",
            "state_flags": [],
            "gres": f"gpu:a100_80g_sxm:{GPUS_PER_NODE}(S:0-1)",
            "partitions": ["bench"],
        }
        for i in range(n)
    ]
    return json.dumps({"nodes": nodes})


def nvidia_smi_csv(i: int) -> bytes:
    rows = ["index, name, uuid, serial, pci.bus_id, memory.total [MiB], driver_version"]
    for g in range(GPUS_PER_NODE):
        rows.append(
            f"{g}, NVIDIA A100-SXM4-80GB, GPU-{i:08x}-{g:04x}-4000-8000-{i * 8 + g:012x}, "
            f"{1560000000000 + i * 8 + g}, 00000000:{0x10 + g:02X}:00.0, 81920 MiB, "
            f"{'535.129.03' if i % 2 else '550.54.15'}"
        )
    return ("\n".join(rows) + "\n").encode()


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def request_stats(client, url: str, headers=None) -> tuple[float, float, int, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.get(url)  # warm caches and connections
    samples = []
    queries = 0
    status = 0
    for _ in range(REQUESTS):
        with CaptureQueriesContext(connection) as ctx:
            start = time.perf_counter()
            response = client.get(url, headers=headers)
            samples.append((time.perf_counter() - start) * 1000)
        queries = len(ctx.captured_queries)
        status = response.status_code
    samples.sort()
    p95 = statistics.quantiles(samples, n=20, method="inclusive")[18]
    return statistics.median(samples), p95, queries, status


def main() -> None:
    recreate_database()
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    settings.ALLOWED_HOSTS = ["*"]
    call_command("migrate", verbosity=0)
    from pools.inventory.models import Gpu, Pool
    from pools.inventory.services.import_files import inventory_import_file, inventory_import_files
    from scheduler_adapters.types import InventorySource

    pool = Pool.objects.create(
        slug="bench", name="Bench", scheduler="slurm", slurm_partition="bench"
    )
    rows = []

    payload = slurm_payload(NODES).encode()
    settings.INVENTORY_UPLOAD_MAX_BYTES = 100 * 1024 * 1024
    seconds, report = timed(
        lambda: inventory_import_file(data=payload, source=InventorySource.SLURM)
    )
    rows.append(
        (
            f"import slurmrestd /nodes, {NODES} nodes x {GPUS_PER_NODE} GPUs (new)",
            f"{seconds:.2f} s",
            "< 10 s",
            len(report.created),
        )
    )

    files = [(f"bench-{i:05d}.csv", nvidia_smi_csv(i), f"bench-{i:05d}") for i in range(NODES)]

    def import_smi():
        return inventory_import_files(files=files, source=InventorySource.NVIDIA_SMI, pool=pool)

    seconds, _ = timed(import_smi)
    rows.append(
        (
            f"import nvidia-smi CSV, {NODES} files x {GPUS_PER_NODE} GPUs, one run (add UUIDs)",
            f"{seconds:.2f} s",
            "< 10 s",
            Gpu.objects.exclude(uuid=None).count(),
        )
    )
    seconds, _ = timed(import_smi)
    rows.append(
        (
            f"re-import the same nvidia-smi CSV ({NODES} unchanged)",
            f"{seconds:.2f} s",
            "< 10 s",
            Gpu.objects.count(),
        )
    )

    from django.db import connection

    with connection.cursor() as cursor:  # what autovacuum does after a bulk load
        cursor.execute("ANALYZE")
    user = get_user_model().objects.create_user("bench", password="x", is_staff=True)
    client = Client()
    client.force_login(user)
    for case in [
        ("GET /api/v1/gpus/ (page of 50)", "/api/v1/gpus/"),
        (
            "GET /api/v1/gpus/?gpu_model=a100_80g_sxm&ordering=-node",
            "/api/v1/gpus/?gpu_model=a100_80g_sxm&ordering=-node",
        ),
        ("GET /api/v1/nodes/ (page of 50)", "/api/v1/nodes/"),
        ("GET /nodes/ page", "/nodes/"),
        ("GET /nodes/ htmx fragment, sorted by GPUs", "/nodes/?ordering=-gpus", True),
        ("GET /gpus/ page", "/gpus/"),
        ("GET / fleet overview", "/"),
    ]:
        label, url, htmx = (*case, False)[:3]
        p50, p95, queries, status = request_stats(
            client, url, headers={"HX-Request": "true"} if htmx else None
        )
        rows.append(
            (
                f"{label} [{Gpu.objects.count()} GPUs]",
                f"p50 {p50:.1f} ms, p95 {p95:.1f} ms",
                "p50 < 50 ms",
                f"{queries} queries, HTTP {status}",
            )
        )

    from django.test.utils import CaptureQueriesContext

    payload = slurm_payload(IMPORT_NODES, prefix="fleet").encode()
    for state in ("new", "unchanged"):
        with CaptureQueriesContext(connection) as ctx:
            seconds, report = timed(
                lambda: inventory_import_file(data=payload, source=InventorySource.SLURM)
            )
        rows.append(
            (
                f"import slurmrestd /nodes, {IMPORT_NODES} nodes x {GPUS_PER_NODE} GPUs ({state})",
                f"{seconds:.2f} s",
                "< 30 s",
                f"{len(ctx.captured_queries)} statements, {Gpu.objects.count()} GPUs in all, "
                f"load average {os.getloadavg()[0]:.1f}",
            )
        )

    width = max(len(r[0]) for r in rows)
    print(f"\n{'benchmark'.ljust(width)} | result                     | target       | detail")
    print("-" * (width + 60))
    for name, result, target, detail in rows:
        print(f"{name.ljust(width)} | {result.ljust(26)} | {target.ljust(12)} | {detail}")


if __name__ == "__main__":
    main()
