"""The advisor at fleet size (issue #31, "Speed"); prints a table (``make bench``).

On a test database (PostgreSQL), ``BENCH_ALLOCATIONS`` (2,000) running serving allocations,
each with 24 h of 5-minute rollups (288 rows: 576,000 in all; every tenth allocation idles
with a queue in its last half hour, every seventh preempts at its peaks), placed two to a
node (so every allocation has a neighbour to read), and every fifth elastic with scale events
in the window. Every allocation serves a model (``ServedModel``) its team's gateway calls by
another name, with twelve agent tasks in the window (24,000 in all; every fourth team retries
as seed ``004`` §4.3 tells), so rule 5 reads the token flow of each.

Measured:

1. **one advisor pass** (:func:`pools.advisor.services.advisor_pass`): gathering the stored
   signals (rollups, placement, node labels, elastic policies and events, daily summaries) and
   judging the eleven rules for every allocation, then opening / updating findings; wall
   seconds p50 and max of ``BENCH_RUNS`` passes, the CPU seconds of this process and the
   seconds spent waiting on PostgreSQL (the rest), and its SQL queries. Target < 10 s. The
   machine's load average is printed with it: on a shared machine the wall time is mostly
   waiting for a CPU.
2. **pages and API with 10,000 live findings**: the Advisor page (first page of 50, and
   filtered to one rule), and the API list (``/api/v1/advisor/findings/?page_size=50``); p50 ms
   of ``BENCH_PAGE_RUNS`` and SQL queries. Targets: page < 150 ms, API < 50 ms.

There is no earlier advisor code path to set beside it. ``BENCH_PROFILE=1`` prints the
cProfile of one more pass (the 25 costliest functions by cumulative time).

Run: ``.venv/bin/python benchmarks/advisor.py``.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpu_pool_portal_bench")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from benchmarks.support import on_test_database, serving_fleet  # noqa: E402

ALLOCATIONS = int(os.environ.get("BENCH_ALLOCATIONS", 2000))
FINDINGS = int(os.environ.get("BENCH_FINDINGS", 10000))
RUNS = int(os.environ.get("BENCH_RUNS", 3))
PAGE_RUNS = int(os.environ.get("BENCH_PAGE_RUNS", 15))


def main() -> None:
    on_test_database(run)


# s = 1 is the newest bucket; a.id % 10 = 0 idles with a queue in the last 6 buckets, a.id % 7
# = 0 preempts with a full KV cache in 36 buckets a day.
ROLLUPS = """
INSERT INTO pools_servingrollup (allocation_id, bucket_seconds, bucket_start, cards_held, engine,
    requests_running, requests_waiting, kv_cache_usage_pct, prefix_cache_hit_pct, ttft_p50_s,
    ttft_p95_s, itl_p50_s, itl_p95_s, e2e_p50_s, e2e_p95_s, prompt_tokens, generation_tokens,
    requests_finished, requests_failed, preemptions, gpu_util_pct, sm_active_pct,
    dram_active_pct, fb_used_mib, fb_free_mib, temperature_c, xid_last, nvlink_bytes_s,
    cards_reporting, cards_busy, missing, notes)
SELECT a.id, 300, %(newest)s::timestamptz - (s - 1) * interval '5 minutes', 2, 'vllm',
       8, CASE WHEN a.id %% 10 = 0 AND s <= 6 THEN 12 ELSE s %% 3 END,
       CASE WHEN a.id %% 7 = 0 AND s %% 8 = 0 THEN 99 ELSE 40 + s %% 30 END,
       50, 0.2, 0.6, 0.03, 0.05 + (s %% 11) * 0.001, 4, 9, 900000, 400000, 300, 0,
       CASE WHEN a.id %% 7 = 0 AND s %% 8 = 0 THEN 12 ELSE 0 END,
       CASE WHEN a.id %% 10 = 0 AND s <= 6 THEN 25 ELSE 60 + s %% 20 END, 50, 30,
       70000, 22000, 60, 0, 4e9, 2, 2, '[]', '[]'
  FROM pools_allocation a CROSS JOIN generate_series(1, 288) s;
"""
# two allocations per node, GPUs 0-1 and 2-3
PLACED = """
INSERT INTO pools_placedcards (allocation_id, hostname, gpu_mask)
SELECT a.id, 'node-' || (a.id / 2), CASE WHEN a.id %% 2 = 0 THEN 3 ELSE 12 END
  FROM pools_allocation a;
"""
# every allocation serves qwen2_5_14b; its team's gateway calls it qwen2.5-14b-instruct, twelve
# agent tasks each in the window. Four calls a task (prompt 2,600 growing 700 a call, 2,400
# cached after the first, 600-token tool returns, 150 out), except in every fourth team, where
# one task in four takes 12 calls with 7 retries (seed 004 §4.3): retry share 21 / 72 > 0.25.
SERVED = """
INSERT INTO pools_servedmodel (allocation_id, model_id, precision, tp, engine, kv_cache_dtype)
SELECT a.id, 'qwen2_5_14b', 'bf16', 2, 'vllm', '' FROM pools_allocation a;
"""
TASKS = """
INSERT INTO pools_agenttask (team_id, served_model, task_id, first_call_at, last_call_at, calls,
    metered_calls, unmetered_calls, replayed_calls, outcomes_known, retries, errors,
    input_tokens, cached_tokens, output_tokens, wasted_input_tokens, wasted_cached_tokens,
    wasted_output_tokens, tool_return_tokens, tool_return_calls, latency_s_total, latency_calls,
    first_metered_at, first_metered_index, first_input_tokens, last_metered_at,
    last_metered_index, last_input_tokens)
SELECT t.team_id, 'qwen2.5-14b-instruct', 'task-' || k, at, at + (n - 1) * interval '5 s', n,
       n, 0, 0, n, CASE WHEN n = 12 THEN 7 ELSE 0 END, 0,
       n * 2600 + 700 * n * (n - 1) / 2, 2400 * (n - 1), 150 * n, 0, 0, 0, 600 * (n - 1), n - 1,
       1.5 * n, n, at, 1, 2600, at + (n - 1) * interval '5 s', n, 2600 + 700 * (n - 1)
  FROM (SELECT a.team_id, k, %(newest)s::timestamptz - k * interval '1 hour' AS at,
               CASE WHEN a.team_id %% 4 = 0 AND k %% 4 = 1 THEN 12 ELSE 4 END AS n
          FROM pools_allocation a CROSS JOIN generate_series(1, 12) k) t;
"""


def page_stats(client, url: str) -> tuple[float, float, int]:
    """p50 wall ms, p50 CPU ms of this process, SQL queries of one request."""
    client.get(url)  # warm
    times, cpu, queries = [], [], 0
    for _ in range(PAGE_RUNS):
        with CaptureQueriesContext(connection) as captured:
            t0, c0 = time.perf_counter(), time.process_time()
            response = client.get(url)
            times.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
        assert response.status_code == 200, (url, response.status_code)
        queries = len(captured)
    return statistics.median(times), statistics.median(cpu), queries


def profile(fn) -> None:
    """Print the cProfile of ``fn()``: the 25 costliest functions by cumulative time."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.runcall(fn)
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


def fleet(n: int, user, now: datetime) -> None:
    """The serving fleet (``benchmarks/support.py``), every fifth allocation elastic with scale
    events, rollups and placement (module docstring)."""
    from pools.elastic.models import ElasticPolicy, ScaleEvent

    allocations = serving_fleet(n, user, now)
    policies = ElasticPolicy.objects.bulk_create(
        [ElasticPolicy(allocation=a, ceiling_cards=6, cards_held=2) for a in allocations[::5]]
    )
    events = []
    for policy in policies:
        for k in range(4):  # up and down every 20 minutes: reversals within 2 x cooldown
            at = now - timedelta(hours=3) + timedelta(minutes=20 * k)
            up = k % 2 == 0
            events.append(
                ScaleEvent(policy=policy, decided_at=at, effective_at=at,
                           action="up" if up else "down", reason="bench",
                           cards_from=2 if up else 4, cards_to=4 if up else 2)
            )  # fmt: skip
    ScaleEvent.objects.bulk_create(events)
    newest = now.replace(second=0, microsecond=0) - timedelta(minutes=5)
    newest -= timedelta(minutes=newest.minute % 5)
    with connection.cursor() as cursor:
        cursor.execute(ROLLUPS, {"newest": newest})
        cursor.execute(PLACED, {})
        cursor.execute(SERVED, {})
        cursor.execute(TASKS, {"newest": newest})
        cursor.execute("ANALYZE")


def live_findings(count: int, now: datetime) -> None:
    """``count`` live findings spread over the allocations and rules (one per pair)."""
    from pools.advisor.models import AdvisorFinding
    from pools.advisor.rules import RULES
    from pools.capacity.models import Allocation

    AdvisorFinding.objects.all().delete()
    allocations = list(Allocation.objects.values_list("pk", "team_id"))
    rows = []
    for index in range(count):
        allocation_id, team_id = allocations[index % len(allocations)]
        rule = RULES[(index // len(allocations)) % len(RULES)].rule.value
        rows.append(
            AdvisorFinding(allocation_id=allocation_id, team_id=team_id, rule=rule,
                           severity=("critical", "warning", "info")[index % 3],
                           severity_rank=index % 3, since=now - timedelta(hours=index % 48),
                           opened_at=now - timedelta(hours=1), last_seen_at=now,
                           summary="bench finding", fix="bench fix",
                           evidence={"buckets": index % 40, "ttft_p95_s_max": 12.5})
        )  # fmt: skip
    AdvisorFinding.objects.bulk_create(rows, batch_size=2000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE pools_advisorfinding")


def run() -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from pools.advisor.models import AdvisorFinding
    from pools.advisor.services import advisor_pass

    user = get_user_model().objects.create_user("bench-admin", password="x", is_staff=True)
    now = datetime.now(UTC)
    started = time.perf_counter()
    fleet(ALLOCATIONS, user, now)
    print(
        f"generated {ALLOCATIONS} serving allocations with 24 h of 5-minute rollups "
        f"({ALLOCATIONS * 288:,} rows), two to a node, {ALLOCATIONS // 5} elastic, in "
        f"{time.perf_counter() - started:.1f} s"
    )
    durations, cpu, queries, result = [], [], 0, None
    for _ in range(RUNS):
        with CaptureQueriesContext(connection) as captured:
            t0, c0 = time.perf_counter(), time.process_time()
            result = advisor_pass(now=now)
            durations.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        queries = len(captured)
    db_s = sum(float(q["time"]) for q in captured.captured_queries)
    by_rule = dict(
        AdvisorFinding.objects.values_list("rule").annotate(n=django.db.models.Count("id"))
    )
    print(f"findings after the passes: {by_rule}; undecided {result.undecided}")
    print(f"{'measure':52} {'p50':>9} {'max':>9} {'queries':>8} {'target':>8}")
    p50 = statistics.median(durations)
    print(
        f"{'advisor pass, ' + str(ALLOCATIONS) + ' allocations (s)':52} {p50:9.2f} "
        f"{max(durations):9.2f} {queries:8d} {'10 s':>8} {'ok' if p50 < 10 else 'OVER'}"
    )
    print(f"{'  of which this process CPU (s)':52} {statistics.median(cpu):9.2f} {max(cpu):9.2f}")
    print(f"{'  of which waiting on PostgreSQL, last pass (s)':52} {db_s:9.2f}")
    print(f"{'  previous advisor code path':52} {'none':>9}")
    print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if os.environ.get("BENCH_PROFILE"):
        profile(lambda: advisor_pass(now=now))

    live_findings(FINDINGS, now)
    admin = Client()
    admin.force_login(user)
    cases = [
        (f"Advisor page, {FINDINGS:,} live findings (ms)", "/advisor/", 150),
        ("Advisor page filtered to one rule (ms)", "/advisor/?rule=batching&ordering=-since", 150),
        ("API /advisor/findings/ page of 50 (ms)", "/api/v1/advisor/findings/?page_size=50", 50),
    ]
    for name, url, target in cases:
        p50, cpu_ms, count = page_stats(admin, url)
        verdict = "ok" if p50 <= target else "OVER"
        print(f"{name:52} {p50:9.1f} {'':>9} {count:8d} {target:6d} ms {verdict}")
        print(f"{'  of which this process CPU (ms)':52} {cpu_ms:9.1f}")
    print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
