"""The audit trail every app's services write: who changed what, when, from what to what, why."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.db import connection, models

from pools.audit.models import AuditEvent


def audit_snapshot(obj: Any, *names: str, as_text: bool = False, **paths: str) -> dict[str, Any]:
    """JSON-ready values of ``obj`` for an audit event's ``before``/``after``: the one helper
    every service uses.

    ``names`` are attributes read as they are; ``paths`` map a key to a dotted path through
    relations and dict keys (``pool="pool.slug"``, ``model="inputs.model"``), ``None`` when a
    step is ``None``. Decimals become strings (exact), datetimes and dates ISO 8601; with
    ``as_text`` every value that is not ``None`` becomes ``str(value)``.
    """

    def resolve(path: str) -> Any:
        value = obj
        for step in path.split("."):
            if value is None:
                return None
            value = value.get(step) if isinstance(value, dict) else getattr(value, step)
        return value

    def ready(value: Any) -> Any:
        if value is None:
            return None
        if as_text:
            return str(value)
        if isinstance(value, Decimal):
            return str(value)
        if isinstance(value, (datetime, date)):
            return value.isoformat()
        return value

    snapshot = {name: ready(resolve(name)) for name in names}
    snapshot.update({key: ready(resolve(path)) for key, path in paths.items()})
    return snapshot


def audit_event_build(
    *,
    actor: Any | None,
    action: str,
    obj: models.Model,
    before: dict | None = None,
    after: dict | None = None,
    reason: str = "",
    request_id: str = "",
) -> AuditEvent:
    """An unsaved audit event for ``obj``, for services that write many rows with bulk_create.

    Same fields as :func:`audit_event_record`; the caller saves it in its transaction.
    """
    user = actor if getattr(actor, "is_authenticated", False) else None
    return AuditEvent(
        actor=user,
        action=action,
        object_type=obj._meta.label_lower,
        object_id=str(obj.pk),
        object_repr=str(obj)[:255],
        before=before,
        after=after,
        reason=reason,
        request_id=request_id,
    )


def audit_event_record(
    *,
    actor: Any | None,
    action: str,
    obj: models.Model,
    before: dict | None = None,
    after: dict | None = None,
    reason: str = "",
    request_id: str = "",
) -> AuditEvent:
    """Write one audit event for ``obj`` inside the caller's transaction.

    ``actor`` is a user or ``None`` for the system (tasks, importers run from the shell);
    anonymous users are stored as ``None``. ``before``/``after`` are JSON-serialisable dicts of
    the fields that changed. Returns the saved :class:`AuditEvent`.
    """
    event = audit_event_build(
        actor=actor,
        action=action,
        obj=obj,
        before=before,
        after=after,
        reason=reason,
        request_id=request_id,
    )
    event.save()
    return event


# Every column but the id, in the model's order: the INSERT of audit_events_write.
_COLUMNS = [field for field in AuditEvent._meta.concrete_fields if not field.primary_key]
_INSERT = "INSERT INTO {table} ({columns}) VALUES ".format(
    table=AuditEvent._meta.db_table,
    columns=", ".join(connection.ops.quote_name(field.column) for field in _COLUMNS),
)
_ROW = "(" + ", ".join(["%s"] * len(_COLUMNS)) + ")"


def audit_events_write(events: list[AuditEvent]) -> None:
    """Write ``events`` (unsaved, from :func:`audit_event_build`) in one INSERT inside the
    caller's transaction, each value prepared by its field as ``save`` does (``created_at``
    stamped now); their ids are not read back. For the approval's hot path (issue #29 item 7:
    the ORM took longer to build the statement than PostgreSQL to run it)."""
    params = [
        field.get_db_prep_save(field.pre_save(event, True), connection)
        for event in events
        for field in _COLUMNS
    ]
    with connection.cursor() as cursor:
        cursor.execute(_INSERT + ", ".join([_ROW] * len(events)), params)
