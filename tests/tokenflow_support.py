"""Gateway records of agent tasks for the token-flow tests: tasks A (12 calls, 7 retries, after
seed ``004`` §4.3) and B (4 calls), worked out in ``tests/pools/tokenflow/test_services.py``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def task_records(task: str, calls: int, retries: range = range(0), team: str = "nlp",
                 tool: int = 800, latency: float = 2.0, key: str = "") -> list[dict]:  # fmt: skip
    out = []
    for i in range(calls):
        prompt = 3000 + 800 * i
        record = {
            "idempotency_key": f"{key or task}-{i}", "team": team, "served_model": "qwen",
            "timestamp": (T0 + timedelta(seconds=10 * i)).isoformat(),
            "usage": {"prompt_tokens": prompt, "completion_tokens": 150,
                      "prompt_tokens_details": {"cached_tokens": 2000}},
            "metadata": {"task_id": task, "outcome": "retry" if i in retries else "ok"},
            "call_index": i + 1, "latency_s": latency,
        }  # fmt: skip
        if i:
            record["tool_return_tokens"] = tool
        out.append(record)
    return out


def task_a(**kw):
    return task_records("A", 12, range(2, 9), **kw)


def task_b(**kw):
    return task_records("B", 4, tool=1200, latency=1.0, **kw)
