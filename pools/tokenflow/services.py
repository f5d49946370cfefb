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
from datetime import datetime, timedelta, tzinfo

from django.conf import settings
from django.db import connection, transaction

from pools.tokenflow.flow import DAY_SUMS, CallRow, DayKey, TaskTotals, fold_calls, fold_days
from pools.tokenflow.models import AgentCall, AgentTask, AgentTaskDay

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
    """The ``(team_id, source_key)`` pairs of ``calls`` already stored. PostgreSQL: one query
    with two array parameters (a 50,000-key ``IN`` list costs more to send than to run)."""
    keys = sorted({c.source_key for c in calls})
    teams = sorted({c.team_id for c in calls})
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT team_id, source_key FROM {AgentCall._meta.db_table}"
                " WHERE team_id = ANY(%s) AND source_key = ANY(%s)",
                [teams, keys],
            )
            return set(cursor.fetchall())
    known: set[tuple[int, str]] = set()
    for offset in range(0, len(keys), CHUNK):
        known.update(
            AgentCall.objects.filter(
                team_id__in=teams, source_key__in=keys[offset : offset + CHUNK]
            ).values_list("team_id", "source_key")
        )
    return known


def _copy(model, columns: tuple[str, ...], rows) -> None:
    """PostgreSQL's COPY of ``rows`` (sequences in ``columns`` order) into ``model``'s table."""
    sql = f"COPY {model._meta.db_table} ({', '.join(columns)}) FROM STDIN"
    with connection.cursor() as cursor, cursor.copy(sql) as copy:
        for row in rows:
            copy.write_row(row)


def _insert(calls: list[CallRow]) -> None:
    """INSERT the calls: PostgreSQL's COPY (a million rows in seconds), else ``bulk_create``."""
    if connection.vendor == "postgresql":
        _copy(AgentCall, CALL_COLUMNS, map(_row, calls))
        return
    AgentCall.objects.bulk_create(
        [AgentCall(**{n: _value(call, n) for n in CALL_COLUMNS}) for call in calls],
        batch_size=CHUNK,
    )


def _row(c: CallRow) -> tuple:
    """The call in :data:`CALL_COLUMNS` order."""
    return (c.team_id, c.served_model, c.task_id, c.source_key, c.call_index, c.called_at,
            c.input_tokens, c.cached_tokens, c.output_tokens, c.tool_return_tokens,
            c.outcome or "", c.latency_s, c.replayed)  # fmt: skip


def _value(call: CallRow, column: str):
    if column == "outcome":
        return call.outcome or ""
    return getattr(call, column)


def _existing_tasks(keys: set[tuple[int, str, str]]) -> dict[tuple[int, str, str], AgentTask]:
    teams = sorted({k[0] for k in keys})
    models = sorted({k[1] for k in keys})
    ids = sorted({k[2] for k in keys})
    if connection.vendor == "postgresql":
        found = AgentTask.objects.raw(
            f"SELECT * FROM {AgentTask._meta.db_table} WHERE team_id = ANY(%s)"
            " AND served_model = ANY(%s) AND task_id = ANY(%s)",
            [teams, models, ids],
        )
    else:
        found = [
            task
            for offset in range(0, len(ids), CHUNK)
            for task in AgentTask.objects.filter(
                team_id__in=teams, served_model__in=models, task_id__in=ids[offset : offset + CHUNK]
            )
        ]
    out = {}
    for task in found:
        key = (task.team_id, task.served_model, task.task_id)
        if key in keys:
            out[key] = task
    return out


def _create_tasks(totals: dict[tuple[int, str, str], TaskTotals]) -> None:
    names = TaskTotals.names()
    if connection.vendor == "postgresql":
        rows = ([*key, *(getattr(t, n) for n in names)] for key, t in totals.items())
        _copy(AgentTask, ("team_id", "served_model", "task_id", *names), rows)
        return
    AgentTask.objects.bulk_create(
        [AgentTask(team_id=k[0], served_model=k[1], task_id=k[2], **vars(t))
         for k, t in totals.items()],
        batch_size=CHUNK,
    )  # fmt: skip


def _days_add(changes: dict[DayKey, dict[str, float]]) -> None:
    """Add ``changes`` to the per-day rollup in one upsert per 500 keys (``ON CONFLICT … DO
    UPDATE SET column = column + excluded.column``, the same SQL in PostgreSQL and SQLite), then
    delete the rows of the changed teams left with no task."""
    table = AgentTaskDay._meta.db_table
    keys = ("team_id", "served_model", "day", "task_calls")
    columns = (*keys, *DAY_SUMS)
    updates = ", ".join(f"{c} = {table}.{c} + excluded.{c}" for c in DAY_SUMS)
    items = list(changes.items())
    with connection.cursor() as cursor:
        for offset in range(0, len(items), 500):
            chunk = items[offset : offset + 500]
            values = ", ".join(["(" + ", ".join(["%s"] * len(columns)) + ")"] * len(chunk))
            cursor.execute(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES {values}"
                f" ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {updates}",
                [v for key, row in chunk for v in (*key, *(row[c] for c in DAY_SUMS))],
            )
    teams = {key[0] for key in changes}
    AgentTaskDay.objects.filter(team_id__in=teams, tasks=0).delete()


@transaction.atomic
def record_calls(*, calls: list[CallRow], zone: tzinfo) -> RecordResult:
    """Store the calls not stored before (by team and ``source_key``; the first of a key
    within the batch wins), add them to their tasks' totals and keep the per-day rollup
    (:class:`~pools.tokenflow.models.AgentTaskDay`, days in ``zone``: the billing time zone)
    equal to the tasks, in one transaction under the token-flow lock (module docstring).
    Queries: a constant number per 5,000 calls."""
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
    updated, changes = [], []
    for key, task in existing.items():
        merged = TaskTotals(**{n: getattr(task, n) for n in names})
        changes.append((key, TaskTotals(**{n: getattr(task, n) for n in names}), -1))
        merged.add(totals[key])
        changes.append((key, merged, 1))
        for name in names:
            setattr(task, name, getattr(merged, name))
        updated.append(task)
    created = {k: t for k, t in totals.items() if k not in existing}
    changes.extend((key, t, 1) for key, t in created.items())
    _create_tasks(created)
    AgentTask.objects.bulk_update(updated, names, batch_size=500)
    _days_add(fold_days(changes, zone))
    return RecordResult(len(fresh), len(calls) - len(fresh), len(created), len(updated))


def tokenflow_prune(*, now: datetime) -> int:
    """Delete calls older than ``settings.TOKENFLOW_CALL_RETENTION_DAYS`` days before ``now``;
    their tasks keep every total (the summary was written with them). Returns the number
    deleted."""
    cutoff = now - timedelta(days=settings.TOKENFLOW_CALL_RETENTION_DAYS)
    deleted, _ = AgentCall.objects.filter(called_at__lt=cutoff).delete()
    return deleted
