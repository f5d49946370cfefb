"""One FilterSet per list: the clusters page, its htmx fragment, its CSV and the API."""

from __future__ import annotations

import django_filters as filters
from django.db.models import Q

from pools.clusters.models import CLUSTER_KINDS, SUMMARY_DEGRADED, SUMMARY_OK, Cluster
from pools.common.choices import ClusterStatus
from pools.tenancy.permissions import may_see_cluster_details

# What a member is shown of a cluster's state (Cluster.summary_status), and so filters by.
SUMMARY_CHOICES = [(SUMMARY_OK, "OK"), (SUMMARY_DEGRADED, "Degraded")]


class ClusterFilterSet(filters.FilterSet):
    """``status``: the last check's (pool admins) or the ``ok`` / ``degraded`` a member is
    shown, for everyone; a member's list offers and takes only those two, so a filter never
    sorts rows by a state the rows do not show (``unreachable`` gave one row reading
    *degraded*, ``unknown`` rows reading *ok*)."""

    kind = filters.ChoiceFilter(choices=[(k.value, k.label) for k in CLUSTER_KINDS])
    status = filters.ChoiceFilter(
        choices=[*ClusterStatus.choices, *SUMMARY_CHOICES], method="filter_status"
    )
    retiring = filters.ChoiceFilter(choices=[(True, "Yes"), (False, "No")], empty_label="Any")
    ordering = filters.OrderingFilter(
        fields=(("name", "name"), ("checked_at", "checked"), ("pool_count", "pools"))
    )

    class Meta:
        model = Cluster
        fields = ["kind", "status", "retiring"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not may_see_cluster_details(getattr(self.request, "user", None)):
            # a new filter, not the copied one's choices changed: its form field may already
            # be built (and copied) with every choice
            member = filters.ChoiceFilter(
                field_name="status", choices=SUMMARY_CHOICES, method="filter_status"
            )
            member.model, member.parent = self.queryset.model, self
            self.filters["status"] = member

    def filter_status(self, queryset, name, value):
        # degraded as Cluster.summary_status says it: unreachable at the last check, or an
        # error in the last hour (cluster_list's errors_last_hour)
        degraded = Q(status=ClusterStatus.UNREACHABLE) | Q(errors_last_hour__gt=0)
        if value == SUMMARY_DEGRADED:
            return queryset.filter(degraded)
        if value == SUMMARY_OK:
            return queryset.exclude(degraded)
        return queryset.filter(status=value)
