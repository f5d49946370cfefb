"""The FilterSet of temporary overrides: the page, its CSV export and the API filter through it."""

from __future__ import annotations

import django_filters as filters

from pools.capacity.filtersets import TeamPoolModelFilters
from pools.overrides.models import OverrideKind, OverrideStatus, TemporaryOverride


class OverrideFilterSet(TeamPoolModelFilters):
    """Temporary overrides: the page, its CSV and the API."""

    kind = filters.ChoiceFilter(choices=OverrideKind.choices, empty_label="Any")
    status = filters.ChoiceFilter(choices=OverrideStatus.choices, empty_label="Any")

    class Meta:
        model = TemporaryOverride
        fields = ["team", "pool", "gpu_model", "kind", "status"]
