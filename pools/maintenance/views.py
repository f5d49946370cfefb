"""Maintenance-window pages (issue 32 item 2): the list (everyone signed in; CSV), a new
window in two steps — the collision preview (which approved allocations lose how many cards,
per team), then confirm — the window's page, and cancel with a confirmation. Writes go through
:mod:`pools.maintenance.services.windows`; pool admins only."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from pools.capacity.forms import ReasonForm
from pools.common.errors import DomainError
from pools.maintenance.filtersets import MaintenanceWindowFilterSet
from pools.maintenance.forms import MaintenanceWaveForm, MaintenanceWindowForm
from pools.maintenance.models import MaintenanceStatus, MaintenanceWindow
from pools.maintenance.selectors import (
    WaveAsk,
    maintenance_collisions,
    maintenance_wave_plan,
    maintenance_window_list,
    scope_nodes,
    team_losses,
    window_away_cards,
)
from pools.maintenance.services.windows import (
    MaintenanceCollides,
    maintenance_waves_create,
    maintenance_window_cancel,
    maintenance_window_create,
    wave_ask_errors,
)
from pools.tenancy.permissions import may_administer_pools
from pools.web.pages import (
    Column,
    filtered_list,
    form_add_domain_errors,
    form_add_errors,
    pool_admin_required,
    whole_number,
)

MAINTENANCE_COLUMNS = [
    Column("window", lambda w: w.pk),
    Column("title", lambda w: w.title),
    Column("scope", lambda w: w.scope),
    Column("pool", lambda w: w.pool.slug if w.pool else None),
    Column("driver_branch", lambda w: w.driver_group.branch if w.driver_group else None),
    Column("nodes", lambda w: w.node_count),
    Column("starts_at", lambda w: w.starts_at.isoformat()),
    Column("ends_at", lambda w: w.ends_at.isoformat()),
    Column("status", lambda w: w.status),
    Column("wave", lambda w: w.wave or None),
    Column("wave_number", lambda w: w.wave_number),
]


def maintenance_list(request):
    return filtered_list(
        request,
        queryset=maintenance_window_list(user=request.user),
        filterset_class=MaintenanceWindowFilterSet,
        template="pools/maintenance/maintenance_list.html",
        columns=MAINTENANCE_COLUMNS,
        filename="maintenance-windows.csv",
        default_ordering=("-starts_at", "-pk"),
        extra={"may_plan": may_administer_pools(request.user)},
    )


def _acknowledged(request) -> list[int]:
    ids = (whole_number(v) for v in request.POST.getlist("acknowledged"))
    return [pk for pk in ids if pk is not None]


@pool_admin_required
@require_http_methods(["GET", "POST"])
def maintenance_new(request):
    """Step 1 (``preview``): the form is checked and the collisions listed, nothing written;
    step 2 (``confirm``): saved when every colliding allocation shown was acknowledged, else
    the preview again with what collides now."""
    form = MaintenanceWindowForm(request.POST or None)
    preview = None
    if request.method == "POST" and form.is_valid():
        fields = form.service_fields()
        if request.POST.get("step") == "confirm":
            try:
                window = maintenance_window_create(
                    actor=request.user, acknowledged=_acknowledged(request), **fields
                )
            except MaintenanceCollides as exc:
                preview = {"collisions": exc.data["collisions"], "teams": exc.data["teams"],
                           "changed": True}  # fmt: skip
            except DomainError as exc:
                form_add_domain_errors(form, exc)
            else:
                messages.success(request, f"Maintenance window #{window.pk} planned.")
                return redirect("pools:maintenance-detail", window.pk)
        if preview is None and not form.errors:
            nodes, errors = scope_nodes(
                scope=fields["scope"], pool=fields["pool"], driver_group=fields["driver_group"],
                hostnames=fields["hostnames"],
            )  # fmt: skip
            if fields["ends_at"] <= fields["starts_at"]:
                errors["ends_at"] = "After the start."
            form_add_errors(form, errors)
            if not errors:
                found = maintenance_collisions(
                    nodes=nodes, start=fields["starts_at"], end=fields["ends_at"]
                )
                preview = {
                    "collisions": [c.as_dict() for c in found],
                    "teams": team_losses(found),
                    "hostnames": [n.hostname for n in nodes],
                }
    return render(request, "pools/maintenance/maintenance_new.html",
                  {"form": form, "preview": preview})  # fmt: skip


@pool_admin_required
@require_http_methods(["GET", "POST"])
def maintenance_waves(request):
    """Plan a driver group's upgrade as waves: ``plan`` shows the waves (or why there is no
    plan), nothing written; ``save`` plans again under the pools' locks and saves them."""
    form = MaintenanceWaveForm(request.POST or None)
    plan = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        ask = WaveAsk(
            driver_group=data["driver_group"],
            pool=data["pool"],
            first_start=data["first_start"],
            length=timedelta(hours=data["window_hours"]),
            gap=timedelta(hours=data["gap_hours"]),
            per_wave=data["nodes_per_wave"],
            max_slots=data["max_waves"],
        )
        errors = wave_ask_errors(ask)
        form_add_errors(form, errors)
        if not errors and request.POST.get("step") == "save":
            try:
                windows = maintenance_waves_create(
                    actor=request.user, ask=ask, title=data["title"], reason=data["reason"]
                )
            except DomainError as exc:
                form_add_domain_errors(form, exc)
            else:
                messages.success(request, f"{len(windows)} upgrade waves planned.")
                return redirect(f"{reverse('pools:maintenance-list')}?wave={windows[0].wave}")
        if not form.errors:
            plan, _ = maintenance_wave_plan(ask)
    return render(request, "pools/maintenance/maintenance_waves.html",
                  {"form": form, "plan": plan})  # fmt: skip


def maintenance_detail(request, pk: int):
    window = get_object_or_404(
        MaintenanceWindow.objects.select_related("pool", "driver_group", "created_by"), pk=pk
    )
    siblings = (
        MaintenanceWindow.objects.filter(wave=window.wave).order_by("wave_number", "starts_at")
        if window.wave
        else []
    )
    return render(
        request,
        "pools/maintenance/maintenance_detail.html",
        {
            "window": window,
            "nodes": list(
                window.nodes.select_related("pool", "driver_group", "cluster").order_by("hostname")
            ),
            "away": window_away_cards(window),
            "siblings": siblings,
            "may_cancel": may_administer_pools(request.user)
            and window.status == MaintenanceStatus.PLANNED,
        },
    )


@pool_admin_required
@require_http_methods(["GET", "POST"])
def maintenance_cancel(request, pk: int):
    """GET: the confirmation; POST: cancel, back to the window's page."""
    window = get_object_or_404(MaintenanceWindow, pk=pk)
    form = ReasonForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            maintenance_window_cancel(
                window=window, actor=request.user, reason=form.cleaned_data["reason"]
            )
        except DomainError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, f"Maintenance window #{window.pk} cancelled.")
        return redirect("pools:maintenance-detail", window.pk)
    return render(request, "pools/maintenance/maintenance_cancel.html",
                  {"window": window, "form": form})  # fmt: skip
