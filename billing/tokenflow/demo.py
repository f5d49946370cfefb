"""Demo agent tasks: a customer-service agent of team ``nlp`` on the demo's served model, posted
through the real gateway import (:func:`billing.services.tokens.usage_tokens_ingest`) over the
six days before ``now``, half as OpenAI-style records (``metadata.task_id``, ``outcome``), half
as LiteLLM spend-log rows (``trace_id``, ``status``, ``request_duration_ms``).

Most tasks take 4 calls (plan, two tool calls, answer: the article's task after its fix); one
in four is the article's bad case (seed ``004`` §4.3): 12 calls, 7 of them retries after a tool
call with wrong arguments. Every call carries the conversation so far (``004`` §4.1): input
grows by the previous answer and the tool's return; the system prompt and tool descriptions
(2,400 tokens) are prefix-cached after the first call. Seeded: two runs post the same records
(and the second changes nothing: the keys are known).
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from billing.services.tokens import usage_tokens_ingest

SYSTEM_PROMPT_TOKENS = 2_400
TASKS = 48


def _task(n: int, start: datetime, rng: random.Random, served: str) -> list[dict]:
    bad = n % 4 == 1
    calls = 12 if bad else 4
    retries = set(range(2, 9)) if bad else set()
    litellm = n % 2 == 0
    task_id = f"support-{start:%m%d}-{n:03d}"
    prompt, at, out = SYSTEM_PROMPT_TOKENS + rng.randrange(150, 400), start, []
    for i in range(calls):
        answer = rng.randrange(60, 260)
        tool = rng.randrange(300, 1_200) if i else 0
        prompt += tool
        latency = round(rng.uniform(0.8, 2.6) + answer / 90, 2)
        outcome = "retry" if i in retries else "ok"
        record = {
            "idempotency_key": f"demo-agent-{task_id}-{i + 1}", "team": "nlp",
            "served_model": served, "timestamp": at.isoformat(),
            "usage": {"prompt_tokens": prompt, "completion_tokens": answer,
                      "prompt_tokens_details": {"cached_tokens": SYSTEM_PROMPT_TOKENS if i else 0}},
            "call_index": i + 1,
        }  # fmt: skip
        if tool:
            record["tool_return_tokens"] = tool
        if litellm:
            record |= {"trace_id": task_id, "request_duration_ms": int(latency * 1000),
                       "status": "success", "metadata": {"spend_logs_metadata": {
                           "outcome": outcome}}}  # fmt: skip
        else:
            record |= {"metadata": {"task_id": task_id, "outcome": outcome}, "latency_s": latency}
        out.append(record)
        prompt += answer
        at += timedelta(seconds=latency + rng.uniform(0.5, 4.0))
    return out


def demo_agent_tasks_load(*, now: datetime, served: str, seed: int = 31) -> int:
    """Post the demo's agent tasks (module docstring); returns the number of calls posted."""
    rng = random.Random(seed)
    first = now - timedelta(days=6)
    records = []
    for n in range(TASKS):
        start = first + timedelta(hours=n * 6 * 24 / TASKS, minutes=rng.randrange(0, 50))
        records.extend(_task(n, start, rng, served))
    usage_tokens_ingest(records=records)
    return len(records)
