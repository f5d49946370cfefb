"""The clusters page: every cluster with what its last connection check found and its health
(last reconcile and imports, unrepaired drifts, errors in the last hour, credential expiry;
filters, pagination, CSV), and a pool admin's "check now"."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from pools.clusters import selectors
from pools.clusters.filtersets import ClusterFilterSet
from pools.clusters.models import Cluster
from pools.clusters.services import cluster_check
from pools.web import Column, filtered_list, pool_admin_required

CLUSTER_COLUMNS = [
    Column("slug", lambda c: c.slug),
    Column("name", lambda c: c.name),
    Column("kind", lambda c: c.kind),
    Column("api_url", lambda c: c.api_url),
    Column("slurm_cluster_name", lambda c: c.slurm_cluster_name),
    Column("credential_kind", lambda c: c.credential_kind),
    Column("site", lambda c: c.site),
    Column("provider", lambda c: c.provider),
    Column("retiring", lambda c: c.retiring),
    Column("status", lambda c: c.status),
    Column("status_reason", lambda c: c.status_reason),
    Column("api_version_served", lambda c: c.api_version_served),
    Column("checked_at", lambda c: c.checked_at),
    Column("reachable_at", lambda c: c.reachable_at),
    Column("class_qos_problem", lambda c: c.class_qos_problem),
    Column("reconciled_at", lambda c: c.reconciled_at),
    Column("inventory_imported_at", lambda c: c.inventory_imported_at),
    Column("usage_imported_at", lambda c: c.usage_imported_at),
    Column("credential_expires_at", lambda c: c.credential_expires_at),
    Column("unrepaired_drifts", lambda c: c.drift_count),
    Column("errors_last_hour", lambda c: c.errors_last_hour),
    Column("last_error", lambda c: c.last_error or ""),
    Column("pools", lambda c: c.pool_count),
]


def cluster_list(request):
    return filtered_list(
        request,
        queryset=selectors.cluster_list(),
        filterset_class=ClusterFilterSet,
        template="pools/clusters/cluster_list.html",
        columns=CLUSTER_COLUMNS,
        filename="clusters.csv",
        default_ordering=("name", "pk"),
    )


@pool_admin_required
@require_POST
def cluster_check_now(request, slug):
    cluster = cluster_check(cluster=get_object_or_404(Cluster, slug=slug))
    if cluster.is_down:
        messages.warning(request, f"{cluster.name} is unreachable: {cluster.status_reason}")
    else:
        messages.success(request, f"{cluster.name} answered.")
    return redirect("pools:cluster-list")
