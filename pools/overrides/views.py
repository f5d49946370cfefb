"""Temporary overrides pages (issue 32 item 2): ``/overrides/`` lists them (filters, CSV; a
member sees their teams'), pool admins make one on ``/overrides/new/`` and end one early with
``POST /overrides/<id>/cancel/`` (the button asks first). The service decides; its field
errors go next to the fields with nothing written."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from pools.common.errors import DomainError
from pools.overrides import selectors
from pools.overrides.filtersets import OverrideFilterSet
from pools.overrides.forms import OverrideForm
from pools.overrides.models import OverrideKind
from pools.overrides.services import override_cancel, override_create
from pools.tenancy.permissions import may_administer_pools
from pools.web.pages import Column, filtered_list, form_add_domain_errors, pool_admin_required

OVERRIDE_COLUMNS = [
    Column("id", lambda o: o.pk),
    Column("team", lambda o: o.team.slug),
    Column("pool", lambda o: o.pool.slug),
    Column("kind", lambda o: o.kind),
    Column("gpu_model", lambda o: o.gpu_model.slug if o.gpu_model_id else None),
    Column("cards_before", lambda o: o.cards_before),
    Column("cards", lambda o: o.cards),
    Column("class_before", lambda o: o.class_before.slug if o.class_before_id else None),
    Column("workload_class", lambda o: o.workload_class.slug if o.workload_class_id else None),
    Column("created_at", lambda o: o.created_at.isoformat()),
    Column("until", lambda o: o.until.isoformat()),
    Column("status", lambda o: o.status),
    Column("ended_at", lambda o: o.ended_at.isoformat() if o.ended_at else None),
    Column("created_by", lambda o: o.created_by.username if o.created_by_id else None),
    Column("reason", lambda o: o.reason),
]


@login_required
def override_list(request):
    return filtered_list(
        request,
        queryset=selectors.override_list(user=request.user),
        filterset_class=OverrideFilterSet,
        template="pools/overrides/override_list.html",
        columns=OVERRIDE_COLUMNS,
        filename="overrides.csv",
        default_ordering=("-created_at", "-pk"),
        extra={
            "now": timezone.now(),
            "can_edit": may_administer_pools(request.user),
            "time_zone": timezone.get_current_timezone_name(),
        },
    )


@pool_admin_required
def override_new(request):
    form = OverrideForm(request.POST or None, initial=request.GET.dict() or None)
    if request.method == "POST" and form.is_valid():
        try:
            override = override_create(actor=request.user, **form.cleaned_data)
        except DomainError as exc:
            form_add_domain_errors(form, exc)
        else:
            until = timezone.localtime(override.until)
            messages.success(
                request, f"Raised until {until:%Y-%m-%d %H:%M %Z}: {_named(override)}."
            )
            return redirect(f"{reverse('pools:override-list')}?team={override.team.slug}")
    return render(request, "pools/overrides/override_form.html", {"form": form})


@pool_admin_required
@require_POST
def override_cancel_page(request, pk: int):
    override = get_object_or_404(selectors.override_list(user=request.user), pk=pk)
    try:
        override_cancel(override=override, actor=request.user, reason="cancelled on the page")
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Ended now: {_named(override)}; {_goes_back(override)}.")
    # back to the list as it was filtered: the query string only, the path is ours
    filters = QueryDict(request.POST.get("filters", "")).urlencode()
    return redirect(reverse("pools:override-list") + (f"?{filters}" if filters else ""))


def _named(override) -> str:
    """``Ceiling (card cap) of NLP in Inference → 12 × L40S`` (names, not slugs)."""
    if override.kind == OverrideKind.PRIORITY:
        raised = override.workload_class.name if override.workload_class_id else "?"
    else:
        raised = f"{override.cards} × {override.gpu_model.name if override.gpu_model_id else '?'}"
    kind = override.get_kind_display()
    return f"{kind} of {override.team.name} in {override.pool.name} → {raised}"


def _goes_back(override) -> str:
    """What the team has once the override ends: the figure its allocations give (the
    override's "from" was that figure when it was raised)."""
    if override.kind == OverrideKind.PRIORITY:
        before = override.class_before.name if override.class_before_id else "—"
        return f"its work runs as the class its allocations give again ({before} when raised)"
    before = "—" if override.cards_before is None else override.cards_before
    what = "card cap" if override.kind == OverrideKind.CEILING else "borrowing limit"
    return f"its {what} goes back to what its allocations give ({before} cards when raised)"
