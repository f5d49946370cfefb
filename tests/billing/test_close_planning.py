"""Issue 29, item 7: the month close reads 50 M usage rows in one pass, planned as such.

The close's usage query groups by team and ``STATEMENT_KEY``. PostgreSQL guesses the number of
groups as the product of each column's distinct count, and takes 200 for a column it has seen
no value of (``pool_id`` is NULL on nearly every row), capped at a tenth of the rows: a
hundred times too many groups here, so the plan was a disk sort instead of a hash aggregate
(benchmarks/billing.py, 1 M rows: 1.28 s against 0.47 s for the same GROUP BY without
``pool_id``). The ndistinct statistics of billing migration 0015 give it the real count. And the
ambiguous-time notes read their few flagged rows by a partial index, not a second scan of the
month.

The rows: 6,000 records of October 2026, 3 teams x 2 GPU models x 2 bases (reserved, used),
``pool_id`` NULL, ``served_model`` and ``unit`` one value each: 3 x 2 x 2 = 12 groups.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from billing.charges import ambiguous_time_notes, segment_sums_by_team
from billing.choices import StatementStatus
from billing.conf import billing_zone
from billing.rate_periods import rate_periods
from billing.services.statements import statements_close_month
from pools.inventory.models import GpuModel
from pools.tenancy.models import Team
from tests.factories import StatementFactory, TeamFactory

pytestmark = pytest.mark.django_db

MONTH = date(2026, 10, 1)
ROWS = 6000
GROUPS = 3 * 2 * 2


@pytest.fixture
def october():
    teams = [TeamFactory().pk for _ in range(3)]
    models = list(GpuModel.objects.order_by("pk").values_list("pk", flat=True)[:2])
    assert len(models) == 2
    with connection.cursor() as cur:
        cur.execute(
            """
            INSERT INTO billing_usagerecord (team_id, gpu_model_id, served_model, quantity, unit,
              basis, month, period_start, period_end, source, source_id, flag, created_at,
              updated_at)
            SELECT (%s::int[])[1 + g %% 3], (%s::int[])[1 + (g / 3) %% 2], '', 3600,
                   'card-seconds', CASE WHEN (g / 6) %% 2 = 0 THEN 'reserved' ELSE 'used' END,
                   %s, '2026-10-02T00:00Z'::timestamptz + g * interval '1 minute',
                   '2026-10-02T01:00Z'::timestamptz + g * interval '1 minute',
                   'slurm-accounting', 'plan:' || g, '', now(), now()
            FROM generate_series(1, %s) AS g
            """,
            [teams, models, MONTH, ROWS],
        )  # fmt: skip
        cur.execute("ANALYZE billing_usagerecord")
    return teams


def _explain(sql: str) -> dict:
    with connection.cursor() as cur:
        cur.execute("EXPLAIN (FORMAT JSON) " + sql)
        raw = cur.fetchone()[0]
    return (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]


def _captured(call) -> list[str]:
    with CaptureQueriesContext(connection) as ctx:
        call()
    return [q["sql"] for q in ctx.captured_queries]


def test_the_close_usage_query_is_planned_for_the_real_number_of_groups(october):
    periods = rate_periods(month=MONTH, zone=billing_zone())
    assert len(periods) == 1  # one GROUP BY, no straddling records
    sums, teams = segment_sums_by_team(MONTH, periods)
    assert teams == set(october) and sum(len(s) for s in sums.values()) == GROUPS
    (sql,) = [s for s in _captured(lambda: segment_sums_by_team(MONTH, periods)) if "GROUP BY" in s]
    estimated = _explain(sql)["Plan Rows"]
    # Without the statistics: 3 x 2 x 1 x 2 x 1 x 200 = 2,400 capped at ROWS / 10 = 600.
    assert estimated <= 2 * GROUPS


def test_the_ambiguous_time_notes_read_the_partial_index(october):
    (sql,) = _captured(lambda: ambiguous_time_notes(MONTH, october))
    assert "usage_ambiguous_month" in json.dumps(_explain(sql))


def _index_conditions(plan: dict) -> list[str]:
    found = [plan["Index Cond"]] if "Index Cond" in plan else []
    for child in plan.get("Plans", []):
        found += _index_conditions(child)
    return found


def test_the_late_usage_check_is_an_index_condition_on_updated_at(october):
    after_the_rows = timezone.now() + timedelta(days=1)  # no late usage: no adjustments
    for team in Team.objects.filter(pk__in=october):
        StatementFactory(
            team=team, month=MONTH, status=StatementStatus.FINAL, finalized_at=after_the_rows
        )
    november = date(2026, 11, 1)
    queries = _captured(
        lambda: statements_close_month(month=november, now=datetime(2026, 12, 1, 1, tzinfo=UTC))
    )
    (sql,) = [q for q in queries if "EXISTS" in q and "billing_usagerecord" in q]
    with connection.cursor() as cur:
        # The shape of the index is under test, not the size of the table.
        cur.execute("SET LOCAL enable_seqscan = off")
    conditions = _index_conditions(_explain(sql))
    assert any("updated_at" in c for c in conditions), conditions
