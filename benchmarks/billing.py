"""Month close on PostgreSQL: N usage records for 500 teams, statements built in SQL.

Generates the records with one ``INSERT … SELECT generate_series`` (no ORM loop) into the
throwaway test database's table with its secondary indexes, unique constraint and (deferred)
foreign keys dropped, then builds them back from the catalog's own definitions, checks the set
is the one the migrations made, and runs ``VACUUM (ANALYZE)`` (hint bits and statistics, as
autovacuum leaves a production table): the close is timed against the production indexes.
50 M records: 20 min here at load 15 (7 min inserting, 13 rebuilding), against about 50 min
inserting into the indexed table.
Then times ``statements_close_month`` against a hand-written ``GROUP BY`` over the same rows,
and the token ingest service. ``BENCH_RECORDS`` (default 5,000,000) sets the size (50 M:
more than 10 GB of disk while the indexes are rebuilt; keep 20 GB free).

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


_TABLE = "billing_usagerecord"


def _secondary(cur) -> list[tuple[str, str, str]]:
    """The table's indexes and constraints that cost per inserted row, as ``(kind, name,
    definition)`` sorted: indexes other than the primary key's and the unique constraints'
    (``CREATE INDEX …``), unique constraints (``u``) and foreign keys (``f``, deferred: each
    row queues a trigger event until commit). Check constraints and the primary key stay."""
    cur.execute(
        """SELECT 'i', c.relname, pg_get_indexdef(i.indexrelid)
           FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
           WHERE i.indrelid = %s::regclass AND NOT i.indisprimary
             AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)
           UNION ALL
           SELECT contype::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
           WHERE conrelid = %s::regclass AND contype IN ('u', 'f')
           ORDER BY 1, 2""",
        [_TABLE, _TABLE],
    )
    return [tuple(row) for row in cur.fetchall()]


def _drop_secondary(cur) -> list[tuple[str, str, str]]:
    """Drop :func:`_secondary` (in this throwaway test database only) and return it."""
    saved = _secondary(cur)
    for kind, name, _ in saved:
        if kind == "i":
            cur.execute(f'DROP INDEX "{name}"')
        else:
            cur.execute(f'ALTER TABLE {_TABLE} DROP CONSTRAINT "{name}"')
    return saved


def _recreate(cur, saved: list[tuple[str, str, str]]) -> None:
    """Build back what :func:`_drop_secondary` dropped, from the catalog's own definitions:
    each index in one sort, each foreign key validated by one anti-join over the table."""
    cur.execute("SET maintenance_work_mem = '1GB'")
    for kind, name, definition in sorted(saved, key=lambda x: "iuf".index(x[0])):
        if kind == "i":
            cur.execute(definition)
        else:
            cur.execute(f'ALTER TABLE {_TABLE} ADD CONSTRAINT "{name}" {definition}')
    cur.execute("RESET maintenance_work_mem")


def _insert_records(cur, team_ids: list[int], model_ids: list[int]) -> float:
    """``RECORDS`` usage records of October 2026 in one ``INSERT … SELECT generate_series``;
    seconds taken."""
    t0 = time.perf_counter()
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
    return time.perf_counter() - t0


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
        saved = _drop_secondary(cur)
        insert_s = _insert_records(cur, team_ids, model_ids)
        t1 = time.perf_counter()
        _recreate(cur, saved)
        assert _secondary(cur) == saved, "the close must see the production index set"
        cur.execute("VACUUM (ANALYZE) billing_usagerecord")
        rebuild_s = time.perf_counter() - t1
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
    print(f"{'generate records (all three rows below)':<46}{generate_s:>10.2f}  "
          f"load {' '.join(f'{x:.1f}' for x in os.getloadavg())}")  # fmt: skip
    print(f"{'  INSERT … generate_series, indexes/FKs off':<46}{insert_s:>10.2f}")
    print(f"{'  indexes, unique, FKs rebuilt; VACUUM ANALYZE':<46}{rebuild_s:>10.2f}  "
          f"{len(saved)} dropped and rebuilt")  # fmt: skip
    print(f"{'hand-written GROUP BY':<46}{group_by_s:>10.2f}  {groups} groups")
    ratio = close_s / group_by_s if group_by_s else float("inf")
    print(f"{'statements_close_month (build + finalize)':<46}{close_s:>10.2f}  "
          f"{ratio:.1f}x GROUP BY; target < 60 s, < 3x")  # fmt: skip
    print(f"{'token ingest, 50,000 records in batches of 5,000':<46}{ingest_s:>10.2f}  "
          f"{len(batch) / ingest_s:,.0f} records/s (target >= 5,000)")  # fmt: skip


if __name__ == "__main__":
    main()
