"""Writing token flow: the calls of a gateway batch and their tasks' totals
(:func:`record_calls`, called by billing's token import), and removing calls past their
retention (:func:`tokenflow_prune`, the daily beat task).

Locking: one PostgreSQL advisory lock, ``hashtext('tokenflow-calls')``, held for the
transaction, so two batches (two gateway workers, one batch posted twice at once) write one
after the other: the second sees the first one's calls as known and adds nothing to the tasks
(the unique ``(team, source_key)`` key would refuse a duplicate call anyway, but the task totals
must not count it twice). The other advisory locks (``gpu-catalogue``, billing's
``usage-import:*`` and ``statements-close:*``) are never taken inside this one. SQLite (the demo)
locks the whole database for a write transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction

from pools.tokenflow.flow import CallRow, TaskTotals, fold_calls
from pools.tokenflow.models import AgentCall, AgentTask

CHUNK = 5_000
CALL_COLUMNS = (
    "team_id", "served_model", "task_id", "source_key", "call_index", "called_at",
    "input_tokens", "cached_tokens", "output_tokens", "tool_return_tokens", "outcome",
    "latency_s", "replayed",
)  # fmt: skip


@dataclass(frozen=True)
class RecordResult:
    """Calls written, calls already known (same team and key), tasks created and updated."""

    calls: int
    duplicates: int
    tasks_created: int
    tasks_updated: int


def _lock() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext('tokenflow-calls'))")


def _known_keys(calls: list[CallRow]) -> set[tuple[int, str]]:
    keys = sorted({c.source_key for c in calls})
    teams = {c.team_id for c in calls}
    known: set[tuple[int, str]] = set()
    for offset in range(0, len(keys), CHUNK):
        known.update(
            AgentCall.objects.filter(
                team_id__in=teams, source_key__in=keys[offset : offset + CHUNK]
            ).values_list("team_id", "source_key")
        )
    return known


def _insert(calls: list[CallRow]) -> None:
    """INSERT the calls: PostgreSQL's COPY (a million rows in seconds), else ``bulk_create``."""
    if connection.vendor != "postgresql":
        AgentCall.objects.bulk_create(
            [AgentCall(**{c: _value(call, c) for c in CALL_COLUMNS}) for call in calls],
            batch_size=CHUNK,
        )
        return
    sql = f"COPY {AgentCall._meta.db_table} ({', '.join(CALL_COLUMNS)}) FROM STDIN"
    with connection.cursor() as cursor, cursor.copy(sql) as copy:
        for call in calls:
            copy.write_row([_value(call, c) for c in CALL_COLUMNS])


def _value(call: CallRow, column: str):
    if column == "outcome":
        return call.outcome or ""
    return getattr(call, column)


def _existing_tasks(keys: set[tuple[int, str, str]]) -> dict[tuple[int, str, str], AgentTask]:
    by_id = sorted({k[2] for k in keys})
    teams = {k[0] for k in keys}
    out = {}
    for offset in range(0, len(by_id), CHUNK):
        for task in AgentTask.objects.filter(
            team_id__in=teams, task_id__in=by_id[offset : offset + CHUNK]
        ):
            key = (task.team_id, task.served_model, task.task_id)
            if key in keys:
                out[key] = task
    return out


@transaction.atomic
def record_calls(*, calls: list[CallRow]) -> RecordResult:
    """Store the calls not stored before (by team and ``source_key``; the first of a key
    within the batch wins) and add them to their tasks' totals, in one transaction under the
    token-flow lock (module docstring). Queries: a constant number per 5,000 calls."""
    _lock()
    unique: dict[tuple[int, str], CallRow] = {}
    for call in calls:
        unique.setdefault((call.team_id, call.source_key), call)
    known = _known_keys(list(unique.values()))
    fresh = [c for key, c in unique.items() if key not in known]
    if not fresh:
        return RecordResult(0, len(calls), 0, 0)
    _insert(fresh)
    totals = fold_calls(fresh)
    existing = _existing_tasks(set(totals))
    names = TaskTotals.names()
    updated = []
    for key, task in existing.items():
        merged = TaskTotals(**{n: getattr(task, n) for n in names})
        merged.add(totals[key])
        for name in names:
            setattr(task, name, getattr(merged, name))
        updated.append(task)
    created = [
        AgentTask(team_id=k[0], served_model=k[1], task_id=k[2], **vars(t))
        for k, t in totals.items()
        if k not in existing
    ]
    AgentTask.objects.bulk_create(created, batch_size=CHUNK)
    AgentTask.objects.bulk_update(updated, names, batch_size=500)
    return RecordResult(len(fresh), len(calls) - len(fresh), len(created), len(updated))


def tokenflow_prune(*, now: datetime) -> int:
    """Delete calls older than ``settings.TOKENFLOW_CALL_RETENTION_DAYS`` days before ``now``;
    their tasks keep every total (the summary was written with them). Returns the number
    deleted."""
    cutoff = now - timedelta(days=settings.TOKENFLOW_CALL_RETENTION_DAYS)
    deleted, _ = AgentCall.objects.filter(called_at__lt=cutoff).delete()
    return deleted
