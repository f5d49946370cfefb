"""Read side of the audit trail of one object (visibility of lists is capacity's: see
:func:`pools.capacity.selectors.audit_event_list`)."""

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
