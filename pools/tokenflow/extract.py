"""What a gateway record says about the agent task it belongs to (pure: no Django).

A token record (``POST /api/v1/usage/tokens/``, :mod:`billing.services.tokens`) may carry, where
the gateway gives them:

- the **task id** — the portal's own ``task_id``, then the JSON paths of
  ``settings.TOKENFLOW_TASK_ID_PATHS`` in order (default :data:`DEFAULT_TASK_ID_PATHS`), then the
  header ``settings.TOKENFLOW_TASK_ID_HEADER`` among the logged request headers (``headers``, or
  LiteLLM's ``proxy_server_request.headers``). The first non-empty one wins. Sources of the
  default paths:

  * OpenAI chat completions / responses ``metadata``: up to 16 string pairs, keys up to 64
    characters, values up to 512 (OpenAI API reference, *Metadata*) — ``metadata.task_id``;
  * LiteLLM's StandardLoggingPayload ``trace_id`` ("trace multiple LLM calls belonging to same
    overall request", docs/proxy/logging_spec.md), passed by clients as
    ``metadata.litellm_trace_id``; its spend-log row's ``session_id`` (``LiteLLM_SpendLogs``
    in schema.prisma) and the request's ``litellm_session_id`` (docs/proxy/ui_logs_sessions);
    ``metadata.spend_logs_metadata`` / ``metadata.requester_metadata`` (StandardLoggingMetadata)
    for a ``task_id`` a client put there.

  OpenAI's ``user`` is *not* a default: it names an end user ("a stable identifier for your
  end-users", now replaced by ``safety_identifier`` and ``prompt_cache_key``), so every call of
  that user would read as one endless task. A site whose agents put a per-task id in ``user``
  adds ``"user"`` to the setting.
- the call's **outcome** — the paths of ``settings.TOKENFLOW_OUTCOME_PATHS`` (default
  :data:`DEFAULT_OUTCOME_PATHS`): ``ok``, ``retry`` (the call redoes a step an earlier call of
  the task already tried — a tool call with wrong arguments corrected, a re-generation: seed
  ``004`` §4.3's wasted calls) or ``error``; LiteLLM's ``status`` ``success`` / ``failure``
  (StandardLoggingPayloadStatus) read as ``ok`` / ``error``. Missing: unknown, never ``ok``.
- the **step latency** in seconds — ``latency_s``; LiteLLM's ``request_duration_ms``
  (LiteLLM_SpendLogs) / 1000; else ``endTime − startTime`` (epoch seconds as in the
  StandardLoggingPayload, or ISO 8601 as in the spend log). LiteLLM's ``response_time`` is not
  read: for a stream it is the time to the first token.
- ``call_index`` (the step number the agent gave, ``metadata.call_index`` too) and
  ``tool_return_tokens`` (tokens of tool results put into this call's prompt,
  ``metadata.tool_return_tokens`` too) — both optional, unknown when absent.

Errors are ``ValueError("<field>: <what is expected>")`` so the record is rejected by its index.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

DEFAULT_TASK_ID_PATHS = (
    "metadata.task_id",
    "metadata.trace_id",
    "metadata.litellm_trace_id",
    "trace_id",
    "metadata.spend_logs_metadata.task_id",
    "metadata.requester_metadata.task_id",
    "metadata.session_id",
    "metadata.litellm_session_id",
    "litellm_session_id",
    "session_id",
)
DEFAULT_TASK_ID_HEADER = "x-agent-task-id"
DEFAULT_OUTCOME_PATHS = ("outcome", "metadata.outcome", "metadata.spend_logs_metadata.outcome",
                         "status")  # fmt: skip
OUTCOMES = {"ok": "ok", "success": "ok", "retry": "retry", "error": "error", "failure": "error"}
# A task id is an id (a UUID is 36 characters, a W3C trace id 32): 200 leaves room for prefixes.
MAX_TASK_ID = 200
MAX_LATENCY_S = 86_400.0  # one call longer than a day is a gateway's clock bug
MAX_CALL_INDEX = 100_000
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@dataclass(frozen=True)
class CallFields:
    """The agent-task fields of one record; ``None`` where the record does not say."""

    task_id: str
    call_index: int | None
    outcome: str | None
    latency_s: float | None
    tool_return_tokens: int | None


@functools.lru_cache(maxsize=256)
def _parts(path: str) -> tuple[str, ...]:
    return tuple(path.split("."))


def read_path(record: dict, path: str) -> Any:
    """The value at the dotted ``path`` of ``record`` (``metadata.task_id``), or ``None``."""
    value: Any = record
    for part in _parts(path):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _header(record: dict, name: str) -> Any:
    """The logged request header ``name`` (case-insensitive) from ``headers`` or LiteLLM's
    ``proxy_server_request.headers``."""
    for headers in (record.get("headers"), read_path(record, "proxy_server_request.headers")):
        if isinstance(headers, dict):
            for key, value in headers.items():
                if isinstance(key, str) and key.lower() == name.lower():
                    return value
    return None


def _task_id_candidates(record: dict, paths: tuple[str, ...], header: str):
    """The places a task id may be, in order, each read only when those before it are empty
    (most records give ``metadata.task_id``, the first path)."""
    yield record.get("task_id")
    for path in paths:
        yield read_path(record, path)
    if header:
        yield _header(record, header)


def task_id_of(record: dict, *, paths: tuple[str, ...], header: str) -> str | None:
    """The record's task id (module docstring), or ``None`` when it names none."""
    for value in _task_id_candidates(record, paths, header):
        if value is None or value == "":
            continue
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise ValueError("task_id: a string (or an integer) of 1 to 200 characters")
        text = str(value)
        if len(text) > MAX_TASK_ID:
            raise ValueError(f"task_id: at most {MAX_TASK_ID} characters, got {len(text)}")
        if _UNPRINTABLE.search(text):
            raise ValueError("task_id: no control characters or bidirectional marks")
        return text
    return None


def outcome_of(record: dict, *, paths: tuple[str, ...]) -> str | None:
    """``ok``, ``retry``, ``error`` or ``None`` (unknown)."""
    for path in paths:
        value = read_path(record, path)
        if value is None or value == "":
            continue
        if not isinstance(value, str) or value.lower() not in OUTCOMES:
            raise ValueError("outcome: ok, retry or error (or LiteLLM's success / failure)")
        return OUTCOMES[value.lower()]
    return None


def _number(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name}: a number")
    return float(value)


def _instant(value: Any, name: str) -> float | None:
    """Epoch seconds from a number or an ISO 8601 string with an offset."""
    if value is None or isinstance(value, int | float) and not isinstance(value, bool):
        return _number(value, name)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return parsed.timestamp()
    raise ValueError(f"{name}: epoch seconds or ISO 8601 with an offset")


def latency_of(record: dict) -> float | None:
    """The call's wall time in seconds (module docstring), or ``None``."""
    latency = _number(record.get("latency_s"), "latency_s")
    if latency is None:
        millis = _number(record.get("request_duration_ms"), "request_duration_ms")
        latency = None if millis is None else millis / 1000
    if latency is None:
        start = _instant(record.get("startTime"), "startTime")
        end = _instant(record.get("endTime"), "endTime")
        latency = None if start is None or end is None else end - start
    if latency is not None and not 0 <= latency <= MAX_LATENCY_S:
        raise ValueError(f"latency_s: 0 to {MAX_LATENCY_S:,.0f} seconds, got {latency:g}")
    return latency


def _count(record: dict, name: str, limit: int) -> int | None:
    value = record.get(name)
    if value is None:
        value = read_path(record, f"metadata.{name}")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise ValueError(f"{name}: a whole number from 0 to {limit:,}")
    return value


def call_fields(
    record: dict, *, task_paths: tuple[str, ...], header: str, outcome_paths: tuple[str, ...],
    max_tokens: int,
) -> CallFields | None:  # fmt: skip
    """The record's agent-task fields, or ``None`` when it names no task (it is then billed as
    before and not part of any task's flow). Raises ``ValueError`` naming the field."""
    task_id = task_id_of(record, paths=task_paths, header=header)
    if task_id is None:
        return None
    return CallFields(
        task_id=task_id,
        call_index=_count(record, "call_index", MAX_CALL_INDEX),
        outcome=outcome_of(record, paths=outcome_paths),
        latency_s=latency_of(record),
        tool_return_tokens=_count(record, "tool_return_tokens", max_tokens),
    )
