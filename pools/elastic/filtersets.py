"""Filters of the elastic API's scale events: ``policy``, ``allocation`` (its id, a whole number
from 1 to 2**63 - 1), ``action``, ``source``, ``reason`` and ``since`` (decided at or after,
ISO 8601)."""

from __future__ import annotations

import django_filters as filters
from django import forms
from drf_spectacular.utils import extend_schema_field

from pools.elastic.models import ScaleEvent

#: The largest id a 64-bit key holds (PostgreSQL bigint, SQLite INTEGER).
MAX_ID = 2**63 - 1


@extend_schema_field({"type": "integer", "minimum": 1, "maximum": MAX_ID})
class IdFilter(filters.NumberFilter):
    """A row's id: a whole number from 1 to :data:`MAX_ID`, anything else the filter's 400 (an
    id past SQLite's 64 bits was a 500; ``1.5`` matched id 1)."""

    field_class = forms.IntegerField

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(*args, **kwargs)


class ScaleEventFilterSet(filters.FilterSet):
    allocation = IdFilter(field_name="policy__allocation_id")
    since = filters.IsoDateTimeFilter(field_name="decided_at", lookup_expr="gte")

    class Meta:
        model = ScaleEvent
        fields = ["policy", "allocation", "action", "source", "reason", "since"]
