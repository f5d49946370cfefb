"""Read-side queries of clusters."""

from __future__ import annotations

from django.db.models import Count, QuerySet

from pools.clusters.models import Cluster


def cluster_list() -> QuerySet[Cluster]:
    """Every cluster with ``pool_count`` (its pools), by name; one query."""
    return Cluster.objects.annotate(pool_count=Count("pools")).order_by("name", "pk")
