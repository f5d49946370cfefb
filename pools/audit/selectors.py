"""Read side of the audit trail: the events a user may see, and the trail of one object."""

from __future__ import annotations

from django.db.models import QuerySet

from pools.audit.models import AuditEvent


def object_audit_trail(*, obj) -> QuerySet[AuditEvent]:
    """Events of one object, oldest first."""
    return (
        AuditEvent.objects.filter(object_type=obj._meta.label_lower, object_id=str(obj.pk))
        .select_related("actor")
        .order_by("created_at", "id")
    )


def audit_event_list(*, user) -> QuerySet[AuditEvent]:
    """Audit events the user may see: all for pool admins; for others, the events of the
    requests and allocations of their teams (subqueries, not lists of every id they may see:
    the database keeps to one page of the newest events)."""
    return AuditEvent.objects.select_related("actor").visible_to(user)
