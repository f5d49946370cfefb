"""Filters of the audit trail's API: ``object_type``, ``object_id``, ``action`` (exact)."""

from __future__ import annotations

import django_filters as filters

from pools.audit.models import AuditEvent


class AuditEventFilterSet(filters.FilterSet):
    object_type = filters.CharFilter()
    object_id = filters.CharFilter()
    action = filters.CharFilter()

    class Meta:
        model = AuditEvent
        fields = ["object_type", "object_id", "action"]
