"""FilterSets of requests and allocations: the pages, their CSV exports and the API filter
through these."""

from __future__ import annotations

import django_filters as filters

from pools.capacity.models import Allocation, CapacityRequest
from pools.common.choices import AllocationStatus, RequestKind, RequestStatus, WorkloadKind
from pools.inventory.models import GpuModel, Pool
from pools.web.team_picker import VisibleTeamFilter


class TeamPoolModelFilters(filters.FilterSet):
    """Team (typed: a pool admin may see every team of the fleet, too many for a list), pool
    and GPU model chosen by slug; an unknown slug, or one of a team the user may not see, is a
    field error (400 in the API), not an empty result."""

    team = VisibleTeamFilter()
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


class TimelineFilterSet(filters.FilterSet):
    """The capacity timeline's one filter: ``team``, a slug among the teams the user may see
    (:class:`VisibleTeamFilter`; any other is a field error, the page a 400). Given the
    request. The timeline reads the chosen team from ``form.cleaned_data``: the sums are made
    by :func:`pools.capacity.selectors.timeline_holdings`, not by filtering this queryset."""

    team = VisibleTeamFilter(field_name="team")

    class Meta:
        model = Allocation
        fields = ["team"]
