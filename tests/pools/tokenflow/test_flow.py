"""Token flow arithmetic (pure; ``pools/tokenflow/flow.py``)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from pools.tokenflow.flow import CallRow, TaskTotals, distribution, fold_calls, percentile

T0 = datetime(2026, 12, 1, 10, tzinfo=UTC)


def call(i: int, task: str = "A", **kw) -> CallRow:
    fields = {"team_id": 1, "served_model": "qwen", "task_id": task, "source_key": f"{task}{i}",
              "called_at": T0 + timedelta(seconds=10 * i), "input_tokens": 3000 + 800 * i,
              "cached_tokens": 2000, "output_tokens": 150, "call_index": i + 1,
              "outcome": "retry" if 2 <= i <= 8 else "ok", "latency_s": 2.0,
              "tool_return_tokens": 800 if i else None}  # fmt: skip
    return CallRow(**(fields | kw))


def one_by_one(calls: list[CallRow]) -> dict:
    out: dict = {}
    for c in calls:
        if c.task_key in out:
            out[c.task_key].add(TaskTotals.of(c))
        else:
            out[c.task_key] = TaskTotals.of(c)
    return out


def test_folding_a_batch_equals_adding_calls_one_by_one():
    """Whatever the order, including unmetered, replayed and error calls and a tie in time
    broken by call_index."""
    calls = [call(i) for i in range(12)] + [call(i, "B") for i in range(4)]
    calls += [call(12, input_tokens=None, cached_tokens=None, output_tokens=None),
              call(13, replayed=True), call(14, outcome="error", latency_s=None),
              call(15, "B", called_at=T0, call_index=0, input_tokens=999)]  # fmt: skip
    for seed in range(5):
        random.Random(seed).shuffle(calls)
        assert fold_calls(calls) == one_by_one(calls)
    b = fold_calls(calls)[(1, "qwen", "B")]
    assert (b.first_input_tokens, b.first_metered_index) == (999, 0)  # same time, index 0 < 1


def test_the_articles_task_totals():
    """As worked out in test_services.py: 88,800 input, 49,000 of it wasted, 7 retries."""
    a = fold_calls([call(i) for i in range(12)])[(1, "qwen", "A")]

    assert (a.calls, a.retries, a.input_tokens, a.wasted_input_tokens) == (12, 7, 88_800, 49_000)
    assert (a.first_input_tokens, a.last_input_tokens) == (3_000, 11_800)


def test_distribution_bars_and_percentiles():
    """Tasks of 4 calls × 3 and of 12 calls × 1: bars 1 … 11 then "12"; median 4 (rank
    ceil(0.5 × 4) = 2), p90 12 (rank ceil(3.6) = 4). Above 16 calls the last bar is "16+"."""
    counts = {4: 3, 12: 1}

    assert distribution(counts) == [(str(n), 3 if n == 4 else 0) for n in range(1, 12)] + [
        ("12", 1)]  # fmt: skip
    assert (percentile(counts, 0.5), percentile(counts, 0.9)) == (4, 12)
    assert distribution({2: 1, 40: 2})[-1] == ("16+", 2)
    assert distribution({}) == [] and percentile({}, 0.5) is None
