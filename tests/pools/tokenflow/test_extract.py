"""What a gateway record says about its agent task (pure; ``pools/tokenflow/extract.py``).

Record shapes follow the sources named in the module: OpenAI ``metadata`` (string pairs),
LiteLLM's StandardLoggingPayload (``trace_id``, ``status`` success / failure, ``startTime`` /
``endTime`` epoch floats) and its spend-log row (``session_id``, ``status``,
``request_duration_ms``, ISO ``startTime`` / ``endTime``, ``proxy_server_request``)."""

from __future__ import annotations

import pytest

from pools.tokenflow.extract import (
    DEFAULT_OUTCOME_PATHS,
    DEFAULT_TASK_ID_HEADER,
    DEFAULT_TASK_ID_PATHS,
    CallFields,
    call_fields,
)


def fields(record: dict, **overrides) -> CallFields | None:
    kwargs = {"task_paths": DEFAULT_TASK_ID_PATHS, "header": DEFAULT_TASK_ID_HEADER,
              "outcome_paths": DEFAULT_OUTCOME_PATHS, "max_tokens": 100_000_000}  # fmt: skip
    return call_fields(record, **(kwargs | overrides))


def test_openai_metadata_names_the_task_and_outcome():
    got = fields({"metadata": {"task_id": "t-1", "outcome": "retry"}, "call_index": 3,
                  "tool_return_tokens": 812, "latency_s": 1.25})  # fmt: skip

    assert got == CallFields("t-1", 3, "retry", 1.25, 812)


def test_litellm_standard_logging_payload():
    """trace_id groups the calls; status "failure" is an error; latency 1733300002.5 −
    1733300000.0 = 2.5 s (startTime / endTime are epoch seconds)."""
    record = {"trace_id": "tr-9", "status": "failure", "startTime": 1733300000.0,
              "endTime": 1733300002.5, "response_time": 0.1}  # fmt: skip

    assert fields(record) == CallFields("tr-9", None, "error", 2.5, None)


def test_litellm_spend_log_row():
    """session_id groups; request_duration_ms 1840 is 1.84 s and wins over the times."""
    record = {"session_id": "s-2", "status": "success", "request_duration_ms": 1840,
              "startTime": "2026-12-01T10:00:00+00:00",
              "endTime": "2026-12-01T10:00:09+00:00"}  # fmt: skip

    assert fields(record) == CallFields("s-2", None, "ok", 1.84, None)


def test_spend_log_times_as_iso_strings():
    record = {"session_id": "s-3", "startTime": "2026-12-01T10:00:00+00:00",
              "endTime": "2026-12-01T10:00:03.5+00:00"}  # fmt: skip

    assert fields(record).latency_s == 3.5


def test_trace_id_wins_over_session_id():
    """A session holds several tasks; the trace is the task."""
    record = {"metadata": {"litellm_trace_id": "trace-a", "session_id": "sess-b"}}

    assert fields(record).task_id == "trace-a"


def test_header_from_the_logged_request():
    record = {"proxy_server_request": {"headers": {"X-Agent-Task-Id": "h-7"}}}

    assert fields(record).task_id == "h-7"
    assert fields({"headers": {"x-agent-task-id": "h-8"}}).task_id == "h-8"
    assert fields(record, header="") is None


def test_user_is_a_task_id_only_when_configured():
    """OpenAI's user names an end user, not a task."""
    record = {"user": "agent-run-41"}

    assert fields(record) is None
    assert fields(record, task_paths=("user",)).task_id == "agent-run-41"


def test_no_task_id_is_no_call_and_unknown_fields_stay_unknown():
    assert fields({"prompt_tokens": 10}) is None
    assert fields({"metadata": {"task_id": "t"}}) == CallFields("t", None, None, None, None)


def test_an_integer_task_id_is_read_as_text():
    assert fields({"metadata": {"task_id": 4417}}).task_id == "4417"


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"metadata": {"task_id": "t", "outcome": "maybe"}}, "outcome: ok, retry or error"),
        ({"metadata": {"task_id": "x" * 201}}, "task_id: at most 200 characters, got 201"),
        ({"metadata": {"task_id": "a\nb"}}, "task_id: no control characters"),
        ({"metadata": {"task_id": "a\u202eb"}}, "task_id: no control characters"),
        ({"metadata": {"task_id": ["t"]}}, "task_id: a string"),
        ({"metadata": {"task_id": True}}, "task_id: a string"),
        ({"task_id": "t", "latency_s": -1}, "latency_s: 0 to 86,400 seconds, got -1"),
        ({"task_id": "t", "latency_s": "2"}, "latency_s: a number"),
        ({"task_id": "t", "startTime": "yesterday", "endTime": 5}, "startTime: epoch seconds"),
        ({"task_id": "t", "startTime": "2026-12-01T10:00:00", "endTime": 5}, "startTime: epoch"),
        ({"task_id": "t", "call_index": -2}, "call_index: a whole number from 0 to 100,000"),
        ({"task_id": "t", "tool_return_tokens": 1.5}, "tool_return_tokens: a whole number"),
    ],
)
def test_unreadable_fields_name_themselves(record, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        fields(record)
