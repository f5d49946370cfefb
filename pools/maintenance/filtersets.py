"""The FilterSet of maintenance windows: the page and the API filter through it."""

from __future__ import annotations

import django_filters as filters

from pools.inventory.models import Pool
from pools.maintenance.models import MaintenanceScope, MaintenanceStatus, MaintenanceWindow


class MaintenanceWindowFilterSet(filters.FilterSet):
    status = filters.ChoiceFilter(choices=MaintenanceStatus.choices, empty_label="Any")
    scope = filters.ChoiceFilter(choices=MaintenanceScope.choices, empty_label="Any")
    pool = filters.ModelChoiceFilter(
        queryset=Pool.objects.order_by("name"), to_field_name="slug", empty_label="Any"
    )
    ordering = filters.OrderingFilter(fields=(("starts_at", "starts"), ("ends_at", "ends")))

    class Meta:
        model = MaintenanceWindow
        fields = ["status", "scope", "pool", "wave"]
