"""Capacity dashboards on PostgreSQL at fleet size: 2,000 nodes / 16,000 GPUs / 100 teams.

Generates everything with ``INSERT … SELECT generate_series`` (no ORM loop): 4 pools, 8 cards a
node, 3 driver groups, ~1,000 allocations over the last year and next 8 weeks, 90 days of
requests, and hourly Slurm-accounting usage. ``BENCH_USAGE_DAYS`` (default 365) sets how much
hourly usage is generated for each of the 100 teams (365 days × 24 h × 100 teams = 876,000
records). Prints the p50 render time and the SQL query count of the admin dashboard (target
300 ms), its heatmap fragment and the team dashboard (target 150 ms). The admin dashboard is
measured twice: as a reader sees it again (its plan's held cards read from the shared cache)
and as the first view after an allocation was written (a new allocations' generation before
each sample, :func:`pools.capacity.generation.allocations_changed`: the plan read afresh).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gpp_bench python benchmarks/dashboards.py

``BENCH_SCREENSHOTS=<dir>`` also serves the generated fleet on a live server and saves
full-page screenshots of both dashboards (headless Debian chromium, 1400 px wide) into it.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.test.utils import (  # noqa: E402
    CaptureQueriesContext,
    get_runner,
    setup_test_environment,
)

NODES, GPUS_PER_NODE, TEAMS = 2000, 8, 100
USAGE_DAYS = int(os.environ.get("BENCH_USAGE_DAYS", 365))
RUNS = int(os.environ.get("BENCH_RUNS", 15))
SCREENSHOTS = os.environ.get("BENCH_SCREENSHOTS", "")


def main() -> None:
    setup_test_environment()
    runner = get_runner(django.conf.settings)(verbosity=0, interactive=False)
    old = runner.setup_databases()
    try:
        run()
    finally:
        runner.teardown_databases(old)


def column_defaults() -> None:
    """On this throwaway database, each column gets its model field's default (a constant, a
    list or dict, or the empty string of a text field without one) as the column's default, so
    that the ``INSERT … SELECT``s below need not name every column a later migration adds
    (Django keeps field defaults in Python, not in the schema)."""
    import json
    from decimal import Decimal

    from django.apps import apps

    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        for model in apps.get_models():
            for field in model._meta.concrete_fields:
                if field.primary_key:
                    continue
                if field.has_default() and callable(field.default):
                    value = field.default()
                    if not isinstance(value, (list, dict)):
                        continue  # a clock or a generated value: the SQL sets it
                else:
                    value = field.get_default()
                if value is None:
                    continue
                if isinstance(value, (list, dict)):
                    literal = "'" + json.dumps(value).replace("'", "''") + "'"
                elif isinstance(value, bool):
                    literal = "true" if value else "false"
                elif isinstance(value, (int, float, Decimal)):
                    literal = str(value)
                else:
                    literal = "'" + str(value).replace("'", "''") + "'"
                cursor.execute(
                    f"ALTER TABLE {quote(model._meta.db_table)} "
                    f"ALTER COLUMN {quote(field.column)} SET DEFAULT {literal}"
                )


SQL = """
INSERT INTO pools_pool (slug, name, description, scheduler, slurm_partition, k8s_node_selector,
                        overcommit_ratio, quota_backend, quota_cohort, burst, created_at)
SELECT 'pool-' || i, 'Pool ' || i, '', CASE WHEN i % 2 = 0 THEN 'slurm' ELSE 'kubernetes' END,
       'p' || i, '{{}}', 1.0, 'resourcequota', '', false, now() FROM generate_series(1, 4) i;
INSERT INTO pools_drivergroup (branch, min_driver_version, max_driver_version, max_cuda)
VALUES (535, '535.1', '535.1', '12.2'), (550, '550.1', '550.1', '12.4'),
       (570, '570.1', '570.1', '12.8') ON CONFLICT DO NOTHING;
INSERT INTO pools_node (hostname, pool_id, scheduler, state, state_reason, driver_version,
                        driver_group_id, cuda_version, partitions, labels, last_source,
                        created_at, updated_at)
SELECT 'node-' || lpad(i::text, 4, '0'),
       (SELECT id FROM pools_pool ORDER BY id OFFSET (i % 4) LIMIT 1), 'slurm',
       CASE WHEN i % 50 = 0 THEN 'drain' WHEN i % 97 = 0 THEN 'down' ELSE 'up' END, '',
       '550.1', (SELECT id FROM pools_drivergroup ORDER BY branch OFFSET (i % 3) LIMIT 1), '12.4',
       '[]', '{{}}', 'slurm', now(), now()
  FROM generate_series(1, {nodes}) i;
INSERT INTO pools_gpu (node_id, index, uuid, serial, pci_bus_id, gpu_model_id, raw_model_name,
                       health)
SELECT n.id, g, 'GPU-' || n.id || '-' || g, '', '',
       (ARRAY[{models}])[1 + (n.id % {model_count})], 'bench',
       CASE WHEN (n.id * 8 + g) % 211 = 0 THEN 'error' ELSE 'ok' END
  FROM pools_node n CROSS JOIN generate_series(0, {gpus} - 1) g;
INSERT INTO pools_team (slug, name, cost_centre)
SELECT 'team-' || i, 'Team ' || i, 'CC-' || i FROM generate_series(1, {teams}) i;
"""


def run() -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from pools.capacity.generation import allocations_changed
    from pools.inventory.models import GpuModel
    from pools.tenancy.models import Team

    models = list(
        GpuModel.objects.filter(slug__in=["a100_80g_sxm", "h800_sxm", "l40s", "rtx4090"])
        .order_by("slug")
        .values_list("pk", flat=True)
    )
    started = time.perf_counter()
    column_defaults()
    with connection.cursor() as cursor:
        cursor.execute(
            SQL.format(
                nodes=NODES,
                gpus=GPUS_PER_NODE,
                teams=TEAMS,
                models=",".join(map(str, models)),
                model_count=len(models),
            )  # fmt: skip
        )
        user = get_user_model().objects.create_user("bench-admin", password="x", is_staff=True)
        member = get_user_model().objects.create_user("bench-member", password="x")
        # Requests (every 2 h over the last 90 days and the next 8 weeks; each third one still
        # submitted), an allocation for every other approved one: ~1,000 allocations.
        cursor.execute(
            """
            INSERT INTO pools_capacityrequest (team_id, requested_by_id, workload_kind, pool_id,
                gpu_model_id, card_count, starts_at, ends_at, cuda_version, justification,
                status, decision_reason, created_at, submitted_at)
            SELECT (SELECT id FROM pools_team ORDER BY id OFFSET (i %% %(teams)s) LIMIT 1),
                   %(user)s,
                   'training', (SELECT id FROM pools_pool ORDER BY id OFFSET (i %% 4) LIMIT 1),
                   (%(models)s::int[])[1 + (i %% %(model_count)s)], 1 + i %% 8,
                   now() - interval '90 days' + i * interval '4 hours',
                   now() - interval '90 days' + i * interval '4 hours'
                       + (7 + i %% 21) * interval '1 day',
                   '', 'bench', CASE WHEN i %% 3 = 0 THEN 'submitted' ELSE 'approved' END, '',
                   now() - interval '90 days' + i * interval '2 hours',
                   now() - interval '90 days' + i * interval '2 hours'
              FROM generate_series(1, 1000) i
            """,
            {"teams": TEAMS, "user": user.pk, "models": models, "model_count": len(models)},
        )
        cursor.execute(
            """
            INSERT INTO pools_allocation (request_id, team_id, pool_id, gpu_model_id, card_count,
                starts_at, ends_at, status, pricing_method, scheduler_binding, status_reason,
                created_at, updated_at)
            SELECT id, team_id, pool_id, gpu_model_id, card_count, starts_at, ends_at,
                   CASE WHEN ends_at < now() THEN 'ended' WHEN starts_at > now() THEN 'approved'
                        ELSE 'active' END, 'reserved', '{}', '', now(), now()
              FROM pools_capacityrequest WHERE status = 'approved'
            """
        )
        cursor.execute(
            """
            INSERT INTO pools_membership (team_id, user_id, role)
            SELECT id, %s, 'member' FROM pools_team WHERE slug = 'team-1'
            """,
            [member.pk],
        )
        cursor.execute(
            """
            INSERT INTO billing_usagerecord (team_id, gpu_model_id, served_model, quantity, unit,
                basis, month, period_start, period_end, source, source_id, flag, created_at,
                updated_at)
            SELECT t.id, %(model)s, '', 3600 * (1 + (t.id + h) %% 8), 'card-seconds', 'used',
                   date_trunc('month', now() - h * interval '1 hour')::date,
                   now() - h * interval '1 hour', now() - (h - 1) * interval '1 hour',
                   'slurm-accounting', 'job-' || t.id || '-' || h, '', now(), now()
              FROM pools_team t CROSS JOIN generate_series(1, %(hours)s) h
            """,
            {"model": models[0], "hours": USAGE_DAYS * 24},
        )
        cursor.execute("ANALYZE")
    print(
        f"generated {NODES} nodes, {NODES * GPUS_PER_NODE} GPUs, {TEAMS} teams, "
        f"{TEAMS * USAGE_DAYS * 24:,} hourly usage records in {time.perf_counter() - started:.1f} s"
    )
    admin, team_client = Client(), Client()
    admin.force_login(user)
    team_client.force_login(member)
    slug = Team.objects.get(slug="team-1").slug

    def nothing() -> None:
        pass

    cases = [
        ("admin dashboard /dashboard/", admin, "/dashboard/", 300, nothing),
        ("admin dashboard after an allocation write", admin, "/dashboard/", 300,
         allocations_changed),
        ("admin heatmap fragment (200 nodes)", admin, "/dashboard/?part=heatmap", 300, nothing),
        ("admin dashboard filtered to a pool", admin, "/dashboard/?pool=pool-1", 300, nothing),
        ("team dashboard", team_client, f"/teams/{slug}/dashboard/", 150, nothing),
    ]  # fmt: skip
    print(f"{'page':42} {'p50 ms':>8} {'max ms':>8} {'queries':>8} {'target':>7}")
    for name, client, url, target, before in cases:
        client.get(url)  # warm caches
        times, queries = [], 0
        for _ in range(RUNS):
            before()
            with CaptureQueriesContext(connection) as captured:
                t0 = time.perf_counter()
                response = client.get(url)
                times.append((time.perf_counter() - t0) * 1000)
            assert response.status_code == 200, response.status_code
            queries = len(captured)
        p50 = statistics.median(times)
        verdict = "ok" if p50 <= target else "OVER"
        print(f"{name:42} {p50:8.1f} {max(times):8.1f} {queries:8d} {target:5d} {verdict}")
    if SCREENSHOTS:
        screenshots(
            Path(SCREENSHOTS),
            {"admin": admin, "team": team_client},
            [
                ("bench-admin-dashboard", "admin", "/dashboard/"),
                ("bench-admin-dashboard-pool", "admin", "/dashboard/?pool=pool-1"),
                ("bench-team-dashboard", "team", f"/teams/{slug}/dashboard/"),
            ],
        )


def screenshots(out: Path, clients: dict, pages: list[tuple[str, str, str]]) -> None:
    """Serve the generated data on a live server and save a full-page PNG of each page, signed
    in with the session of ``clients[who]``."""
    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from django.test.testcases import LiveServerThread
    from playwright.sync_api import sync_playwright

    server = LiveServerThread("127.0.0.1", StaticFilesHandler, port=0)
    server.daemon = True
    server.start()
    server.is_ready.wait()
    if server.error:
        raise server.error
    base = f"http://127.0.0.1:{server.port}"
    out.mkdir(parents=True, exist_ok=True)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"]
            )
            for name, who, path in pages:
                context = browser.new_context(viewport={"width": 1400, "height": 900})
                cookie = clients[who].cookies["sessionid"].value
                context.add_cookies([{"name": "sessionid", "value": cookie, "url": base}])
                page = context.new_page()
                page.goto(base + path)
                page.wait_for_load_state("networkidle")
                page.screenshot(path=out / f"{name}.png", full_page=True)
                context.close()
                print(f"screenshot {out / name}.png")
            browser.close()
    finally:
        server.terminate()


if __name__ == "__main__":
    main()
