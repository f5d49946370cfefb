"""Token usage posted by an inference gateway: ``POST /api/v1/usage/tokens/``.

A batch is a list of records, each with its own idempotency key; a key seen before is a
duplicate and changes nothing (the unique ``(source, source_id)`` key, inserted with
``ON CONFLICT DO NOTHING``, also settles two concurrent posts of the same batch). Valid records
are kept even when others in the batch are rejected; the answer lists the rejected ones.

C29: ``prompt_tokens`` includes ``cached_tokens`` (OpenAI usage object); see
:func:`billing.pricing.split_prompt_tokens`.

What gateways really send (issue 18):

- usage as flat fields, as an OpenAI ``usage`` object (``prompt_tokens``,
  ``completion_tokens``, ``prompt_tokens_details.cached_tokens``), or as the streamed
  ``chunks``. A stream carries usage only in its final chunk (``stream_options.include_usage``)
  or, with vLLM's ``continuous_usage_stats``, a running total in every chunk; either way the
  last chunk with usage is the request's total, billed once (summing them would bill a
  16-token prompt three times over: vllm-project/vllm#7262);
- a request whose stream or body has no usage at all (vLLM without ``stream_options``,
  vllm-project/vllm#7299) is recorded as one *unmetered request* (unit
  ``unmetered-requests``), so it is counted and shown, never stored as 0 tokens;
- a response replayed by the gateway's cache (``cache_hit: true``; LiteLLM logs the original
  usage again on a cache hit, BerriAI/litellm#39057) is recorded under basis ``replayed``: no
  GPU computed it, and the rate card says whether it is charged and counts toward quotas.

A record that names its agent task (a task id in ``metadata``, LiteLLM's trace or session
fields, a configured path or header: :mod:`pools.tokenflow.extract`) is also kept as one call of
that task (:func:`pools.tokenflow.services.record_calls`, idempotent by team and key), with its
outcome, step latency and tool-return tokens when given; an unreadable one of those fields
rejects the record like any other field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, datetime, tzinfo
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from billing.choices import ChargeBasis, UsageSource, UsageUnit
from billing.conf import billing_zone
from billing.locks import billing_lock, usage_source_lock_name
from billing.models import UsageRecord
from billing.pricing import TokenSplit, month_of, split_prompt_tokens
from billing.services.versions import usage_months_changed
from pools.common.validators import (
    BIDI_CONTROLS,
    CONTROL_CHARACTERS,
    DATE_RANGE_MESSAGE,
    date_in_range,
)
from pools.tenancy.models import Team
from pools.tokenflow.extract import CallFields, call_fields
from pools.tokenflow.flow import CallRow
from pools.tokenflow.services import record_calls

MAX_BATCH = 50_000
# Most tokens one record (one request) may carry in each of its counts: 10 x the longest context
# window offered today (Llama 4 Scout: 10M tokens, Meta's model card). A larger count is a
# gateway's bug, and would not fit UsageRecord.quantity's 18 integer digits much further on.
MAX_TOKENS_PER_RECORD = 100_000_000


@dataclass
class TokenIngestResult:
    accepted: int = 0
    duplicates: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)


def _timestamp(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        parsed = parse_datetime(value)
    else:
        return None
    return parsed if parsed is not None and timezone.is_aware(parsed) else None


class _Unmetered(Exception):
    """The record says nothing about tokens: count the request, not 0 tokens."""


def _usage_split(raw: dict[str, Any]) -> TokenSplit:
    """The record's tokens from its ``chunks``, ``usage`` object or flat fields.

    Raises :class:`_Unmetered` when no usage is given and ``ValueError`` (with the field) when
    what is given cannot be read.
    """
    if "chunks" in raw:
        chunks = raw["chunks"]
        if not isinstance(chunks, list):
            raise ValueError("chunks: a list of streamed chunks")
        found = [c.get("usage") for c in chunks if isinstance(c, dict) and c.get("usage")]
        if not found:
            raise _Unmetered
        usage = found[-1]  # the final total; earlier ones are running totals or repeats
    elif "usage" in raw:
        usage = raw["usage"]
        if usage is None:
            raise _Unmetered
    elif "prompt_tokens" in raw or "completion_tokens" in raw:
        usage = raw
    else:
        raise _Unmetered
    if not isinstance(usage, dict):
        raise ValueError("usage: an object with prompt_tokens and completion_tokens")
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if cached is None:
        cached = usage.get("cached_tokens", 0)
    return split_prompt_tokens(
        usage.get("prompt_tokens"), usage.get("completion_tokens"), cached or 0
    )


def _too_many_tokens(split: TokenSplit | None) -> str | None:
    """The record's error when a count is over :data:`MAX_TOKENS_PER_RECORD`, else None."""
    if split is None:
        return None
    for name, count in (
        ("prompt_tokens", split.uncached_input + split.cached_input),
        ("completion_tokens", split.output),
    ):
        if count > MAX_TOKENS_PER_RECORD:
            return f"{name}: at most {MAX_TOKENS_PER_RECORD:,} tokens a record, got {count:,}"
    return None


def _task_settings() -> dict[str, Any]:
    """:func:`~pools.tokenflow.extract.call_fields`' keyword arguments from the settings, read
    once a batch."""
    return {
        "task_paths": tuple(settings.TOKENFLOW_TASK_ID_PATHS),
        "header": settings.TOKENFLOW_TASK_ID_HEADER,
        "outcome_paths": tuple(settings.TOKENFLOW_OUTCOME_PATHS),
        "max_tokens": MAX_TOKENS_PER_RECORD,
    }


def _call_row(key: str, team_id: int, served: str, at: datetime, split: TokenSplit | None,
              replayed: bool, task: CallFields) -> CallRow:  # fmt: skip
    return CallRow(
        team_id=team_id, served_model=served, task_id=task.task_id, source_key=key,
        called_at=at, replayed=replayed, call_index=task.call_index, outcome=task.outcome,
        latency_s=task.latency_s, tool_return_tokens=task.tool_return_tokens,
        input_tokens=None if split is None else split.uncached_input + split.cached_input,
        cached_tokens=None if split is None else split.cached_input,
        output_tokens=None if split is None else split.output,
    )  # fmt: skip


def usage_tokens_ingest(
    *, records: list[dict[str, Any]], teams: set[int] | None = None
) -> TokenIngestResult:  # noqa: E501
    """Store a batch of token records. Each record: ``idempotency_key``, ``team`` (slug),
    ``served_model``, ``timestamp`` (ISO 8601 with offset), the usage as ``prompt_tokens``,
    ``completion_tokens`` and optional ``cached_tokens``, or as an OpenAI ``usage`` object, or
    as the streamed ``chunks`` (see the module docstring), and optional ``cache_hit`` (bool:
    replayed by the gateway's cache). ``teams`` limits which team ids may be charged.

    Steps: read every record (:func:`_read_records`: rejected ones and repeats within the batch
    counted), insert the usage rows not stored yet (:func:`_insert_new`), count the records
    stored before as duplicates, then hand the agent-task calls to token flow. A batch over
    :data:`MAX_BATCH` records is refused whole (one rejection, ``index`` ``None``).
    """
    result = TokenIngestResult()
    if len(records) > MAX_BATCH:
        result.rejected.append({"index": None, "error": f"at most {MAX_BATCH} records a batch"})
        return result
    team_ids = dict(Team.objects.values_list("slug", "id"))
    zone, now, task_settings = billing_zone(), timezone.now(), _task_settings()
    rows, calls, seen = _read_records(
        records, result, team_ids=team_ids, teams=teams, zone=zone, task_settings=task_settings
    )
    known = _insert_new(rows, now=now)
    known_records = {sid.rsplit(":", 1)[0] for sid in known}
    result.duplicates += len(known_records)
    result.accepted = len(seen) - len(known_records)
    if calls:
        record_calls(calls=calls, zone=zone)
    return result


def _read_records(
    records: list[dict[str, Any]],
    result: TokenIngestResult,
    *,
    team_ids: dict[str, int],
    teams: set[int] | None,
    zone: tzinfo,
    task_settings: dict[str, Any],
) -> tuple[list[tuple], list[CallRow], set[str]]:
    """``(usage rows, agent-task calls, idempotency keys)`` of the batch's valid records, first
    of each key only: the rows as :func:`_usage_rows` makes them (:data:`ROW_COLUMNS`), months
    in ``zone``; ``team_ids`` maps every team's slug to its id, ``teams`` as for
    :func:`usage_tokens_ingest`, ``task_settings`` from :func:`_task_settings`. Adds each
    invalid record to ``result.rejected`` (``index``, ``idempotency_key``, ``error``) and
    counts a key seen earlier in the batch in ``result.duplicates``; nothing is written."""
    rows: list[tuple] = []
    calls: list[CallRow] = []
    seen: set[str] = set()
    for index, raw in enumerate(records):
        if not isinstance(raw, dict):
            result.rejected.append({"index": index, "error": "not an object"})
            continue
        key = raw.get("idempotency_key")
        team_id = team_ids.get(raw.get("team"))
        served = raw.get("served_model")
        at = _timestamp(raw.get("timestamp"))
        error = _field_error(raw, key=key, team_id=team_id, served=served, at=at, teams=teams)
        split = task = None
        if not error:
            split, task, error = _usage_and_task(raw, task_settings)
        if error:
            result.rejected.append({"index": index, "idempotency_key": key, "error": error})
            continue
        if key in seen:
            result.duplicates += 1
            continue
        seen.add(key)
        if task is not None:
            calls.append(_call_row(key, team_id, served, at, split, bool(raw.get("cache_hit")),
                                   task))  # fmt: skip
        rows.extend(_usage_rows(raw, key=key, team_id=team_id, served=served, at=at,
                                split=split, month=month_of(at, zone)))  # fmt: skip
    return rows, calls, seen


def _field_error(
    raw: dict[str, Any],
    *,
    key: Any,
    team_id: int | None,
    served: Any,
    at: datetime | None,
    teams: set[int] | None,
) -> str | None:
    """The first field of a token record that is wrong, as ``"<field>: <what it must be>"``,
    or ``None``."""
    if not isinstance(key, str) or not 0 < len(key) <= 150:
        return "idempotency_key: a string of 1 to 150 characters"
    if "\x00" in key:  # PostgreSQL stores no NUL in text; any other character is kept as sent
        return "idempotency_key: no NUL character"
    if team_id is None or (teams is not None and team_id not in teams):
        return f"team: unknown team {raw.get('team')!r}"
    if not isinstance(served, str) or not 0 < len(served) <= 120:
        return "served_model: a string of 1 to 120 characters"
    if CONTROL_CHARACTERS.search(served) or BIDI_CONTROLS.search(served):
        # shown on statements and their PDF: one line, read left to right
        return "served_model: no control characters or bidirectional marks"
    if at is None:
        return "timestamp: ISO 8601 with an offset"
    if not date_in_range(at):
        return f"timestamp: {DATE_RANGE_MESSAGE}"
    if not isinstance(raw.get("cache_hit", False), bool):
        return "cache_hit: true or false"
    return None


def _usage_and_task(
    raw: dict[str, Any], task_settings: dict[str, Any]
) -> tuple[TokenSplit | None, CallFields | None, str | None]:
    """``(token split or None when unmetered, agent task fields or None, error or None)``;
    ``task_settings`` from :func:`_task_settings`."""
    split: TokenSplit | None = None
    try:
        split = _usage_split(raw)
    except _Unmetered:
        split = None
    except ValueError as exc:
        return None, None, str(exc)
    error = _too_many_tokens(split)
    if error:
        return split, None, error
    try:
        task = call_fields(raw, **task_settings)
    except ValueError as exc:
        return split, None, str(exc)
    return split, task, None


def _usage_rows(
    raw: dict[str, Any],
    *,
    key: str,
    team_id: int,
    served: str,
    at: datetime,
    split: TokenSplit | None,
    month: date,
) -> list[tuple]:
    """The usage rows of one accepted record, as tuples in :data:`ROW_COLUMNS` order: uncached
    input, cached input and output tokens (one unmetered request when the usage is unknown),
    zero amounts left out; basis ``replayed`` for a cache hit, else ``tokens``; keyed
    ``<idempotency_key>:<unit>``; quantities are ints (whole tokens or requests). Tuples, not
    :class:`UsageRecord` instances: a model instance cost 30 µs of the record's ~100."""
    basis = ChargeBasis.REPLAYED if raw.get("cache_hit") else ChargeBasis.TOKENS
    if split is None:
        amounts = ((UsageUnit.UNMETERED_REQUESTS, 1),)
    else:
        amounts = (
            (UsageUnit.INPUT_TOKENS, split.uncached_input),
            (UsageUnit.CACHED_INPUT_TOKENS, split.cached_input),
            (UsageUnit.OUTPUT_TOKENS, split.output),
        )
    return [
        (team_id, served, amount, unit, basis, month, at, f"{key}:{unit}")
        for unit, amount in amounts
        if amount
    ]


# What one row of :func:`_usage_rows` holds, in order; the rest of a token record's columns are
# the same for the whole batch (:func:`_insert_new`).
ROW_COLUMNS = ("team_id", "served_model", "quantity", "unit", "basis", "month", "period_start",
               "source_id")  # fmt: skip
_SOURCE_ID = ROW_COLUMNS.index("source_id")


def _insert_new(rows: list[tuple], *, now: datetime) -> set[str]:
    """Insert the rows (:func:`_usage_rows`) whose ``source_id`` is not stored yet, created and
    updated at ``now``; answers the ids already stored.

    One batch at a time checks and inserts: two identical batches posted at once both found
    nothing known, both inserted (ON CONFLICT DO NOTHING kept the rows right) and both
    answered "accepted" for every record. The second now waits and counts duplicates. Every
    writer of token records (this function) holds that lock, so on PostgreSQL the fresh rows
    go in by ``COPY`` (a conflict there would raise, never happen); elsewhere
    ``bulk_create`` with conflicts ignored."""
    known: set[str] = set()
    key_list = list({r[_SOURCE_ID] for r in rows})
    with transaction.atomic():
        billing_lock(usage_source_lock_name(UsageSource.TOKEN_API))
        if connection.vendor == "postgresql":
            known = _known_source_ids(key_list)
        else:
            for offset in range(0, len(key_list), 10_000):
                known.update(
                    UsageRecord.objects.filter(
                        source=UsageSource.TOKEN_API,
                        source_id__in=key_list[offset : offset + 10_000],
                    ).values_list("source_id", flat=True)
                )
        fresh = [r for r in rows if r[_SOURCE_ID] not in known]
        if connection.vendor == "postgresql":
            _copy_rows(fresh, now=now)
        else:
            UsageRecord.objects.bulk_create(
                [_record(r, now=now) for r in fresh], batch_size=5000, ignore_conflicts=True
            )
        usage_months_changed(pairs={(r[0], r[5]) for r in fresh})
    return known


def _known_source_ids(source_ids: list[str]) -> set[str]:
    """The token records' ``source_id`` of ``source_ids`` already stored, in one query (PostgreSQL).

    The ids travel as one JSON text: psycopg quotes one string in C, where a list parameter
    (an array) or an ``IN`` list is quoted element by element in Python (1.5 s of the 3.5 s a
    50,000-record batch took). Each id is then one probe of the unique ``(source, source_id)``
    index."""
    table = UsageRecord._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT source_id FROM {table} WHERE source = %s AND source_id IN "
            "(SELECT jsonb_array_elements_text(%s::jsonb))",
            [UsageSource.TOKEN_API, json.dumps(source_ids)],
        )
        return {sid for (sid,) in cursor.fetchall()}


def _copy_rows(rows: list[tuple], *, now: datetime) -> None:
    """``COPY`` the rows (:data:`ROW_COLUMNS`) into the usage table as token records."""
    columns = (*ROW_COLUMNS, "period_end", "source", "flag", "created_at", "updated_at")
    batch = (UsageSource.TOKEN_API, "", now, now)
    table = UsageRecord._meta.db_table
    with (
        connection.cursor() as cursor,
        cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy,
    ):
        for row in rows:
            copy.write_row((*row, row[6], *batch))


def _record(row: tuple, *, now: datetime) -> UsageRecord:
    team_id, served, amount, unit, basis, month, at, source_id = row
    return UsageRecord(
        team_id=team_id,
        served_model=served,
        quantity=Decimal(amount),
        unit=unit,
        basis=basis,
        month=month,
        period_start=at,
        period_end=at,
        source=UsageSource.TOKEN_API,
        source_id=source_id,
        created_at=now,
        updated_at=now,
    )
