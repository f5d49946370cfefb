"""Month close on PostgreSQL: N usage records for 500 teams, statements built in SQL.

Generates the records with one ``INSERT … SELECT generate_series`` (no ORM loop), then times
``statements_close_month`` against a hand-written ``GROUP BY`` over the same rows, and the
token ingest service. ``BENCH_RECORDS`` (default 5,000,000) sets the size.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gpp_bench python benchmarks/billing.py
"""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")

import django  # noqa: E402

django.setup()

from django.core import mail  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import get_runner, setup_test_environment  # noqa: E402

RECORDS = int(os.environ.get("BENCH_RECORDS", 5_000_000))
TEAMS = 500
MONTH = date(2026, 10, 1)


def main() -> None:
    setup_test_environment()
    runner = get_runner(django.conf.settings)(verbosity=0, interactive=False)
    old = runner.setup_databases()
    try:
        run()
    finally:
        runner.teardown_databases(old)


def run() -> None:
    from billing.choices import RateKind
    from billing.services.rates import rate_card_create
    from billing.services.statements import statements_close_month
    from billing.services.tokens import usage_tokens_ingest
    from pools.inventory.models import GpuModel
    from pools.tenancy.models import Team

    models = list(GpuModel.objects.filter(slug__in=["a100_80g_sxm", "h800_sxm", "l40s", "rtx4090"]))
    rate_card_create(name="bench", currency="EUR", effective_from=date(2026, 1, 1),
                     gpu_prices={(m.pk, k): Decimal("1.50") for m in models
                                 for k in (RateKind.GPU_RESERVED, RateKind.GPU_USED)},
                     token_prices={("m", RateKind.TOKEN_INPUT): Decimal("0.2"),
                                   ("m", RateKind.TOKEN_OUTPUT): Decimal("0.6")})  # fmt: skip
    Team.objects.bulk_create([Team(slug=f"bench-{i}", name=f"Bench {i}") for i in range(TEAMS)])
    team_ids = list(Team.objects.order_by("pk").values_list("pk", flat=True))
    model_ids = [m.pk for m in models]
    t0 = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute(
            """
            INSERT INTO billing_usagerecord (team_id, gpu_model_id, served_model, quantity, unit,
              basis, month, period_start, period_end, source, source_id, flag, created_at,
              updated_at)
            SELECT (%s::int[])[1 + g %% %s], (%s::int[])[1 + (g / 7) %% %s], '',
                   (1 + g %% 97) * 3600, 'card-seconds',
                   CASE WHEN g %% 5 = 0 THEN 'reserved' ELSE 'used' END, %s,
                   %s::timestamptz + (g %% 2600000) * interval '1 second',
                   %s::timestamptz + (g %% 2600000 + 3600) * interval '1 second',
                   'slurm-accounting', 'bench:' || g, '', now(), now()
            FROM generate_series(1, %s) AS g
            """,
            [team_ids, TEAMS, model_ids, len(model_ids), MONTH, datetime(2026, 10, 1, tzinfo=UTC),
             datetime(2026, 10, 1, tzinfo=UTC), RECORDS],
        )  # fmt: skip
        cur.execute("ANALYZE billing_usagerecord")
    generate_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute(
            """SELECT team_id, gpu_model_id, served_model, basis, unit, SUM(quantity)
               FROM billing_usagerecord WHERE month = %s AND quantity > 0 AND basis <> 'included'
               GROUP BY team_id, gpu_model_id, served_model, basis, unit""",
            [MONTH],
        )
        groups = len(cur.fetchall())
    group_by_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    closed = statements_close_month(month=MONTH, now=datetime(2026, 11, 1, 1, tzinfo=UTC))
    close_s = time.perf_counter() - t0
    assert len(closed) == TEAMS and not mail.outbox

    batch = [{"idempotency_key": f"tok-{i}", "team": "bench-1", "served_model": "m",
              "prompt_tokens": 1000 + i, "completion_tokens": 200, "cached_tokens": 0,
              "timestamp": "2026-10-05T10:00:00+00:00"} for i in range(50_000)]  # fmt: skip
    t0 = time.perf_counter()
    for offset in range(0, len(batch), 5000):
        usage_tokens_ingest(records=batch[offset : offset + 5000])
    ingest_s = time.perf_counter() - t0

    print(f"\nBilling benchmark on PostgreSQL ({RECORDS:,} usage records, {TEAMS} teams)")
    print(f"{'step':<46}{'seconds':>10}  note")
    print(f"{'generate records (INSERT … generate_series)':<46}{generate_s:>10.2f}")
    print(f"{'hand-written GROUP BY':<46}{group_by_s:>10.2f}  {groups} groups")
    ratio = close_s / group_by_s if group_by_s else float("inf")
    print(f"{'statements_close_month (build + finalize)':<46}{close_s:>10.2f}  "
          f"{ratio:.1f}x GROUP BY; target < 60 s, < 3x")  # fmt: skip
    print(f"{'token ingest, 50,000 records in batches of 5,000':<46}{ingest_s:>10.2f}  "
          f"{len(batch) / ingest_s:,.0f} records/s (target >= 5,000)")  # fmt: skip


if __name__ == "__main__":
    main()
