"""Token flow through the gateway import: calls kept per task, totals, duplicates, retention,
the advisor's prompt-bloat signals.

The two tasks used throughout (team ``nlp``, served model ``qwen``), after seed ``004`` §4.3 (an
agent making 12 model calls a task, 7 of them wasted on correcting tool arguments):

* **A**, 12 calls at 10:00:00 + 10 s × i (i = 0 … 11): input 3,000 + 800 × i tokens (each call
  carries the conversation so far, ``004`` §4.1), 2,000 of them cached (the system prompt and
  tool descriptions), 150 output tokens, latency 2 s; calls 3 … 9 (i = 2 … 8, seven calls) are
  ``retry``, the rest ``ok``; calls 2 … 12 carry a tool return of 800 tokens.

  input Σ = 12 × 3,000 + 800 × (0 + … + 11) = 36,000 + 800 × 66 = 88,800;
  cached Σ = 12 × 2,000 = 24,000; output Σ = 12 × 150 = 1,800;
  wasted input = 7 × 3,000 + 800 × (2 + … + 8) = 21,000 + 800 × 35 = 49,000;
  wasted cached = 14,000; wasted output = 1,050; first call 3,000, last call 11,800 input.
* **B**, 4 calls the same way (input 3,000 / 3,800 / 4,600 / 5,400 = 16,800, cached 8,000,
  output 600), all ``ok``, latency 1 s, calls 2 … 4 with a tool return of 1,200 tokens.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from tokenflow_support import T0, task_a, task_b, task_records

from billing.models import UsageRecord
from billing.services.tokens import usage_tokens_ingest
from pools.tokenflow.models import AgentCall, AgentTask
from pools.tokenflow.selectors import prompt_bloat_signals
from pools.tokenflow.services import tokenflow_prune


@pytest.fixture
def nlp(db):
    from factories import TeamFactory

    return TeamFactory(slug="nlp", name="NLP")


def test_the_articles_task_is_kept_with_its_totals(nlp):
    result = usage_tokens_ingest(records=task_a())

    assert (result.accepted, result.rejected) == (12, [])
    task = AgentTask.objects.get()
    assert (task.team_id, task.served_model, task.task_id) == (nlp.pk, "qwen", "A")
    assert (task.calls, task.metered_calls, task.retries, task.errors, task.outcomes_known) == (
        12, 12, 7, 0, 12)  # fmt: skip
    assert (task.input_tokens, task.cached_tokens, task.output_tokens) == (88_800, 24_000, 1_800)
    assert (task.wasted_input_tokens, task.wasted_cached_tokens, task.wasted_output_tokens) == (
        49_000, 14_000, 1_050)  # fmt: skip
    assert (task.first_input_tokens, task.last_input_tokens) == (3_000, 11_800)
    assert (task.tool_return_tokens, task.tool_return_calls) == (11 * 800, 11)
    assert (task.latency_s_total, task.latency_calls) == (24.0, 12)
    assert (task.first_call_at, task.last_call_at) == (T0, T0 + timedelta(seconds=110))
    assert AgentCall.objects.count() == 12
    # billing as before: uncached 88,800 − 24,000 = 64,800, cached 24,000, output 1,800
    billed = {u: sum(r.quantity for r in UsageRecord.objects.filter(unit=u))
              for u in ("input-tokens", "cached-input-tokens", "output-tokens")}  # fmt: skip
    assert billed == {"input-tokens": 64_800, "cached-input-tokens": 24_000,
                      "output-tokens": 1_800}  # fmt: skip


def test_a_task_split_over_batches_adds_up_to_the_same_totals(nlp):
    records = task_a()
    usage_tokens_ingest(records=records[7:])
    usage_tokens_ingest(records=records[:7])  # the earlier calls arrive last

    task = AgentTask.objects.get()
    assert (task.calls, task.retries, task.input_tokens) == (12, 7, 88_800)
    assert (task.first_input_tokens, task.last_input_tokens) == (3_000, 11_800)
    assert task.first_call_at == T0


def test_the_same_batch_twice_counts_once(nlp):
    usage_tokens_ingest(records=task_a())
    again = usage_tokens_ingest(records=task_a())

    assert (again.accepted, again.duplicates) == (0, 12)
    assert AgentTask.objects.get().calls == 12
    assert AgentCall.objects.count() == 12


def test_a_task_id_repeating_across_teams_is_two_tasks(nlp):
    from factories import TeamFactory

    TeamFactory(slug="vision", name="Vision")
    usage_tokens_ingest(records=task_a())
    usage_tokens_ingest(records=task_b(team="vision", key="vision-A"))  # named "B" …
    usage_tokens_ingest(records=task_records("A", 4, team="vision", key="v"))  # … and "A"

    rows = sorted(AgentTask.objects.values_list("team__slug", "task_id", "calls"))
    assert rows == [("nlp", "A", 12), ("vision", "A", 4), ("vision", "B", 4)]


def test_a_record_without_usage_is_an_unmetered_call(nlp):
    """No usage: one unmetered request in billing as before, a call with unknown tokens here."""
    records = task_b()
    del records[1]["usage"]  # the second call (3,800 input) reported nothing

    usage_tokens_ingest(records=records)

    task = AgentTask.objects.get()
    assert (task.calls, task.metered_calls, task.unmetered_calls) == (4, 3, 1)
    assert task.input_tokens == 3_000 + 4_600 + 5_400
    call = AgentCall.objects.get(source_key="B-1")
    assert (call.input_tokens, call.cached_tokens, call.output_tokens) == (None, None, None)
    assert UsageRecord.objects.filter(unit="unmetered-requests").count() == 1


def test_a_replayed_call_is_counted_but_its_tokens_are_not(nlp):
    records = task_b()
    records[3]["cache_hit"] = True

    usage_tokens_ingest(records=records)

    task = AgentTask.objects.get()
    assert (task.calls, task.metered_calls, task.replayed_calls) == (4, 3, 1)
    assert task.input_tokens == 3_000 + 3_800 + 4_600
    assert task.last_input_tokens == 4_600  # the last call a GPU computed


def test_a_bad_outcome_rejects_that_record_only(nlp):
    records = task_b()
    records[2]["metadata"]["outcome"] = "partly"

    result = usage_tokens_ingest(records=records)

    assert result.accepted == 3
    assert result.rejected == [{"index": 2, "idempotency_key": "B-2",
                                "error": "outcome: ok, retry or error (or LiteLLM's success / "
                                         "failure)"}]  # fmt: skip
    assert AgentTask.objects.get().calls == 3
    assert not UsageRecord.objects.filter(source_id__startswith="B-2:").exists()


def test_records_without_a_task_are_billed_and_not_in_token_flow(nlp):
    records = task_b()
    for r in records:
        del r["metadata"]

    assert usage_tokens_ingest(records=records).accepted == 4
    assert AgentTask.objects.count() == AgentCall.objects.count() == 0
    assert UsageRecord.objects.filter(unit="output-tokens").count() == 4


def test_pruning_old_calls_keeps_every_total(nlp, settings):
    """Retention 35 days: on 2027-01-05 10:00:05, 35 days back is 2026-12-01 10:00:05, so the
    calls at 10:00:00 (A's and B's first) go and the rest stay; the tasks are untouched."""
    settings.TOKENFLOW_CALL_RETENTION_DAYS = 35
    usage_tokens_ingest(records=task_a() + task_b())
    before = list(AgentTask.objects.order_by("task_id").values())

    deleted = tokenflow_prune(now=datetime(2027, 1, 5, 10, 0, 5, tzinfo=UTC))

    assert deleted == 2
    assert AgentCall.objects.count() == 14
    assert list(AgentTask.objects.order_by("task_id").values()) == before
    assert prompt_bloat_signals(nlp.pk, "qwen", T0, T0 + timedelta(days=1))["tasks"] == 2


def test_prompt_bloat_signals_of_the_two_tasks(nlp):
    """tasks 2; calls per task (12 + 4) / 2 = 8; first-call input (3,000 + 3,000) / 2 = 3,000;
    last-call input (11,800 + 5,400) / 2 = 8,600; tool returns (11 × 800 + 3 × 1,200) / 14 =
    12,400 / 14; cached (24,000 + 8,000) / (88,800 + 16,800) = 32,000 / 105,600; retries
    7 / 16 = 0.4375."""
    usage_tokens_ingest(records=task_a() + task_b())

    got = prompt_bloat_signals(nlp.pk, "qwen", T0, T0 + timedelta(hours=1))

    assert got == {
        "tasks": 2,
        "calls_per_task_mean": 8.0,
        "input_tokens_first_call_mean": 3_000.0,
        "input_tokens_last_call_mean": 8_600.0,
        "tool_return_tokens_mean": pytest.approx(12_400 / 14),
        "cached_share": pytest.approx(32_000 / 105_600),
        "retry_share": 0.4375,
    }


def test_prompt_bloat_signals_unknowns_and_no_tasks(nlp):
    """Without outcomes or tool returns those are None; outside the window, no tasks: None."""
    records = task_b()
    for r in records:
        r["metadata"].pop("outcome")
        r.pop("tool_return_tokens", None)
    usage_tokens_ingest(records=records)

    got = prompt_bloat_signals(nlp.pk, "qwen", T0, T0 + timedelta(hours=1))

    assert (got["retry_share"], got["tool_return_tokens_mean"]) == (None, None)
    assert got["calls_per_task_mean"] == 4.0
    assert prompt_bloat_signals(nlp.pk, "qwen", T0 + timedelta(hours=1), T0 + timedelta(2)) is None
    assert prompt_bloat_signals(nlp.pk, "other-model", T0, T0 + timedelta(hours=1)) is None


@pytest.mark.postgresql  # advisory locks
@pytest.mark.django_db(transaction=True)
def test_two_identical_batches_at_once_count_once():
    """Two gateway workers post the same batch at the same moment: the token-flow lock makes
    the second wait and find every call known, so A still has 12 calls (not 24)."""
    from factories import TeamFactory

    TeamFactory(slug="nlp", name="NLP")
    barrier, errors = threading.Barrier(2), []

    def post():
        try:
            barrier.wait()
            usage_tokens_ingest(records=task_a())
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert errors == []
    assert AgentTask.objects.get().calls == 12
    assert AgentCall.objects.count() == 12
