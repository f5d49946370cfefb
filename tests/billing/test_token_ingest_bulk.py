"""The gateway import at size (issue #29 item 7): a batch's statements do not grow with it, and
idempotency keys of any characters survive the bulk write (``COPY``) and the check of the keys
already stored (one JSON parameter) exactly."""

from __future__ import annotations

from decimal import Decimal

from django.db import connection
from django.test.utils import CaptureQueriesContext

from billing.models import UsageRecord
from billing.services.tokens import usage_tokens_ingest
from pools.tokenflow.models import AgentCall

BASE = {"team": "nlp", "served_model": "qwen", "timestamp": "2026-10-05T10:00:00+00:00"}
# Characters COPY's text format escapes (backslash, tab, newline), JSON escapes (quote,
# backslash), array literals quote (braces, comma, NULL) and non-ASCII ones.
ODD_KEYS = ['q"uote', "back\\slash", "tab\there", "new\nline", "{1,2}", "NULL", "é-ü", "🙂 x'y"]


def record(key: str, **extra) -> dict:
    return {**BASE, "idempotency_key": key, "prompt_tokens": 30, "completion_tokens": 4,
            "cached_tokens": 10, **extra}  # fmt: skip


def test_keys_of_any_characters_are_stored_as_sent_and_known_on_replay(team, rates):
    batch = [record(k, metadata={"task_id": f"t-{i}"}) for i, k in enumerate(ODD_KEYS)]
    first = usage_tokens_ingest(records=batch)
    assert (first.accepted, first.duplicates, first.rejected) == (8, 0, [])
    stored = set(UsageRecord.objects.values_list("source_id", "unit", "quantity"))
    # 30 prompt tokens of which 10 cached: 20 uncached input, 10 cached input, 4 output.
    expected = {
        (f"{k}:{unit}", unit, Decimal(q))
        for k in ODD_KEYS
        for unit, q in (("input-tokens", 20), ("cached-input-tokens", 10), ("output-tokens", 4))
    }
    assert stored == expected
    assert set(AgentCall.objects.values_list("source_key", flat=True)) == set(ODD_KEYS)

    again = usage_tokens_ingest(records=[*batch, record("fresh")])
    assert (again.accepted, again.duplicates, again.rejected) == (1, 8, [])
    assert UsageRecord.objects.count() == 3 * 9


def test_a_batch_takes_as_many_statements_at_2000_records_as_at_3(team, rates):
    """Before: the rows went in 5,000 at a time by INSERT (6,000 rows: 2 statements, 3 rows:
    1); now by one COPY, whatever the size. The bad record is reported, the rest kept."""

    def statements(n: int, prefix: str) -> int:
        batch = [record(f"{prefix}-{i}") for i in range(n)]
        batch.append(record(f"{prefix}-bad", prompt_tokens=-1))
        with CaptureQueriesContext(connection) as ctx:
            result = usage_tokens_ingest(records=batch)
        assert (result.accepted, len(result.rejected)) == (n, 1)
        assert result.rejected[0]["index"] == n
        return len(ctx.captured_queries)

    assert statements(2_000, "big") == statements(3, "small")
    assert UsageRecord.objects.filter(source_id__startswith="big-").count() == 3 * 2_000


def test_a_key_with_a_nul_is_rejected_by_line_and_the_rest_kept(team, rates):
    """PostgreSQL cannot store NUL in a text column: the record is refused by name (before, the
    whole batch failed inside the database), the others are stored."""
    result = usage_tokens_ingest(records=[record("ok-1"), record("bad\x00key"), record("ok-2")])
    assert result.accepted == 2
    assert [(r["index"], r["error"]) for r in result.rejected] == [
        (1, "idempotency_key: no NUL character")
    ]
    stored = {
        source.split(":")[0] for source in UsageRecord.objects.values_list("source_id", flat=True)
    }
    assert stored == {"ok-1", "ok-2"}
