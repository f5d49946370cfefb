"""Filters of the elastic API's scale events: ``policy``, ``allocation``, ``action``, ``source``,
``reason`` and ``since`` (decided at or after, ISO 8601)."""

from __future__ import annotations

import django_filters as filters

from pools.elastic.models import ScaleEvent


class ScaleEventFilterSet(filters.FilterSet):
    allocation = filters.NumberFilter(field_name="policy__allocation_id")
    since = filters.IsoDateTimeFilter(field_name="decided_at", lookup_expr="gte")

    class Meta:
        model = ScaleEvent
        fields = ["policy", "allocation", "action", "source", "reason", "since"]
