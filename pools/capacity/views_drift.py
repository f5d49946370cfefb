"""The scheduler-drift page: what reconcile found different between the portal and the
schedulers, and a button to reconcile now."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from pools.capacity.models import SchedulerDrift
from pools.jobs import RECONCILE, enqueue
from pools.web.pages import Column, csv_response, pool_admin_required

DRIFT_COLUMNS = [
    Column("detected_at", lambda d: d.detected_at.isoformat()),
    Column("scheduler", lambda d: d.scheduler),
    Column("team", lambda d: d.team.slug if d.team else None),
    Column("subject", lambda d: d.subject),
    Column("expected", lambda d: d.expected),
    Column("found", lambda d: d.found),
    Column("repaired", lambda d: d.repaired),
    Column("detail", lambda d: d.detail),
]


@pool_admin_required
@require_http_methods(["GET", "POST"])
def scheduler_drift(request):
    """Drift found by reconcile (newest first), and a button to reconcile now."""
    if request.method == "POST":
        # Reconcile calls the schedulers: a task does it, never this request's thread.
        report = enqueue(RECONCILE)
        if report is None:
            messages.info(request, "Reconcile queued: differences appear here when it is done.")
        elif report["drifts"]:
            messages.warning(
                request,
                f"Reconciled: {report['drifts']} difference(s) found "
                f"and {report['repaired']} repaired.",
            )
        elif report["checked"] or report["nodes"]:
            messages.success(request, f"Reconciled: {report['checked']} cap(s) checked, no drift.")
        else:
            messages.info(request, "No scheduler connection is configured: nothing to reconcile.")
        if (report or {}).get("clusters_queued"):
            messages.info(
                request,
                f"{report['clusters_queued']} more cluster(s) are reconciled by their own "
                "tasks: their differences appear here when they are done.",
            )
        for error in (report or {}).get("errors", []):
            messages.error(request, error)
        return redirect("pools:scheduler-drift")
    rows = SchedulerDrift.objects.select_related("team")
    if request.GET.get("export") == "csv":
        return csv_response(rows.iterator(), DRIFT_COLUMNS, "scheduler-drift.csv")
    paginator = Paginator(rows, 50)
    return render(
        request,
        "pools/scheduler_drift.html",
        {
            "page": paginator.get_page(request.GET.get("page")),
            "configured": sorted(settings.SCHEDULERS),
        },
    )
