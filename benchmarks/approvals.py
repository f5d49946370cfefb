"""Benchmark of capacity approvals on PostgreSQL; prints a table like ``benchmarks/run.py``.

On a fresh database ``gpu_pool_portal_bench_approvals`` (dropped and recreated each run):
- a fleet of 4 pools (2 Slurm, 2 Kubernetes) x 3 GPU models x 16 nodes x 8 cards (1,536 cards)
  and 10,000 existing allocations of 10 teams spread over those pools, models and windows from
  90 days ago to 180 days ahead (ended, active, approved, cancelled);
- approve ``BENCH_APPROVALS`` (500) submitted requests one after another in this one process,
  through the service (``capacity_request_approve``: pool lock, capacity check, allocation,
  audit events, provisioning task enqueued on commit to a broker; kombu's in-memory transport,
  so nothing leaves the process); then ``BENCH_EAGER_APPROVALS`` (200) with the test/demo
  settings, where the provisioning task runs in-process on commit; then ``BENCH_API_APPROVALS``
  (200) through ``POST /api/v1/requests/{id}/approve/``: approvals/s and p50/p95 ms each;
- ``BENCH_CONCURRENT_APPROVALS`` (400) more from ``BENCH_CLIENTS`` (8) forked processes at
  once, each with its own connection (as gunicorn workers): half through the service, half as
  a *bare* replay of the statements the service issues for each request (captured in a
  rolled-back transaction before the clock starts) through the raw driver cursor -- the floor
  any implementation of them pays, pool and request locks included; in two rounds of bare then
  service so that load on the shared machine falls on both alike. Throughput is approvals over
  the wall time from the first client's start to the last one's end;
- the same with budgets (``BENCH_BUDGET_APPROVALS``, 200 through the service in this process,
  then ``BENCH_CONCURRENT_APPROVALS`` from the clients, service beside bare): a rate card with a
  reserved card-hour price for each model, and for every team a monthly budget (card-hours and
  EUR) and a quarterly one for one pool, every limit far above what the bench approves, so
  each approval prices the budgets' consumption and the team's committed allocations (a
  few hundred each) and passes;
- with 1,000 pending requests, server-side time and SQL query count of
  ``GET /api/v1/requests/?status=submitted`` (as a pool admin and as a team member, page of 50
  and of 500: the query count must not change).

Targets (issue #3): >= 100 approvals/s in a single process; query count constant in list size;
(issue #29 item 7) >= 100 approvals/s with 8 concurrent clients, within 2x the bare replay.
Run: ``.venv/bin/python benchmarks/approvals.py`` (PostgreSQL on 127.0.0.1:5432);
``BENCH_PROFILE=1`` prints a cProfile of the service approvals.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_DB = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpu_pool_portal_bench_approvals"
)
os.environ["DATABASE_URL"] = BENCH_DB
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")

EXISTING = int(os.environ.get("BENCH_ALLOCATIONS", "10000"))
APPROVALS = int(os.environ.get("BENCH_APPROVALS", "500"))
EAGER_APPROVALS = int(os.environ.get("BENCH_EAGER_APPROVALS", "200"))
API_APPROVALS = int(os.environ.get("BENCH_API_APPROVALS", "200"))
PENDING = int(os.environ.get("BENCH_PENDING", "1000"))
CONCURRENT = int(os.environ.get("BENCH_CONCURRENT_APPROVALS", "400"))
BUDGET_APPROVALS = int(os.environ.get("BENCH_BUDGET_APPROVALS", "200"))
CLIENTS = int(os.environ.get("BENCH_CLIENTS", "8"))
ROUNDS = 2
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "30"))
PROFILE = os.environ.get("BENCH_PROFILE", "") == "1"

POOLS = [
    ("train-a", "slurm"),
    ("train-b", "slurm"),
    ("infer-a", "kubernetes"),
    ("infer-b", "kubernetes"),
]
MODELS = ["a100_80g_sxm", "h100_sxm", "l40s"]
NODES_PER_MODEL = 16
CARDS_PER_NODE = 8
TEAMS = 10


def recreate_database() -> None:
    import psycopg

    name = BENCH_DB.rsplit("/", 1)[1]
    admin_url = BENCH_DB.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


def build_fleet():
    """Pools, nodes and cards: every (pool, model) has 16 x 8 = 128 schedulable cards."""
    from pools.inventory.models import Gpu, GpuModel, Node, Pool
    from pools.inventory.services.driver_groups import driver_group_for_version

    models = {m.slug: m for m in GpuModel.objects.filter(slug__in=MODELS)}
    pools, nodes = [], []
    for p, (slug, scheduler) in enumerate(POOLS):
        pool = Pool.objects.create(
            slug=slug,
            name=slug.replace("-", " ").title(),
            scheduler=scheduler,
            slurm_partition=slug if scheduler == "slurm" else "",
        )
        pools.append(pool)
        driver = "550.54.15" if p % 2 == 0 else "535.129.03"
        group = driver_group_for_version(driver)
        for model in MODELS:
            for n in range(NODES_PER_MODEL):
                nodes.append(
                    Node(
                        hostname=f"{slug}-{model}-{n:02d}".replace("_", "-"),
                        pool=pool,
                        scheduler=scheduler,
                        state="up",
                        driver_version=driver,
                        driver_group=group,
                    )
                )
    Node.objects.bulk_create(nodes, batch_size=1000)
    gpus = []
    for node in Node.objects.all():
        model = next(
            models[m]
            for m in MODELS
            if node.hostname.split("-", 2)[2].startswith(m.replace("_", "-"))
        )
        gpus.extend(
            Gpu(node=node, index=i, gpu_model=model, raw_model_name=model.vendor_name, health="ok")
            for i in range(CARDS_PER_NODE)
        )
    Gpu.objects.bulk_create(gpus, batch_size=2000)
    return pools, [models[m] for m in MODELS]


def build_tenants():
    from django.contrib.auth import get_user_model

    from pools.tenancy.models import Membership, Team

    User = get_user_model()
    teams = Team.objects.bulk_create(
        [Team(slug=f"team-{t}", name=f"Team {t}", cost_centre=f"CC-{t}") for t in range(TEAMS)]
    )
    users = User.objects.bulk_create(
        [User(username=f"user-{t}", email=f"user-{t}@example.com") for t in range(TEAMS)]
    )
    Membership.objects.bulk_create(
        [Membership(team=t, user=u, role="manager") for t, u in zip(teams, users, strict=True)]
    )
    admin = User.objects.create_user("bench-admin", password="x", is_staff=True)
    return teams, users, admin


def kind_of(pool) -> str:
    return "training" if pool.scheduler == "slurm" else "inference"


def build_existing(pools, models, teams, users, rng: random.Random) -> None:
    """``EXISTING`` allocations over [-90 d, +180 d), each with the approved request it came
    from. Statuses follow the clock: ended in the past, active now, approved ahead; one in ten
    cancelled. The peak held per (pool, model) stays under its 128 cards."""
    from django.utils import timezone

    from pools.capacity.models import Allocation, CapacityRequest

    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    requests, specs = [], []
    for _ in range(EXISTING):
        pool, model = rng.choice(pools), rng.choice(models)
        t = rng.randrange(len(teams))
        start = now + timedelta(hours=rng.randrange(-90 * 24, 180 * 24))
        end = start + timedelta(hours=rng.randrange(24, 10 * 24))
        cards = rng.choice([1, 1, 2, 2, 4])
        if rng.random() < 0.1:
            status = "cancelled"
        elif end <= now:
            status = "ended"
        elif start <= now:
            status = "active"
        else:
            status = "approved"
        requests.append(
            CapacityRequest(
                team=teams[t],
                requested_by=users[t],
                workload_kind=kind_of(pool),
                pool=pool,
                gpu_model=model,
                card_count=cards,
                starts_at=start,
                ends_at=end,
                justification="bench",
                status="approved",
                submitted_at=now,
                decided_at=now,
            )
        )
        specs.append((pool, model, teams[t], cards, start, end, status))
    CapacityRequest.objects.bulk_create(requests, batch_size=2000)
    Allocation.objects.bulk_create(
        [
            Allocation(
                request=r,
                team=team,
                pool=pool,
                gpu_model=model,
                card_count=cards,
                starts_at=start,
                ends_at=end,
                status=status,
            )
            for r, (pool, model, team, cards, start, end, status) in zip(
                requests, specs, strict=True
            )
        ],
        batch_size=2000,
    )


def build_pending(n, pools, models, teams, users, rng: random.Random):
    """``n`` submitted one- or two-card requests, each for 1-7 days within the next 60."""
    from django.utils import timezone

    from pools.capacity.models import CapacityRequest

    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    rows = []
    for i in range(n):
        pool, model = rng.choice(pools), rng.choice(models)
        t = rng.randrange(len(teams))
        start = now + timedelta(days=1, hours=rng.randrange(0, 60 * 24))
        rows.append(
            CapacityRequest(
                team=teams[t],
                requested_by=users[t],
                workload_kind=kind_of(pool),
                pool=pool,
                gpu_model=model,
                card_count=rng.choice([1, 2]),
                starts_at=start,
                ends_at=start + timedelta(hours=rng.randrange(24, 7 * 24)),
                cuda_version="12.2" if i % 5 == 0 else "",
                justification="bench",
                status="submitted",
                submitted_at=now,
            )
        )
    return CapacityRequest.objects.bulk_create(rows, batch_size=2000)


def analyze() -> None:
    from django.db import connection

    with connection.cursor() as cursor:  # what autovacuum does after a bulk load
        cursor.execute("ANALYZE")


def summarise(label, samples_ms, rows, target="≥ 100/s", detail=""):
    samples_ms = sorted(samples_ms)
    total_s = sum(samples_ms) / 1000
    rate = len(samples_ms) / total_s
    p50 = statistics.median(samples_ms)
    p95 = statistics.quantiles(samples_ms, n=20, method="inclusive")[18]
    rows.append(
        (label, f"{rate:.0f} approvals/s", target, f"p50 {p50:.2f} ms, p95 {p95:.2f} ms{detail}")
    )
    return rate, p50


def approve_all(queue, admin) -> tuple[list[float], int, float]:
    """Approve each request in turn: ms per approval, how many were refused, and this process's
    own CPU ms per approval (the part other load on the machine cannot inflate much)."""
    from pools.capacity.services.requests import capacity_request_approve

    samples, refused = [], 0
    cpu = time.process_time()
    profiler = None
    if PROFILE:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    for request in queue:
        start = time.perf_counter()
        try:
            capacity_request_approve(request=request, actor=admin)
        except Exception as exc:  # the bench data leaves room for all of them; count refusals
            refused += 1
            if refused == 1:
                print(f"refused: {exc!r}")
        samples.append((time.perf_counter() - start) * 1000)
    if profiler is not None:
        import pstats

        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    return samples, refused, (time.process_time() - cpu) * 1000 / max(1, len(queue))


def concurrent_rows(label: str, concurrent, admin, rows) -> None:
    """``ROUNDS`` rounds of bare then service over ``CONCURRENT / ROUNDS`` of ``concurrent``
    each (:func:`benchmarks.support.concurrent_rounds`); appends their rows to ``rows``
    (``label`` after each name)."""
    from benchmarks.support import concurrent_rounds

    per_round = CONCURRENT // ROUNDS
    ids = [r.pk for r in concurrent[: 2 * per_round * ROUNDS]]
    conc = concurrent_rounds(ids, admin.pk, clients=CLIENTS, rounds=ROUNDS)
    load = os.getloadavg()[0]
    for path in ("service", "bare"):
        run = conc[path]
        rows.append(
            (
                f"approve {run.approvals} requests, {CLIENTS} concurrent clients, {path}" + label,
                f"{run.rate:.0f} approvals/s",
                "≥ 100/s" if path == "service" else "",
                f"p50 {run.p50_ms:.2f} ms (median of rounds), client CPU "
                f"{run.cpu_ms:.2f} ms each, {run.failed} failed, load average {load:.1f}",
            )
        )
    rows.append(
        (
            f"bare / service throughput, {CLIENTS} clients" + label,
            f"{conc['bare'].rate / conc['service'].rate:.2f}x",
            "≤ 2x",
            "",
        )
    )


def build_budgets(pools, models, teams) -> None:
    """A rate card from the start of last year with a reserved card-hour price per model, and
    for each team a monthly budget (card-hours and EUR) and a quarterly one for its first pool
    (warn only), every limit far above what the bench approves."""
    from datetime import date

    from django.utils import timezone

    from billing.budgets.models import Budget
    from billing.choices import RateKind
    from billing.services.rates import rate_card_create

    today = timezone.now().date()
    rate_card_create(
        name="bench",
        currency="EUR",
        effective_from=date(today.year - 1, 1, 1),
        gpu_prices={
            (model.pk, RateKind.GPU_RESERVED): Decimal(price)
            for model, price in zip(models, ("2.10", "3.40", "0.95"), strict=True)
        },
    )
    first = date(today.year - 1, 1, 1)
    Budget.objects.bulk_create(
        [
            Budget(team=team, period="month", starts_on=first, card_hours_limit=Decimal(10**9),
                   money_limit=Decimal(10**9), currency="EUR", enforcement="warn")
            for team in teams
        ]
        + [
            Budget(team=team, pool=pools[t % len(pools)], period="quarter", starts_on=first,
                   card_hours_limit=Decimal(10**9), enforcement="warn")
            for t, team in enumerate(teams)
        ]
    )  # fmt: skip


def request_stats(client, url: str) -> tuple[float, float, int, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.get(url)  # warm caches and connections
    samples = []
    queries = status = 0
    for _ in range(REQUESTS):
        with CaptureQueriesContext(connection) as ctx:
            start = time.perf_counter()
            response = client.get(url)
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
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from pools.capacity.lifecycle import HOLDING_STATUSES
    from pools.capacity.models import Allocation, CapacityRequest
    from pools.capacity.services.requests import capacity_request_approve

    settings.ALLOWED_HOSTS = ["*"]
    call_command("migrate", verbosity=0)
    rng = random.Random(3)
    rows = []

    started = time.perf_counter()
    pools, models = build_fleet()
    teams, users, admin = build_tenants()
    build_existing(pools, models, teams, users, rng)
    pending = build_pending(
        APPROVALS + 1 + EAGER_APPROVALS + API_APPROVALS, pools, models, teams, users, rng
    )
    concurrent = build_pending(2 * CONCURRENT, pools, models, teams, users, rng)
    analyze()
    holding = Allocation.objects.filter(status__in=HOLDING_STATUSES).count()
    rows.append(
        (
            f"load {EXISTING} allocations ({holding} holding), {len(pending)} submitted requests",
            f"{time.perf_counter() - started:.2f} s",
            "",
            f"{len(pools) * len(models) * 128} cards",
        )
    )

    # Service path: what a task, a form view and the API all call. Provisioning is enqueued on
    # commit; with a broker (production) that is a publish, here to kombu's in-memory transport
    # so that nothing leaves the process (no worker elsewhere may pick the bench's ids up).
    from portal.celery import app

    app.conf.broker_url = "memory://"
    app.conf.task_always_eager = False
    queue = pending[: APPROVALS + 1]
    with CaptureQueriesContext(connection) as ctx:
        capacity_request_approve(request=queue[0], actor=admin)
    per_approval = len(ctx.captured_queries)
    samples, refused, cpu = approve_all(queue[1:], admin)
    summarise(
        f"approve {len(samples)} requests, service, provisioning enqueued (broker)",
        samples,
        rows,
        detail=f", CPU {cpu:.2f} ms, {per_approval} statements each, {refused} refused",
    )

    # The same with the test/demo settings: no broker, provisioning runs in-process on commit.
    app.conf.task_always_eager = True
    queue = pending[APPROVALS + 1 : APPROVALS + 1 + EAGER_APPROVALS]
    samples, refused, cpu = approve_all(queue, admin)
    summarise(
        f"approve {len(samples)} requests, service, provisioning run eagerly (no broker)",
        samples,
        rows,
        target="",
        detail=f", CPU {cpu:.2f} ms, {refused} refused",
    )
    app.conf.task_always_eager = False

    # API path: POST /api/v1/requests/{id}/approve/ (session, selector, serializer).
    client = Client()
    client.force_login(admin)
    samples, failed, cpu = [], 0, time.process_time()
    for request in pending[APPROVALS + 1 + EAGER_APPROVALS :]:
        start = time.perf_counter()
        response = client.post(f"/api/v1/requests/{request.pk}/approve/")
        samples.append((time.perf_counter() - start) * 1000)
        failed += response.status_code != 200
    if samples:
        summarise(
            f"approve {len(samples)} requests, POST /api/v1/requests/<id>/approve/ (broker)",
            samples,
            rows,
            target="",
            detail=f", CPU {(time.process_time() - cpu) * 1000 / len(samples):.2f} ms, "
            f"{failed} not 200",
        )
    # CLIENTS clients at once (forked processes, a connection each, as gunicorn workers are):
    # the service and, beside it, a bare replay of the statements the service issues for each
    # request (captured in a rolled-back transaction before the clock starts), through the raw
    # driver cursor -- the floor any implementation of those statements pays, locks included.
    concurrent_rows("", concurrent, admin, rows)

    # The same with budgets: every approval prices the team's budgets and committed allocations.
    build_budgets(pools, models, teams)
    queue = build_pending(BUDGET_APPROVALS, pools, models, teams, users, rng)
    budget_concurrent = build_pending(2 * CONCURRENT, pools, models, teams, users, rng)
    analyze()
    with CaptureQueriesContext(connection) as ctx:
        capacity_request_approve(request=queue[0], actor=admin)  # prices the budgets' months
    with CaptureQueriesContext(connection) as ctx:
        capacity_request_approve(request=queue[1], actor=admin)
    samples, refused, cpu = approve_all(queue[2:], admin)
    if samples:
        summarise(
            f"approve {len(samples)} requests, service, with budgets (broker)",
            samples,
            rows,
            target="",
            detail=f", CPU {cpu:.2f} ms, {len(ctx.captured_queries)} statements each, "
            f"{refused} refused",
        )
    concurrent_rows(", with budgets", budget_concurrent, admin, rows)
    pending = pending + queue + concurrent + budget_concurrent

    approved = CapacityRequest.objects.filter(pk__in=[r.pk for r in pending], status="approved")
    rows.append(
        (
            "requests approved / allocations now",
            str(approved.count()),
            "",
            f"{Allocation.objects.count()} allocations",
        )
    )

    # The approval queue: 1,000 pending requests, one page at a time.
    build_pending(PENDING, pools, models, teams, users, rng)
    analyze()
    member = users[0]
    member_client = Client()
    member_client.force_login(member)
    submitted = CapacityRequest.objects.filter(status="submitted").count()
    for who, c in (("pool admin", client), ("team member", member_client)):
        for size in (50, 500):
            url = f"/api/v1/requests/?status=submitted&page_size={size}"
            p50, p95, queries, status = request_stats(c, url)
            rows.append(
                (
                    f"GET /api/v1/requests/?status=submitted, page of {size}, {who} "
                    f"[{submitted} pending]",
                    f"p50 {p50:.1f} ms, p95 {p95:.1f} ms",
                    "constant queries",
                    f"{queries} queries, HTTP {status}",
                )
            )

    width = max(len(r[0]) for r in rows)
    print(f"\n{'benchmark'.ljust(width)} | result                     | target           | detail")
    print("-" * (width + 90))
    for name, result, target, detail in rows:
        print(f"{name.ljust(width)} | {result.ljust(26)} | {target.ljust(16)} | {detail}")


if __name__ == "__main__":
    main()
