"""One FilterSet per list: the clusters page, its htmx fragment and its CSV."""

from __future__ import annotations

import django_filters as filters

from pools.clusters.models import CLUSTER_KINDS, Cluster
from pools.common.choices import ClusterStatus


class ClusterFilterSet(filters.FilterSet):
    kind = filters.ChoiceFilter(choices=[(k.value, k.label) for k in CLUSTER_KINDS])
    status = filters.ChoiceFilter(choices=ClusterStatus.choices)
    retiring = filters.ChoiceFilter(choices=[(True, "Yes"), (False, "No")], empty_label="Any")
    ordering = filters.OrderingFilter(
        fields=(("name", "name"), ("checked_at", "checked"), ("pool_count", "pools"))
    )

    class Meta:
        model = Cluster
        fields = ["kind", "status", "retiring"]
