"""Budget consumption for every team at once on PostgreSQL (issue #32: 1,600 teams < 1 s).

1,600 teams, each with a monthly budget (card-hours and EUR; half of them carry unused over,
so last month is read too) and, for every fourth team, a quarterly A100-only budget; usage
records for last month and this one made with one ``INSERT … SELECT generate_series``
(``BENCH_BUDGET_RECORDS``, default 400,000: 250 per team), then ``budget_statuses`` over all
budgets: best of 3 with nothing kept (every team month priced through the statements' lines
and kept as ``BudgetConsumption`` rows, as after a rate-card change), then best of 5 reading
the kept rows; one warm-up first.

Then approvals with and without the budget check in the same run (issue #32: the check costs
at most 2× the bare approval): ``BENCH_BUDGET_APPROVALS`` (default 200) one-card, one-hour
requests of a team with a monthly and a quarterly budget, approved through
``capacity_request_approve`` one after another, every other one with ``BUDGET_CHECK`` empty
(the bare transaction: lock, capacity check, allocation, audit); medians compared. The
team's budgets read kept consumption (priced once, by the first check) and the committed
allocations, which grow to 200 over the run. ``BENCH_PROFILE=1`` also profiles one approval
and times ``budget_check`` alone with its queries.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gpp_bench python benchmarks/budgets.py
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent / "tests"))  # factories
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.test.utils import get_runner, setup_test_environment  # noqa: E402

RECORDS = int(os.environ.get("BENCH_BUDGET_RECORDS", 400_000))
TEAMS = 1600
MONTHS = (date(2026, 9, 1), date(2026, 10, 1))
NOW = datetime(2026, 10, 20, tzinfo=UTC)
TARGET_S = 1.0


def main() -> None:
    setup_test_environment()
    runner = get_runner(django.conf.settings)(verbosity=0, interactive=False)
    old = runner.setup_databases()
    try:
        run()
    finally:
        runner.teardown_databases(old)


def run() -> None:
    from billing.budgets.models import Budget, BudgetConsumption
    from billing.budgets.selectors import budget_statuses
    from billing.choices import RateKind
    from billing.services.rates import rate_card_create
    from pools.inventory.models import GpuModel
    from pools.tenancy.models import Team

    models = list(GpuModel.objects.filter(slug__in=["a100_80g_sxm", "h800_sxm", "l40s", "rtx4090"]))
    a100 = next(m for m in models if m.slug == "a100_80g_sxm")
    rate_card_create(name="bench", currency="EUR", effective_from=date(2026, 1, 1),
                     gpu_prices={(m.pk, k): Decimal("1.50") for m in models
                                 for k in (RateKind.GPU_RESERVED, RateKind.GPU_USED)})  # fmt: skip
    Team.objects.bulk_create([Team(slug=f"bench-{i}", name=f"Bench {i}") for i in range(TEAMS)])
    team_ids = list(Team.objects.order_by("pk").values_list("pk", flat=True))
    model_ids = [m.pk for m in models]
    with connection.cursor() as cur:
        for month in MONTHS:
            cur.execute(
                """
                INSERT INTO billing_usagerecord (team_id, gpu_model_id, served_model, quantity,
                  unit, basis, month, period_start, period_end, source, source_id, flag,
                  created_at, updated_at)
                SELECT (%s::int[])[1 + g %% %s], (%s::int[])[1 + (g / 7) %% %s], '',
                       (1 + g %% 97) * 3600, 'card-seconds',
                       CASE WHEN g %% 5 = 0 THEN 'reserved' ELSE 'used' END, %s,
                       %s::timestamptz + (g %% 1600000) * interval '1 second',
                       %s::timestamptz + (g %% 1600000 + 3600) * interval '1 second',
                       'slurm-accounting', 'bench:' || %s || ':' || g, '', now(), now()
                FROM generate_series(1, %s) AS g
                """,
                [team_ids, TEAMS, model_ids, len(model_ids), month,
                 datetime(month.year, month.month, 1, tzinfo=UTC),
                 datetime(month.year, month.month, 1, tzinfo=UTC), f"{month:%Y-%m}",
                 RECORDS // len(MONTHS)],
            )  # fmt: skip
        cur.execute("ANALYZE billing_usagerecord")
    budgets = [
        Budget(team_id=t, period="month", starts_on=date(2026, 1, 1),
               card_hours_limit=Decimal(5000), money_limit=Decimal(7500), currency="EUR",
               rollover="carry" if i % 2 else "none", enforcement="warn")
        for i, t in enumerate(team_ids)
    ] + [
        Budget(team_id=t, gpu_model=a100, period="quarter", starts_on=date(2026, 1, 1),
               card_hours_limit=Decimal(9000), rollover="deduct", enforcement="refuse")
        for t in team_ids[::4]
    ]  # fmt: skip
    Budget.objects.bulk_create(budgets)
    every = list(Budget.objects.all())
    budget_statuses(every, now=NOW)  # warm-up: the database's caches, the kept rows
    priced = []
    for _ in range(3):  # every team month priced again and kept (as after a rate change)
        BudgetConsumption.objects.all().delete()
        t0 = time.perf_counter()
        budget_statuses(list(Budget.objects.all()), now=NOW)
        priced.append(time.perf_counter() - t0)
    times, bare = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        statuses = budget_statuses(list(Budget.objects.all()), now=NOW)
        times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        with connection.cursor() as cur:
            for month in MONTHS:  # what the statements' GROUP BY reads, nothing priced
                cur.execute(
                    """SELECT team_id, gpu_model_id, served_model, basis, unit, SUM(quantity)
                       FROM billing_usagerecord WHERE month = %s AND quantity > 0
                       AND basis <> 'included' GROUP BY 1, 2, 3, 4, 5""",
                    [month],
                )
                cur.fetchall()
        bare.append(time.perf_counter() - t0)
    assert len(statuses) == len(every)
    best = min(times)
    print(f"\nBudget benchmark on PostgreSQL ({RECORDS:,} usage records over 2 months, "
          f"{TEAMS:,} teams, {len(every):,} budgets)")  # fmt: skip
    print(f"{'bare GROUP BY of the 2 months (best of 5)':<46}{min(bare):>10.3f} s")
    cold = min(priced)
    print(f"{'budget_statuses, all priced + kept (best of 3)':<46}{cold:>10.3f} s  "
          f"target < {TARGET_S:.0f} s: {'met' if cold < TARGET_S else 'MISSED'}; "
          f"{BudgetConsumption.objects.count():,} rows kept")  # fmt: skip
    print(f"{'budget_statuses, kept rows (best of 5)':<46}{best:>10.3f} s  "
          f"{best / min(bare):.1f}x the bare GROUP BY; target < {TARGET_S:.0f} s: "
          f"{'met' if best < TARGET_S else 'MISSED'}")  # fmt: skip
    approvals(team_ids[4])


APPROVALS = int(os.environ.get("BENCH_BUDGET_APPROVALS", 200))
APPROVAL_RATIO = 2.0


def approvals(team_id: int) -> None:
    """Median ms of an approval with the budget check and without, alternating, same data."""
    from contextlib import nullcontext
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.test import override_settings
    from django.utils import timezone
    from factories import PoolFactory, node_with_gpus

    from billing.budgets.models import Budget
    from pools.capacity.models import CapacityRequest
    from pools.capacity.services.requests import capacity_request_approve
    from pools.inventory.models import GpuModel
    from pools.tenancy.models import Team

    team = Team.objects.get(pk=team_id)
    Budget.objects.create(team=team, period="quarter", starts_on=date(2026, 1, 1),
                          card_hours_limit=Decimal(100_000), enforcement="refuse")  # fmt: skip
    pool = PoolFactory(slug="bench-approve", slurm_partition="bench")
    node_with_gpus(8, hostname="bench-approve-01", pool=pool)
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    user = get_user_model()
    admin = user.objects.create_user("bench-admin", is_staff=True)
    member = user.objects.create_user("bench-member")
    start = timezone.now().replace(minute=0, second=0, microsecond=0) + timedelta(days=1)
    queue = CapacityRequest.objects.bulk_create([
        CapacityRequest(team=team, requested_by=member, workload_kind="training", pool=pool,
                        gpu_model=a100, card_count=1, starts_at=start + timedelta(hours=i),
                        ends_at=start + timedelta(hours=i + 1), justification="bench",
                        status="submitted", submitted_at=start)
        for i in range(APPROVALS + 3)
    ])  # fmt: skip
    spare = queue.pop()  # approved under the profiler (BENCH_PROFILE=1), not timed
    checked, bare = [], []
    for i, request in enumerate(queue):
        with override_settings(BUDGET_CHECK="") if i % 2 else nullcontext():
            t0 = time.perf_counter()
            capacity_request_approve(request=request, actor=admin)
            elapsed = (time.perf_counter() - t0) * 1000
        if os.environ.get("BENCH_PROFILE") and i == 4:
            import cProfile
            import pstats

            from django.test.utils import CaptureQueriesContext

            prof = cProfile.Profile()
            with CaptureQueriesContext(connection) as queries:
                prof.enable()
                capacity_request_approve(request=spare, actor=admin)
                prof.disable()
            pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
            for query in queries.captured_queries:
                print(query["time"], query["sql"][:300])
        if i >= 2:  # the first pair warms up
            (bare if i % 2 else checked).append(elapsed)
    if os.environ.get("BENCH_PROFILE"):
        import cProfile
        import pstats

        from django.test.utils import CaptureQueriesContext

        from billing.budgets.enforcement import budget_check

        prof = cProfile.Profile()
        prof.enable()
        for _ in range(20):
            budget_check(team=team, pool=pool, gpu_model=a100, cards=1,
                         starts_at=spare.starts_at, ends_at=spare.ends_at)  # fmt: skip
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        walls, in_db = [], []
        for _ in range(50):
            with CaptureQueriesContext(connection) as queries:
                t0 = time.perf_counter()
                budget_check(team=team, pool=pool, gpu_model=a100, cards=1,
                             starts_at=spare.starts_at, ends_at=spare.ends_at)  # fmt: skip
                walls.append((time.perf_counter() - t0) * 1000)
            in_db.append(sum(float(q["time"]) for q in queries.captured_queries) * 1000)
        print(
            f"budget_check alone: {statistics.median(walls):.2f} ms median, "
            f"{statistics.median(in_db):.2f} ms of it in {len(queries.captured_queries)} queries"
        )
    profiled = 1 if os.environ.get("BENCH_PROFILE") else 0
    assert CapacityRequest.objects.filter(status="approved").count() == len(queue) + profiled
    with_check, without = statistics.median(checked), statistics.median(bare)
    ratio = with_check / without
    print(f"{'approval, bare transaction (median)':<46}{without:>10.2f} ms  n={len(bare)}")
    print(f"{'approval with the budget check (median)':<46}{with_check:>10.2f} ms  "
          f"{ratio:.2f}x the bare one; target <= {APPROVAL_RATIO:.0f}x: "
          f"{'met' if ratio <= APPROVAL_RATIO else 'MISSED'}")  # fmt: skip


if __name__ == "__main__":
    main()
