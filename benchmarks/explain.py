"""Benchmark of the explainer on PostgreSQL (issue #33): one explanation over all pools and
models at fleet size, and the request form's live panel.

On a fresh database ``gpu_pool_portal_bench_explain`` (dropped and recreated each run):
- 4 pools (2 Slurm, 2 Kubernetes) × 5 GPU models × 100 nodes × 8 cards = 16,000 cards;
- 16,000 allocations of 20 teams spread over those pools and models from 90 days ago to 180
  days ahead (ended, active, approved, one in ten cancelled), each with its request; one in
  four of the future ones placed on a node (:class:`PlacedCards`);
- then, ``BENCH_RUNS`` times each: the explanation of a draft for 40 A100 next week in any
  Slurm pool (:func:`pools.explain.selectors.explanation_for_fields`: facts read + why not,
  when per option, where instead, who holds it), the same with a shape (5 nodes × 8 cards,
  one NVLink domain), and the live panel ``GET /requests/explain/`` (the page's whole server
  time, template included). p50 / p95 ms and SQL statements.

Targets: explanation p50 < 100 ms; live panel p50 < 150 ms. Also printed: this process's CPU
time per run (the database's own time is in its server process) and the load average, as wall
times on a shared machine include the wait for a core.
Run: ``.venv/bin/python benchmarks/explain.py`` (PostgreSQL on 127.0.0.1:5432).
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_DB = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpu_pool_portal_bench_explain"
)
os.environ["DATABASE_URL"] = BENCH_DB
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")

ALLOCATIONS = int(os.environ.get("BENCH_ALLOCATIONS", "16000"))
RUNS = int(os.environ.get("BENCH_RUNS", "30"))
POOLS = [("train-a", "slurm"), ("train-b", "slurm"), ("infer-a", "kubernetes"),
         ("infer-b", "kubernetes")]  # fmt: skip
MODELS = ["a100_80g_sxm", "h100_sxm", "h800_sxm", "l40s", "a100_80g_pcie"]
NODES_PER_MODEL = 100
CARDS_PER_NODE = 8
TEAMS = 20


def recreate_database() -> None:
    import psycopg

    name = BENCH_DB.rsplit("/", 1)[1]
    admin_url = BENCH_DB.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


def build(rng: random.Random):
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from pools.capacity.models import Allocation, CapacityRequest, PlacedCards
    from pools.inventory.models import Gpu, GpuModel, Node, Pool
    from pools.inventory.services.driver_groups import driver_group_for_version
    from pools.tenancy.models import Membership, Team

    models = {m.slug: m for m in GpuModel.objects.filter(slug__in=MODELS)}
    group = driver_group_for_version("550.54.15")
    pools, nodes = [], []
    for slug, scheduler in POOLS:
        partition = slug if scheduler == "slurm" else ""
        pool = Pool.objects.create(
            slug=slug, name=slug.title(), scheduler=scheduler, slurm_partition=partition
        )
        pools.append(pool)
        for m in range(len(MODELS)):
            nodes.extend(
                Node(
                    hostname=f"{slug}-{m}-{n:03d}",
                    pool=pool,
                    scheduler=scheduler,
                    state="up",
                    driver_version="550.54.15",
                    driver_group=group,
                    nvlink_domains=[list(range(CARDS_PER_NODE))],
                )  # fmt: skip
                for n in range(NODES_PER_MODEL)
            )
    Node.objects.bulk_create(nodes, batch_size=2000)
    gpus = []
    for node in Node.objects.all():
        model = models[MODELS[int(node.hostname.split("-")[2])]]
        gpus.extend(Gpu(node=node, index=i, gpu_model=model, raw_model_name=model.vendor_name,
                        health="ok") for i in range(CARDS_PER_NODE))  # fmt: skip
    Gpu.objects.bulk_create(gpus, batch_size=4000)
    User = get_user_model()
    teams = Team.objects.bulk_create(
        [Team(slug=f"team-{t}", name=f"Team {t}") for t in range(TEAMS)]
    )
    users = User.objects.bulk_create([User(username=f"user-{t}") for t in range(TEAMS)])
    Membership.objects.bulk_create(
        [Membership(team=t, user=u) for t, u in zip(teams, users, strict=True)]
    )
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    requests, specs = [], []
    for _ in range(ALLOCATIONS):
        p, m, t = rng.randrange(len(pools)), rng.randrange(len(MODELS)), rng.randrange(TEAMS)
        start = now + timedelta(hours=rng.randrange(-90 * 24, 180 * 24))
        end = start + timedelta(hours=rng.randrange(24, 10 * 24))
        status = ("cancelled" if rng.random() < 0.1 else "ended" if end <= now
                  else "active" if start <= now else "approved")  # fmt: skip
        cards = rng.choice([1, 2, 4, 8])
        requests.append(CapacityRequest(
            team=teams[t], requested_by=users[t], pool=pools[p], gpu_model=models[MODELS[m]],
            workload_kind="training" if pools[p].scheduler == "slurm" else "inference",
            card_count=cards, starts_at=start, ends_at=end, justification="bench",
            status="approved", submitted_at=now, decided_at=now,
        ))  # fmt: skip
        specs.append((p, m, t, cards, start, end, status))
    CapacityRequest.objects.bulk_create(requests, batch_size=4000)
    allocations = Allocation.objects.bulk_create(
        [Allocation(request=r, team=teams[t], pool=pools[p], gpu_model=models[MODELS[m]],
                    card_count=cards, starts_at=start, ends_at=end, status=status)
         for r, (p, m, t, cards, start, end, status) in zip(requests, specs, strict=True)],
        batch_size=4000,
    )  # fmt: skip
    placed = []
    for a, (p, m, _, cards, _, _, status) in zip(allocations, specs, strict=True):
        if status == "approved" and rng.random() < 0.25:
            host = f"{POOLS[p][0]}-{m}-{rng.randrange(NODES_PER_MODEL):03d}"
            placed.append(PlacedCards(allocation=a, hostname=host, gpu_mask=(1 << cards) - 1))
    PlacedCards.objects.bulk_create(placed, batch_size=4000, ignore_conflicts=True)
    return teams, users, now


def timed(fn, runs):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    fn()  # warm: caches of the catalogue, node kinds and templates
    times, cpu, queries = [], [], 0
    for _ in range(runs):
        with CaptureQueriesContext(connection) as ctx:
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            times.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
        queries = len(ctx.captured_queries)
    times.sort()
    return (
        statistics.median(times),
        times[int(len(times) * 0.95) - 1],
        statistics.median(cpu),
        queries,
    )


def main() -> None:
    recreate_database()
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.utils import timezone

    from pools.explain.selectors import explanation_for_fields
    from pools.inventory.models import GpuModel

    settings.ALLOWED_HOSTS = ["*"]  # the test client's "testserver"
    call_command("migrate", verbosity=0)
    t0 = time.perf_counter()
    teams, users, now = build(random.Random(33))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # as autovacuum would after a bulk load
    print(f"built 16,000 cards and {ALLOCATIONS:,} allocations in {time.perf_counter() - t0:.0f} s")
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    start = now + timedelta(days=7)
    fields = dict(user=users[0], team=teams[0], workload_kind="training", card_count=40,
                  starts_at=start, ends_at=start + timedelta(days=7), gpu_model=a100)  # fmt: skip
    answer = explanation_for_fields(**fields)
    print(f"answer: {answer.summary[:160]}… ({len(answer.when)} options timed, "
          f"{len(answer.where_instead)} alternatives)")  # fmt: skip
    plain = timed(lambda: explanation_for_fields(**fields), RUNS)
    shaped = timed(
        lambda: explanation_for_fields(
            **fields, cards_per_node=8, node_count=5, one_nvlink_domain=True
        ),  # fmt: skip
        RUNS,
    )
    client = Client()
    client.force_login(users[0])
    local = timezone.localtime(start)
    query = {"team": "team-0", "kind": "cards", "workload_kind": "training",
             "gpu_model": "a100_80g_sxm", "card_count": "40",
             "starts_at": local.strftime("%Y-%m-%dT%H:%M"),
             "ends_at": (local + timedelta(days=7)).strftime("%Y-%m-%dT%H:%M")}  # fmt: skip

    def panel():
        response = client.get("/requests/explain/", query, headers={"HX-Request": "true"})
        assert response.status_code == 200, (response.status_code, response.content[:300])

    live = timed(panel, RUNS)
    rows = [
        ("explanation, 40 A100 any Slurm pool", plain, "p50 < 100 ms"),
        ("explanation, 5 nodes × 8 one NVLink domain", shaped, "p50 < 100 ms"),
        ("live panel GET /requests/explain/", live, "p50 < 150 ms"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"\n{'benchmark'.ljust(width)} | p50 ms | p95 ms | CPU p50 ms | SQL | target")
    print("-" * (width + 53))
    for name, (p50, p95, cpu, sql), target in rows:
        print(f"{name.ljust(width)} | {p50:6.1f} | {p95:6.1f} | {cpu:10.1f} | {sql:3d} | {target}")
    print(
        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores: wall times include "
        "waiting for a core; CPU is this process's own)"
    )


if __name__ == "__main__":
    main()
