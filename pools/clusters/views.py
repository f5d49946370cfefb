"""The clusters page: every cluster with what its last connection check found and its health
(last reconcile and imports, unrepaired drifts, errors in the last hour, credential expiry;
filters, pagination, CSV), and a pool admin's "check now"; pool admins' create, edit and
delete pages, through the same services (and audit events) as the API."""

from __future__ import annotations

import copy

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from pools.clusters import selectors
from pools.clusters.filtersets import ClusterFilterSet
from pools.clusters.forms import ClusterForm
from pools.clusters.models import Cluster
from pools.clusters.serializers import cluster_render
from pools.clusters.services import (
    cluster_check_request,
    cluster_create,
    cluster_delete,
    cluster_update,
)
from pools.common.choices import ClusterStatus
from pools.common.errors import ClusterInUse, DomainError
from pools.tenancy.permissions import may_see_cluster_details
from pools.web.pages import Column, filtered_list, form_add_domain_errors, pool_admin_required

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

# What a user who is not a pool admin sees (may_see_cluster_details): no paths, URLs, reasons.
MEMBER_CLUSTER_COLUMNS = [
    Column("slug", lambda c: c.slug),
    Column("name", lambda c: c.name),
    Column("kind", lambda c: c.kind),
    Column("site", lambda c: c.site),
    Column("provider", lambda c: c.provider),
    Column("status", lambda c: c.summary_status),
]


def cluster_list(request):
    """Every cluster: whole for pool admins, name, kind, site / provider and ok / degraded for
    everyone else (page and CSV alike). While a check is pending
    (:attr:`~pools.clusters.models.Cluster.check_pending`) the table asks for itself again
    every 3 s (htmx) and shows the result once the task has recorded it; every 30 s once each
    pending check has waited over a minute for a worker, which the page then says
    (:class:`~pools.clusters.selectors.PendingChecks`)."""
    details = may_see_cluster_details(request.user)
    return filtered_list(
        request,
        queryset=selectors.cluster_list(),
        filterset_class=ClusterFilterSet,
        template="pools/clusters/cluster_list.html",
        columns=CLUSTER_COLUMNS if details else MEMBER_CLUSTER_COLUMNS,
        filename="clusters.csv",
        default_ordering=("name", "pk"),
        extra={"details": details, "checks": selectors.cluster_checks_pending()},
    )


@pool_admin_required
@require_POST
def cluster_check_now(request, slug):
    """Queue a check of the cluster (no scheduler call here) and go back to the list, which
    shows *checking…* until the result lands; without a broker it has landed already."""
    cluster = cluster_check_request(cluster=get_object_or_404(Cluster, slug=slug))
    if cluster.check_pending:
        messages.info(request, f"Checking {cluster.name}'s connection; the list shows the result.")
    elif cluster.is_down:
        messages.warning(request, f"{cluster.name} is unreachable: {cluster.status_reason}")
    elif cluster.status == ClusterStatus.UNKNOWN:  # an environment cluster with no connection
        messages.info(request, f"{cluster.name}: {cluster.status_reason}.")
    else:
        messages.success(request, f"{cluster.name} answered.")
    return redirect("pools:cluster-list")


@pool_admin_required
@require_http_methods(["GET", "POST"])
def cluster_edit(request, slug: str | None = None):
    """Create (no ``slug``) or edit a cluster. Saved whatever its connection does: the check
    queued on save (a create, a changed connection) says *unreachable* with the reason on the
    list, which shows *checking…* until then. A field the service refuses
    (a taken ClusterName or API URL, a kind change while it holds pools, fields that do not
    fit together) is that field's error; nothing is written then."""
    cluster = get_object_or_404(selectors.cluster_list(), slug=slug) if slug else None
    # the form writes into its instance: the service compares the changes with the original
    form = ClusterForm(request.POST or None, instance=copy.copy(cluster) if cluster else None)
    if request.method == "POST" and form.is_valid():
        try:
            if cluster is None:
                saved = cluster_create(
                    fields=form.editable_values(), actor=request.user, render=cluster_render
                )
            else:
                saved = cluster_update(
                    cluster=cluster,
                    changes=form.editable_values(),
                    actor=request.user,
                    before=cluster_render(cluster),
                    render=cluster_render,
                )
        except ClusterInUse as exc:  # raised on save only for a new kind of a cluster with pools
            form.add_error("kind", exc.message)
        except DomainError as exc:
            form_add_domain_errors(form, exc)
        else:
            _say_status(request, saved)
            return redirect("pools:cluster-list")
    return render(request, "pools/clusters/cluster_form.html", {"form": form, "cluster": cluster})


def _say_status(request, cluster: Cluster) -> None:
    if cluster.check_pending:
        messages.success(
            request, f"{cluster.name} saved; its connection is being checked (see the list)."
        )
    elif cluster.is_down:
        messages.warning(request, f"{cluster.name} saved, but unreachable: {cluster.status_reason}")
    else:
        messages.success(request, f"{cluster.name} saved.")


@pool_admin_required
@require_http_methods(["GET", "POST"])
def cluster_delete_page(request, slug: str):
    """Confirm (GET: the pools it holds, which refuse the delete), then delete (POST); a
    cluster that holds pools is refused (409) with them listed, nothing deleted."""
    cluster = get_object_or_404(selectors.cluster_list(), slug=slug)
    pools = list(cluster.pools.order_by("name").values_list("name", "slug"))
    error = ""
    if request.method == "POST":
        try:
            cluster_delete(cluster=cluster, actor=request.user, before=cluster_render(cluster))
        except ClusterInUse as exc:
            error = exc.message
            pools = list(cluster.pools.order_by("name").values_list("name", "slug"))
        else:
            messages.success(request, f"Cluster {cluster.name} deleted.")
            return redirect("pools:cluster-list")
    return render(
        request,
        "pools/clusters/cluster_delete.html",
        {"cluster": cluster, "pools": pools, "error": error},
        status=409 if error else 200,
    )
