"""FilterSets of requests and allocations: the pages, their CSV exports and the API filter
through these."""

from __future__ import annotations

import django_filters as filters

from pools.capacity.models import Allocation, CapacityRequest
from pools.common.choices import AllocationStatus, RequestKind, RequestStatus, WorkloadKind
from pools.inventory.models import GpuModel, Pool
from pools.web.api import visible_teams
from pools.web.pages import SlugNameChoiceFilter


class TeamPoolModelFilters(filters.FilterSet):
    """Team, pool and GPU model chosen by slug from a list; an unknown slug is a field error
    (400 in the API), not an empty result."""

    # a pool admin's list holds every team of the fleet: read as (slug, name) rows
    team = SlugNameChoiceFilter(
        queryset=visible_teams, to_field_name="slug", empty_label="Any", label="Team"
    )
    pool = filters.ModelChoiceFilter(
        queryset=Pool.objects.order_by("name"), to_field_name="slug", empty_label="Any"
    )
    gpu_model = filters.ModelChoiceFilter(
        queryset=GpuModel.objects.order_by("name"),
        to_field_name="slug",
        empty_label="Any",
        label="GPU model",
    )


class CapacityRequestFilterSet(TeamPoolModelFilters):
    # distinct=False: the status is the row's own column, so no join can repeat a row, and
    # DISTINCT over the joined columns made ?status= pages 30 ms slower (benchmarks/approvals.py).
    status = filters.MultipleChoiceFilter(choices=RequestStatus.choices, distinct=False)
    workload_kind = filters.ChoiceFilter(choices=WorkloadKind.choices)
    kind = filters.ChoiceFilter(choices=RequestKind.choices)
    ordering = filters.OrderingFilter(
        fields=(("created_at", "created"), ("starts_at", "starts"), ("card_count", "cards"))
    )

    class Meta:
        model = CapacityRequest
        fields = ["team", "pool", "gpu_model", "status", "workload_kind", "kind"]


class AllocationFilterSet(TeamPoolModelFilters):
    status = filters.MultipleChoiceFilter(choices=AllocationStatus.choices, distinct=False)
    ordering = filters.OrderingFilter(
        fields=(("starts_at", "starts"), ("ends_at", "ends"), ("card_count", "cards"))
    )

    class Meta:
        model = Allocation
        fields = ["team", "pool", "gpu_model", "status"]
