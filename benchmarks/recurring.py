"""Recurring reservations on a large pool, on PostgreSQL (issue #32 item 2).

A Kubernetes pool of 2,000 nodes × 8 L40S (16,000 cards), ``BENCH_RECURRING_ALLOCATIONS``
(default 5,000) allocations of 1-64 cards over the coming year and 40 active recurring
reservations (daily / weekdays / weekly, a year long, 100 cards each at various hours,
Europe/Berlin). Timed, best of 5 after one warm-up, each inside a transaction rolled back:

- *reserve*: ``recurring_reservation_create`` of one more year-long weekday rule (261
  occurrences) — the check over every occurrence against 5,000 allocations and ~10,000
  occurrences of the others, then the insert and the audit event. Target < 300 ms (the
  issue's figure for a year of recurring occurrences on a 16,000-card pool).
- *week calendar*: ``week_days`` of the pool × model's week view (free cards per day over 7
  local days and what holds cards that week, as ``/pools/<pool>/<model>/calendar/`` shows).
  Target < 300 ms (the issue's figure for the calendar of a 16,000-card pool with a year of
  recurring occurrences).
- *month calendar*: ``month_days`` of the month view (free cards over each of the month's
  local days and the count of what holds cards each day, ``?month=YYYY-MM``). Same target.
- *approval window*: ``window_holds`` of a one-week window with the reservations present (the
  occurrences are swept in Python) and of the same window on a pool without any (one
  statement), to show what reservations cost an approval.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gpp_bench python benchmarks/recurring.py
"""

from __future__ import annotations

import os
import random
import sys
import time
from datetime import time as clock
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")

import django  # noqa: E402

django.setup()

from django.db import connection, transaction  # noqa: E402
from django.test.utils import get_runner, setup_test_environment  # noqa: E402

ALLOCATIONS = int(os.environ.get("BENCH_RECURRING_ALLOCATIONS", 5000))
NODES, CARDS_PER_NODE, RULES = 2000, 8, 40
TARGET_S = 0.300


def main() -> None:
    setup_test_environment()
    runner = get_runner(django.conf.settings)(verbosity=0, interactive=False)
    old = runner.setup_databases()
    try:
        run()
    finally:
        runner.teardown_databases(old)


def build():
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from pools.capacity.models import Allocation, CapacityRequest
    from pools.inventory.models import Gpu, GpuModel, Node, Pool
    from pools.recurring.models import RecurringReservation
    from pools.tenancy.models import Team

    rng = random.Random(32)
    l40s = GpuModel.objects.get(slug="l40s")
    pools = [
        Pool.objects.create(slug=slug, name=slug, scheduler="kubernetes", slurm_partition="")
        for slug in ("bench-infer", "bench-bare")
    ]
    Node.objects.bulk_create(
        [Node(hostname=f"{p.slug}-{n:04d}", pool=p, scheduler="kubernetes", state="up")
         for p in pools for n in range(NODES)],
        batch_size=2000,
    )  # fmt: skip
    Gpu.objects.bulk_create(
        [Gpu(node=node, index=i, gpu_model=l40s, raw_model_name=l40s.vendor_name, health="ok")
         for node in Node.objects.all() for i in range(CARDS_PER_NODE)],
        batch_size=4000,
    )  # fmt: skip
    team = Team.objects.create(slug="bench", name="Bench")
    user = get_user_model().objects.create_user("bench-user")
    admin = get_user_model().objects.create_user("bench-admin", is_staff=True)
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    specs = []
    for pool in pools:
        for _ in range(ALLOCATIONS):
            start = now + timedelta(hours=rng.randrange(0, 360 * 24))
            specs.append((pool, start, start + timedelta(hours=rng.randrange(24, 240)),
                          rng.choice([1, 2, 4, 8, 16, 32, 64])))  # fmt: skip
    requests = CapacityRequest.objects.bulk_create(
        [CapacityRequest(team=team, requested_by=user, workload_kind="inference", pool=p,
                         gpu_model=l40s, card_count=n, starts_at=s, ends_at=e,
                         justification="bench", status="approved")
         for p, s, e, n in specs],
        batch_size=4000,
    )  # fmt: skip
    Allocation.objects.bulk_create(
        [Allocation(request=r, team=team, pool=p, gpu_model=l40s, card_count=n, starts_at=s,
                    ends_at=e, status="approved")
         for r, (p, s, e, n) in zip(requests, specs, strict=True)],
        batch_size=4000,
    )  # fmt: skip
    today = timezone.localdate()
    RecurringReservation.objects.bulk_create(
        [RecurringReservation(team=team, pool=pools[0], gpu_model=l40s, name=f"rule {i}",
                              card_count=100, recurrence=("daily", "weekday", "weekly")[i % 3],
                              time_zone="Europe/Berlin", first_date=today + timedelta(days=1),
                              last_date=today + timedelta(days=365),
                              start_time=clock(i % 12), end_time=clock(i % 12 + 6))
         for i in range(RULES)]
    )  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return pools, l40s, team, admin, today, now


def best(fn, repeats: int = 5) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        with transaction.atomic():
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
            transaction.set_rollback(True)
    return min(times)


def run() -> None:
    from pools.calendar.month import month_days
    from pools.calendar.week import week_days
    from pools.capacity.window import window_holds
    from pools.recurring.services.reservations import recurring_reservation_create

    pools, l40s, team, admin, today, now = build()

    def reserve():
        with transaction.atomic():
            recurring_reservation_create(
                actor=admin, team=team, pool=pools[0], gpu_model=l40s, name="course",
                card_count=8, recurrence="weekday", time_zone="Europe/Berlin",
                first_date=today + timedelta(days=1), last_date=today + timedelta(days=365),
                start_time=clock(9), end_time=clock(18),
            )  # fmt: skip
            transaction.set_rollback(True)

    week = (now + timedelta(days=30), now + timedelta(days=37))

    def holds(pool):
        return lambda: window_holds(pool=pool, gpu_model=l40s, start=week[0], end=week[1])

    def calendar():
        monday = (now + timedelta(days=30)).date()
        monday -= timedelta(days=monday.weekday())
        week_days(pool=pools[0], gpu_model=l40s, monday=monday, team_names={team.pk: team.name})

    def month():
        first = (now + timedelta(days=30)).date().replace(day=1)
        month_days(pool=pools[0], gpu_model=l40s, first=first)

    reserve_s = best(reserve)
    calendar_s = best(calendar)
    month_s = best(month)
    with_rules = best(holds(pools[0]))
    bare = best(holds(pools[1]))
    verdict = "OK" if reserve_s < TARGET_S else "OVER"
    print(f"recurring: reserve a year of weekdays on {NODES * CARDS_PER_NODE:,} cards, "
          f"{ALLOCATIONS:,} allocations, {RULES} rules: {reserve_s * 1000:.1f} ms "
          f"(target < {TARGET_S * 1000:.0f} ms) {verdict}")  # fmt: skip
    print(f"recurring: week calendar on {NODES * CARDS_PER_NODE:,} cards: "
          f"{calendar_s * 1000:.1f} ms (target < {TARGET_S * 1000:.0f} ms) "
          f"{'OK' if calendar_s < TARGET_S else 'OVER'}")  # fmt: skip
    print(f"recurring: month calendar on {NODES * CARDS_PER_NODE:,} cards: "
          f"{month_s * 1000:.1f} ms (target < {TARGET_S * 1000:.0f} ms) "
          f"{'OK' if month_s < TARGET_S else 'OVER'}")  # fmt: skip
    print(f"recurring: approval window (1 week) with rules {with_rules * 1000:.2f} ms, "
          f"without {bare * 1000:.2f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
