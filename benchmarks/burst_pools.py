"""What a burst decision adds to an elastic pass (issue 35: < 10 ms per allocation), on
PostgreSQL.

``BENCH_BURST_ALLOCATIONS`` (default 200) teams, each with an elastic two-card L40S floor
(ceiling 6, step 2) in the Kubernetes pool ``serve``. Every namespace is hot (utilisation
90 %, latency 1.2 s for 40 minutes; Prometheus faked in memory, so the pass measures the
portal), so every allocation asks for 2 more cards. A burst pool ``rented`` (another cluster)
has 4 × N free cards. The same scale-up, two ways:

- **home**: ``serve`` has 2 × N more cards (nodes moved in from a spare pool): every
  allocation takes its 2 cards at home (one scale event, one audit record, the budget check);
- **burst**: those nodes moved out, the floors fill ``serve``; every team opted into
  ``rented``; every allocation places its 2 cards there (one scale event, one audit record,
  the budget check at that pool) — the burst decision is the difference.

The policies are reset between runs; ``BENCH_RUNS`` (default 5) of each, alternating, after a
warm-up; the medians compared, per allocation, and the SQL statements of each pass. On a
machine others share the two passes' difference is noisy, so the target is checked on the
time spent inside the burst decision itself (the pools it may use, their free cards, the
placement and the budget check at the burst pool), timed around those calls in the burst
pass, less the home scale-up's budget check it takes the place of (timed in the home pass).
Also the pure placement (:func:`pools.elastic.burst_pool.place`) alone, per call.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gpp_bench python benchmarks/burst_pools.py
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent / "tests"))  # factories
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")

import django  # noqa: E402

django.setup()

from support import on_test_database, serving_fleet  # noqa: E402

ALLOCATIONS = int(os.environ.get("BENCH_BURST_ALLOCATIONS", "200"))
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
NOW = datetime.now(UTC).replace(second=0, microsecond=0)
TARGET_MS = 10.0


def _signals(namespaces):
    from scheduler_adapters.prometheus import InferenceSignals, Sample
    from scheduler_adapters.prometheus_fake import FakePrometheus

    stamps = [NOW.timestamp() - 60 * m for m in range(40, -1, -1)]
    return FakePrometheus(
        inference=[
            InferenceSignals(
                ns,
                util_pct=tuple(Sample(t, 90.0) for t in stamps),
                cards_reporting=tuple(Sample(t, 8.0) for t in stamps),
                latency_s=tuple(Sample(t, 1.2) for t in stamps),
            )
            for ns in namespaces
        ]
    )


def run() -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from factories import node_with_gpus

    from pools.common.choices import Scheduler
    from pools.elastic import services
    from pools.elastic.burst_pool import Placement, place
    from pools.elastic.models import BurstOptIn, ElasticPolicy, ScaleEvent, SignalReading
    from pools.elastic.services import elastic_scan

    # time spent inside the burst decision itself (choosing the pools, their free cards, the
    # placement and the budget check at the burst pool), summed over a pass
    inside = [0.0]

    def timed(function):
        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                inside[0] += time.perf_counter() - started

        return wrapper

    services._burst_candidates = timed(services._burst_candidates)
    services._BurstRoom.spill = timed(services._BurstRoom.spill)
    # the home scale-up's own budget check, which the burst decision's check at the burst pool
    # takes the place of
    services._budget_checked = timed(services._budget_checked)
    from pools.inventory.models import Node, Pool

    user = get_user_model().objects.create_user("bench", password="x")
    allocations = serving_fleet(ALLOCATIONS, user, NOW)
    home = Pool.objects.get(slug="serve")
    for host in range(ALLOCATIONS // 4):  # 8 cards per node: exactly the floors' 2 x N
        node_with_gpus(8, gpu_model="l40s", hostname=f"serve-{host:04d}", pool=home,
                       scheduler=Scheduler.KUBERNETES)  # fmt: skip
    rented = Pool.objects.create(slug="rented", name="Rented", scheduler=Scheduler.KUBERNETES,
                                 burst=True)  # fmt: skip
    for host in range(ALLOCATIONS // 2):
        node_with_gpus(8, gpu_model="l40s", hostname=f"rented-{host:04d}", pool=rented,
                       scheduler=Scheduler.KUBERNETES)  # fmt: skip
    spare = Pool.objects.create(slug="spare", name="Spare", scheduler=Scheduler.KUBERNETES)
    for host in range(ALLOCATIONS // 4):  # 2 x N cards
        node_with_gpus(8, gpu_model="l40s", hostname=f"spare-{host:04d}", pool=spare,
                       scheduler=Scheduler.KUBERNETES)  # fmt: skip
    spare_ids = list(Node.objects.filter(pool=spare).values_list("pk", flat=True))
    ElasticPolicy.objects.bulk_create(
        [ElasticPolicy(allocation=a, ceiling_cards=6, cards_held=2, step_cards=2)
         for a in allocations]
    )  # fmt: skip
    teams = [a.team for a in allocations]
    metrics = _signals([f"team-{t.slug}" for t in teams])

    def reset() -> None:
        ScaleEvent.objects.all().delete()
        SignalReading.objects.all().delete()
        ElasticPolicy.objects.update(cards_held=2, burst_cards=0, burst_pool=None,
                                     last_scaled_at=None, last_decision={})  # fmt: skip

    counts: dict[bool, int] = {}

    def one(burst: bool) -> tuple[float, dict]:
        reset()
        BurstOptIn.objects.all().delete()
        Node.objects.filter(pk__in=spare_ids).update(pool=spare if burst else home)
        if burst:
            BurstOptIn.objects.bulk_create([BurstOptIn(team=t, pool=rented) for t in teams])
        started = time.perf_counter()
        statements = []

        def count(execute, sql, params, many, context):
            statements.append(1)
            return execute(sql, params, many, context)

        with connection.execute_wrapper(count):
            report = elastic_scan(now=NOW, metrics=metrics)
        elapsed = time.perf_counter() - started
        counts[burst] = len(statements)
        placed = sum(ElasticPolicy.objects.values_list("burst_cards", flat=True))
        return elapsed, {"ups": report.ups, "holds": report.holds, "burst_cards": placed}

    one(False), one(True)  # warm-up
    without, with_burst, decision, home_check = [], [], [], []
    for _ in range(RUNS):
        inside[0] = 0.0
        t, plain = one(False)
        without.append(t)
        home_check.append(inside[0])
        inside[0] = 0.0
        t, bursting = one(True)
        with_burst.append(t)
        decision.append(inside[0])
    assert plain == {"ups": ALLOCATIONS, "holds": 0, "burst_cards": 0}, plain
    assert bursting == {"ups": ALLOCATIONS, "holds": 0, "burst_cards": 2 * ALLOCATIONS}, bursting

    calls = 100_000
    started = time.perf_counter()
    for i in range(calls):
        place(floor_cards=2, ceiling_cards=6, held=Placement(2 + i % 3, 0), wanted_cards=6,
              home_room=i % 2, burst_room=4)  # fmt: skip
    pure_us = (time.perf_counter() - started) / calls * 1e6

    a, b = statistics.median(without), statistics.median(with_burst)
    added_ms = (b - a) / ALLOCATIONS * 1000
    print(f"{ALLOCATIONS} elastic allocations, home pool full, {RUNS} runs each (medians)")
    print("| measurement | value | target |")
    print("|---|---|---|")
    print(f"| pass, every allocation +2 cards at home | {a:.3f} s | |")
    print(f"| pass, home full, every allocation +2 cards in `rented` | {b:.3f} s | |")
    inside_ms = statistics.median(decision) / ALLOCATIONS * 1000
    check_ms = statistics.median(home_check) / ALLOCATIONS * 1000
    added_inside_ms = inside_ms - check_ms
    print(f"| pass difference per allocation (noisy on a shared machine) | {added_ms:.2f} ms | |")
    print(f"| inside the burst decision (with its budget check), per allocation | "
          f"{inside_ms:.2f} ms | |")  # fmt: skip
    print(f"| the home scale-up's budget check it replaces, per allocation | {check_ms:.2f} ms | |")
    print(
        f"| added by the burst decision, per allocation | {added_inside_ms:.2f} ms "
        f"| < {TARGET_MS:.0f} ms |"
    )
    print(f"| SQL statements per pass, home / burst | {counts[False]} / {counts[True]} | |")
    print(f"| pure placement (`place`) per call | {pure_us:.2f} µs | |")
    if added_inside_ms >= TARGET_MS:
        sys.exit(f"burst decision adds {added_inside_ms:.2f} ms per allocation (target < 10 ms)")


if __name__ == "__main__":
    on_test_database(run)
