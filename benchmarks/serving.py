"""Serving rollups at fleet size (issue #30, "Speed"); prints a table (``make bench``).

On a test database (PostgreSQL), ``BENCH_ALLOCATIONS`` (2,000) active serving allocations on a
Kubernetes pool, each in its own namespace ``team-NNNN``, with 24 h of 5-minute rollups already
stored (288 rows each). Prometheus is faked at the HTTP level (``httpx.MockTransport`` behind the
real :class:`~scheduler_adapters.prometheus.PrometheusAdapter`, so every answer is decoded and
parsed as a real one): each family query is answered with what the demo's recorded serving
series give for every namespace (``pools.management.demo.demo_serving_answers``: 24 signals of vLLM
and dcgm-exporter, 88 series per allocation with the histogram buckets; 176,000 series a pass).

Measured:

1. **one rollup pass** (:func:`pools.serving.services.serving_rollup_pass`): six PromQL
   requests, parsing, placing, computing and one bulk INSERT of 2,000 rows; wall seconds p50
   and max of ``BENCH_RUNS`` passes (each a new bucket). Target < 10 s with <= 12 requests.
   There is no earlier rollup code path to set beside it (the elastic loop reads three other
   signals and stores no rollup).
2. **the calibration pass** (hourly) over the same rollups, every allocation declaring what it
   serves: seconds p50 and max, SQL queries (:func:`calibration_bench`).
3. **pages and API** at 200 and at 2,000 allocations in the fleet: the allocation's Serving
   panel (24 h), the team dashboard (one team, its allocations' serving table), the admin
   dashboard's serving section is part of the admin page (benchmarks/dashboards.py), and the
   API list (``/api/v1/serving/?page_size=50``); p50 ms and SQL queries. Targets: pages
   < 150 ms, API < 50 ms a page, queries the same at both sizes. The API list is measured
   again through its previous code path (a probe of the rollups per allocation for the page
   count, whole rows, DRF's field walk) in the same run.

Run: ``.venv/bin/python benchmarks/serving.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpu_pool_portal_bench")

import django  # noqa: E402

django.setup()

import httpx  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from benchmarks.support import on_test_database, serving_fleet  # noqa: E402

ALLOCATIONS = int(os.environ.get("BENCH_ALLOCATIONS", 2000))
SMALL = int(os.environ.get("BENCH_SMALL", 200))
RUNS = int(os.environ.get("BENCH_RUNS", 5))
PAGE_RUNS = int(os.environ.get("BENCH_PAGE_RUNS", 15))


def main() -> None:
    on_test_database(run)


SQL = """
INSERT INTO pools_servingrollup (allocation_id, bucket_seconds, bucket_start, cards_held, engine,
    requests_running, requests_waiting, kv_cache_usage_pct, prefix_cache_hit_pct, ttft_p50_s,
    ttft_p95_s, itl_p50_s, itl_p95_s, e2e_p50_s, e2e_p95_s, prompt_tokens, generation_tokens,
    requests_finished, requests_failed, preemptions, gpu_util_pct, sm_active_pct,
    dram_active_pct, fb_used_mib, fb_free_mib, temperature_c, xid_last, nvlink_bytes_s,
    cards_reporting, cards_busy, missing, notes)
SELECT a.id, 300, %(newest)s::timestamptz - s * interval '5 minutes', 2, 'vllm',
       8, s %% 5, 40 + s %% 50, 50, 0.2, 0.6, 0.03, 0.05, 4, 9, 900000, 400000, 300, 0, 0,
       60, 50, 30, 70000, 22000, 60, 0, NULL, 2, 1, '[]', '[]'
  FROM pools_allocation a CROSS JOIN generate_series(1, 288) s;
INSERT INTO pools_servingcoverage (allocation_id, first_bucket)
SELECT a.id, %(newest)s::timestamptz - interval '1440 minutes' FROM pools_allocation a;
"""


def fake_prometheus(namespaces: list[str]):
    """An adapter whose every family query is answered with the demo's recorded series of
    ``namespaces`` (JSON bodies built once; the pass decodes and parses them each time)."""
    from pools.management.demo import demo_serving_answers
    from scheduler_adapters.prometheus import PrometheusAdapter
    from scheduler_adapters.serving_metrics import SIGNAL_BY_KEY, family_queries

    rng = random.Random(30)
    at = datetime.now(UTC).timestamp()
    bodies: dict[str, list] = {family: [] for family in family_queries()}
    for index, namespace in enumerate(namespaces):
        series = demo_serving_answers(
            namespace=namespace, at=at, cards=2, troubled=index % 4 == 0, rng=rng, age=0.5
        )
        for item in series:
            family = SIGNAL_BY_KEY[item.label("signal")].family
            bodies[family].append(
                {"metric": dict(item.labels), "value": [at, str(item.samples[-1].value)]}
            )
    encoded = {
        expr: json.dumps(
            {"status": "success", "data": {"resultType": "vector", "result": bodies[family]}}
        ).encode()
        for family, expr in family_queries().items()
    }
    counts = {"requests": 0, "series": sum(len(b) for b in bodies.values())}

    def handler(request: httpx.Request) -> httpx.Response:
        counts["requests"] += 1
        body = encoded[request.url.params["query"]]
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})

    adapter = PrometheusAdapter(
        "http://prometheus.bench:9090", transport=httpx.MockTransport(handler)
    )
    return adapter, counts


def page_stats(client, url: str) -> tuple[float, int]:
    client.get(url)  # warm
    times, queries = [], 0
    for _ in range(PAGE_RUNS):
        with CaptureQueriesContext(connection) as captured:
            t0 = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200, (url, response.status_code)
        queries = len(captured)
    return statistics.median(times), queries


@contextlib.contextmanager
def previous_api_list():
    """The API list as it was before the coverage join (measured in the same run): every
    allocation's rollups probed for the page count, whole team / pool / GPU model / request
    rows read, and each row walked field by field by DRF."""
    from django.db.models import Exists, OuterRef
    from rest_framework import serializers

    from pools.capacity.selectors import allocation_list
    from pools.serving import selectors
    from pools.serving.api import ServingCurrentSerializer
    from pools.serving.models import ServingRollup

    def old_list(*, user):
        rolled_up = ServingRollup.objects.filter(allocation_id=OuterRef("pk"))
        return allocation_list(user=user).filter(Exists(rolled_up)).order_by("starts_at", "id")

    walk = serializers.Serializer.to_representation
    with (
        mock.patch.object(selectors, "serving_allocation_list", old_list),
        mock.patch.object(ServingCurrentSerializer, "to_representation", walk),
    ):
        yield


def calibration_bench(now) -> None:
    """The hourly calibration pass (:func:`pools.calibration.services.calibration_refresh`)
    over the fleet's 24 h of rollups, every allocation serving Qwen2.5-7B BF16 at TP 1 on
    vLLM: 576,000 rows read, one day per allocation and UTC day sized at each bucket's
    concurrency; seconds p50 / max of ``BENCH_RUNS`` passes and its SQL queries. The issue sets
    no target (a beat task, hourly); printed so a change is seen."""
    from pools.calibration.services import calibration_refresh
    from pools.capacity.models import Allocation
    from pools.serving.models import ServedModel

    ServedModel.objects.bulk_create(
        ServedModel(allocation_id=pk, model_id="qwen2_5_7b", precision="BF16", tp=1,
                    engine="vllm")
        for pk in Allocation.objects.values_list("pk", flat=True)
    )  # fmt: skip
    durations, queries, counts = [], 0, {}
    for _ in range(RUNS):
        with CaptureQueriesContext(connection) as captured:
            t0 = time.perf_counter()
            counts = calibration_refresh(now=now)
            durations.append(time.perf_counter() - t0)
        queries = len(captured)
    label = f"calibration pass, {ALLOCATIONS} allocations x 24 h (s)"
    print(
        f"{label:52} {statistics.median(durations):9.2f} {max(durations):9.2f} {queries:8d} "
        f"{'none':>8} ({counts['days']} days, {counts['records']} record)"
    )


TRUNCATE = (
    "TRUNCATE pools_servingrollup, pools_servingcoverage, pools_servingrolluprun, "
    "pools_servedmodel, pools_servingcalibrationday, pools_calibrationrecord, "
    "pools_allocation, pools_capacityrequest, pools_membership, pools_team CASCADE"
)


def fleet(n: int, user, member) -> None:
    from pools.tenancy.models import Membership, Team

    with connection.cursor() as cursor:
        cursor.execute(TRUNCATE)
    now = datetime.now(UTC)
    serving_fleet(n, user, now)
    newest = now.replace(second=0, microsecond=0)
    newest -= timedelta(minutes=newest.minute % 5)
    with connection.cursor() as cursor:
        cursor.execute(SQL, {"newest": newest})
        cursor.execute("ANALYZE")
    Membership.objects.create(team=Team.objects.get(slug="0001"), user=member, role="member")


def run() -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from pools.capacity.models import Allocation
    from pools.serving.services import serving_rollup_pass

    user = get_user_model().objects.create_user("bench-admin", password="x", is_staff=True)
    member = get_user_model().objects.create_user("bench-member", password="x")
    started = time.perf_counter()
    fleet(ALLOCATIONS, user, member)
    print(
        f"generated {ALLOCATIONS} serving allocations with 24 h of 5-minute rollups "
        f"({ALLOCATIONS * 288:,} rows) in {time.perf_counter() - started:.1f} s"
    )
    adapter, counts = fake_prometheus([f"team-{i:04d}" for i in range(1, ALLOCATIONS + 1)])
    print(f"fake Prometheus answer: {counts['series']:,} series in 6 families")
    durations, requests = [], []
    now = datetime.now(UTC) + timedelta(minutes=10)
    for run_index in range(RUNS):
        before = counts["requests"]
        t0 = time.perf_counter()
        result = serving_rollup_pass(now=now + timedelta(minutes=5 * run_index), metrics=adapter)
        durations.append(time.perf_counter() - t0)
        requests.append(counts["requests"] - before)
        assert result.ok and result.rollups == ALLOCATIONS, (result.error, result.rollups)
    print(f"{'measure':52} {'p50':>9} {'max':>9} {'queries':>8} {'target':>8}")
    p50 = statistics.median(durations)
    verdict = "ok" if p50 < 10 and max(requests) <= 12 else "OVER"
    print(
        f"{'rollup pass, ' + str(ALLOCATIONS) + ' allocations (s)':52} {p50:9.2f} "
        f"{max(durations):9.2f} {max(requests):8d} {'10 s':>8} {verdict}"
    )
    print(f"{'  previous rollup code path':52} {'none':>9}")
    calibration_bench(now)

    admin, team_client = Client(), Client()
    admin.force_login(user)
    team_client.force_login(member)
    results = {}
    for size in (SMALL, ALLOCATIONS):
        fleet(size, user, member)
        allocation = Allocation.objects.get(team__slug="0001")
        cases = [
            ("allocation Serving panel (24 h)", team_client,
             f"/allocations/{allocation.pk}/serving/", 150),
            ("team dashboard", team_client, "/teams/0001/dashboard/", 150),
            ("API /serving/ page of 50", admin, "/api/v1/serving/?page_size=50", 50),
        ]  # fmt: skip
        for name, client, url, target in cases:
            results[(name, size)] = (*page_stats(client, url), target)
        with previous_api_list():
            previous = page_stats(admin, "/api/v1/serving/?page_size=50")
        results[("  previous API list code path", size)] = (*previous, 50)
    for name in dict.fromkeys(key[0] for key in results):
        for size in (SMALL, ALLOCATIONS):
            p50, queries, target = results[(name, size)]
            same = results[(name, SMALL)][1] == queries
            verdict = "ok" if p50 <= target and same else "OVER"
            label = f"{name}, {size} allocations (ms)"
            print(f"{label:52} {p50:9.1f} {'':>9} {queries:8d} {target:6d} ms {verdict}")


if __name__ == "__main__":
    main()
