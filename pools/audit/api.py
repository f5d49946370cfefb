"""API of the audit trail (``/api/v1/audit-events/``): pool admins see every event, members the
events of their teams' requests and allocations; newest first, by cursor
(:class:`pools.web.api.NewestFirstCursorPagination`: no count of a trail that only grows)."""

from __future__ import annotations

from rest_framework import serializers, viewsets

from pools.audit import selectors
from pools.audit.filtersets import AuditEventFilterSet
from pools.audit.models import AuditEvent
from pools.web.api import NewestFirstCursorPagination


class AuditEventSerializer(serializers.ModelSerializer):
    actor = serializers.StringRelatedField(allow_null=True)  # None: the system (tasks, rules)

    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "created_at",
            "actor",
            "action",
            "object_type",
            "object_id",
            "object_repr",
            "before",
            "after",
            "reason",
            "request_id",
        ]


class AuditEventViewSet(viewsets.ReadOnlyModelViewSet):
    """Who changed what and when, newest first; filter by ``object_type`` and ``object_id``;
    pages by ``cursor`` (follow ``next``)."""

    queryset = AuditEvent.objects.none()  # for the schema; get_queryset scopes by user
    serializer_class = AuditEventSerializer
    filterset_class = AuditEventFilterSet
    pagination_class = NewestFirstCursorPagination

    def get_queryset(self):
        return selectors.audit_event_list(user=self.request.user).order_by("-created_at", "-id")
