"""The per-day rollup of token flow (:class:`~pools.tokenflow.models.AgentTaskDay`) kept by the
gateway import: one row per team, served model, day of the task's first call (billing time zone)
and calls in the task.

Tasks (``tokenflow_support``; team ``nlp`` unless said, served model ``qwen``, first call at
2026-12-01 10:00 UTC unless shifted):

* **A**: 12 calls, 7 retries — input 88,800, cached 24,000, output 1,800, wasted input 49,000 /
  cached 14,000 / output 1,050, first-call input 3,000, last-call 11,800, tool returns 11 × 800 =
  8,800, latency 12 × 2 s = 24 s (worked out in ``test_services.py``).
* A **four-call task** (``task_records(name, 4)``): input 3,000 + 3,800 + 4,600 + 5,400 = 16,800,
  cached 4 × 2,000 = 8,000, output 4 × 150 = 600, all ``ok``, first-call 3,000, last-call 5,400,
  tool returns 3 × 800 = 2,400 (calls 2 … 4), latency 4 × 2 s = 8 s. **B** is one with tool
  returns of 1,200 (3 × 1,200 = 3,600) and 1 s latency (4 s).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from tokenflow_support import task_a, task_b, task_records

from billing.services.tokens import usage_tokens_ingest
from pools.tokenflow.models import AgentTaskDay
from pools.tokenflow.services import tokenflow_prune

FIELDS = (
    "tasks", "tasks_metered", "input_tokens", "cached_tokens", "output_tokens", "retries",
    "outcomes_known", "wasted_input_tokens", "first_input_tokens", "last_input_tokens",
    "tool_return_tokens", "tool_return_calls", "latency_s_total", "latency_calls",
)  # fmt: skip
FOUR_CALLS = (1, 1, 16_800, 8_000, 600, 0, 4, 0, 3_000, 5_400, 2_400, 3, 8.0, 4)
TASK_A = (1, 1, 88_800, 24_000, 1_800, 7, 12, 49_000, 3_000, 11_800, 8_800, 11, 24.0, 12)


@pytest.fixture
def nlp(db):
    from factories import TeamFactory

    TeamFactory(slug="vision", name="Vision")
    return TeamFactory(slug="nlp", name="NLP")


def shifted(records: list[dict], **delta) -> list[dict]:
    for record in records:
        at = datetime.fromisoformat(record["timestamp"]) + timedelta(**delta)
        record["timestamp"] = at.isoformat()
    return records


def rows() -> dict[tuple, tuple]:
    return {
        (d.team.slug, d.served_model, d.day, d.task_calls): tuple(getattr(d, f) for f in FIELDS)
        for d in AgentTaskDay.objects.select_related("team")
    }


def test_rows_add_up_the_tasks_per_day_and_calls(nlp):
    """On 12-01: A (12 calls), B and D (4 calls each: one row of two tasks); on 12-02: C (4
    calls). Vision's task is also named "A" (4 calls, 12-01): its own team's row.

    The 12-01 four-call row is B + D: tasks 2, input 2 × 16,800 = 33,600, cached 16,000,
    output 1,200, first-call 6,000, last-call 10,800, tool returns 3,600 + 2,400 = 6,000 over
    6 calls, latency 4 + 8 = 12 s over 8 calls."""
    usage_tokens_ingest(
        records=task_a() + task_b() + task_records("D", 4, key="d")
        + shifted(task_records("C", 4, key="c"), days=1)
        + task_records("A", 4, team="vision", key="v")
    )  # fmt: skip

    assert rows() == {
        ("nlp", "qwen", date(2026, 12, 1), 12): TASK_A,
        ("nlp", "qwen", date(2026, 12, 1), 4): (
            2,
            2,
            33_600,
            16_000,
            1_200,
            0,
            8,
            0,
            6_000,
            10_800,
            6_000,
            6,
            12.0,
            8,
        ),  # fmt: skip
        ("nlp", "qwen", date(2026, 12, 2), 4): FOUR_CALLS,
        ("vision", "qwen", date(2026, 12, 1), 4): FOUR_CALLS,
    }


def test_a_task_split_over_batches_moves_to_its_final_row(nlp):
    """A's last five calls (i = 7 … 11) first: a five-call task on 12-01; then its first seven
    arrive and it becomes the twelve-call task: the five-call row is gone, not left at 0."""
    records = task_a()
    usage_tokens_ingest(records=records[7:])
    assert list(rows()) == [("nlp", "qwen", date(2026, 12, 1), 5)]

    usage_tokens_ingest(records=records[:7])

    assert rows() == {("nlp", "qwen", date(2026, 12, 1), 12): TASK_A}


def test_a_task_whose_first_call_arrives_late_moves_to_that_day(nlp):
    """C's calls on 12-02 10:00:10 … 10:00:30 first (a three-call task of 12-02), then its first
    call shifted back to 11-30 10:00: a four-call task of 11-30, nothing left on 12-02."""
    records = shifted(task_records("C", 4, key="c"), days=1)
    usage_tokens_ingest(records=records[1:])
    usage_tokens_ingest(records=shifted(records[:1], days=-2))

    assert rows() == {("nlp", "qwen", date(2026, 11, 30), 4): FOUR_CALLS}


def test_days_are_in_the_billing_time_zone(nlp, settings):
    """New York is UTC−5 in December: 2026-12-02 03:00 UTC is 12-01 22:00 there."""
    settings.BILLING_TIME_ZONE = "America/New_York"
    usage_tokens_ingest(records=shifted(task_records("C", 4, key="c"), hours=17))

    assert list(rows()) == [("nlp", "qwen", date(2026, 12, 1), 4)]


def test_calls_pruned_past_retention_stay_in_the_rows(nlp, settings):
    """A's first seven calls (10:00:00 … 10:01:00), then pruning with a retention of 35 days on
    2027-01-05 10:00:05 (cutoff 2026-12-01 10:00:05) deletes the first call (3,000 input); the
    rows keep it. The last five calls then make A whole: the twelve-call row holds every call,
    the pruned one included (input 88,800, first-call input 3,000)."""
    settings.TOKENFLOW_CALL_RETENTION_DAYS = 35
    records = task_a()
    usage_tokens_ingest(records=records[:7])
    before = rows()

    assert tokenflow_prune(now=datetime(2027, 1, 5, 10, 0, 5, tzinfo=UTC)) == 1
    assert rows() == before
    usage_tokens_ingest(records=records[7:])

    assert rows() == {("nlp", "qwen", date(2026, 12, 1), 12): TASK_A}
