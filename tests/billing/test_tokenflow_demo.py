"""The demo's agent tasks (``billing/tokenflow/demo.py``): 48 tasks of team ``nlp``; every
fourth one from task 1 (n % 4 == 1: 12 tasks) is the article's bad case, 12 calls with 7
retries, the other 36 take 4 calls. Calls: 12 × 12 + 36 × 4 = 144 + 144 = 288; retries
12 × 7 = 84, so 84 of 288 calls are wasted; a task calls the model 288 / 48 = 6 times on
average."""

from __future__ import annotations

from datetime import UTC, datetime

from billing.tokenflow.demo import demo_agent_tasks_load
from pools.tokenflow.models import AgentTask

NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)


def test_demo_agent_tasks_show_wasted_retries(team):
    posted = demo_agent_tasks_load(now=NOW, served="qwen")

    assert posted == 288
    tasks = AgentTask.objects.filter(team=team)
    assert tasks.count() == 48
    assert sorted({(t.calls, t.retries) for t in tasks}) == [(4, 0), (12, 7)]
    assert tasks.filter(calls=12).count() == 12
    assert sum(t.retries for t in tasks) == 84
    assert all(t.last_input_tokens > t.first_input_tokens for t in tasks)  # the prompt grows
    assert demo_agent_tasks_load(now=NOW, served="qwen") == 288  # posted again …
    assert sum(t.calls for t in AgentTask.objects.all()) == 288  # … and nothing changed
