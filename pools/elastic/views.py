"""Pages of elastic capacity: the team's elastic allocations with their live state, and one
allocation's policy editor with its what-if, scale history and chart."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from pools.capacity.services.requests import team_role
from pools.elastic import selectors
from pools.elastic.forms import ElasticPolicyForm
from pools.elastic.services import (
    elastic_hpa_yaml,
    elastic_policy_update,
    elastic_whatif,
    next_prescale,
)
from pools.errors import DomainError


def elastic_list(request):
    """Every elastic allocation the user may see: floor, ceiling, cards now, last decision."""
    policies = list(selectors.elastic_policy_list(user=request.user))
    return render(request, "pools/elastic/list.html", {"policies": policies})


def _can_edit(user, policy) -> bool:
    return user.is_staff or team_role(user=user, team=policy.allocation.team) == "manager"


@require_http_methods(["GET", "POST"])
def elastic_detail(request, pk: int):
    policy = selectors.elastic_policy_list(user=request.user).filter(pk=pk).first()
    if policy is None:
        raise Http404("No such elastic allocation.")
    can_edit = _can_edit(request.user, policy)
    form = ElasticPolicyForm(instance=policy)
    if request.method == "POST":
        if not can_edit:
            raise PermissionDenied("Only the team's managers and pool admins edit the policy.")
        form = ElasticPolicyForm(request.POST, instance=copy.copy(policy))
        if form.is_valid():
            try:
                elastic_policy_update(policy=policy, actor=request.user, **form.cleaned_data)
            except DomainError as exc:
                for field, message in (exc.data.get("errors") or {}).items():
                    form.add_error(field if field in form.fields else None, message)
                if not exc.data.get("errors"):
                    form.add_error(None, exc.message)
            else:
                messages.success(request, "Elastic policy saved.")
                return redirect("pools:elastic-detail", pk=policy.pk)
    whatif = None
    if request.GET.get("whatif"):
        days = request.GET.get("days", "7")
        days = int(days) if days.isdigit() and 1 <= int(days) <= 30 else 7
        trial = ElasticPolicyForm(request.GET, instance=copy.copy(policy))
        if trial.is_valid():
            try:
                result = elastic_whatif(policy=trial.save(commit=False), days=days)
            except DomainError as exc:
                whatif = {"error": exc.message, "days": days}
            except Exception as exc:  # noqa: BLE001 - shown on the page, never a 500
                whatif = {"error": f"Prometheus could not be read: {exc}", "days": days}
            else:
                whatif = {"result": result, "days": days,
                          "error": "" if result else "PROMETHEUS_URL is not set"}  # fmt: skip
        else:
            whatif = {"error": "Fix the values to run the what-if.", "days": days}
    events = list(policy.events.order_by("-decided_at", "-id")[:50])
    chart = {
        "cards": [{"x": e.decided_at.isoformat(), "y": e.cards_to} for e in reversed(events)],
        "util": [
            {"x": e.decided_at.isoformat(), "y": e.numbers.get("util_pct")}
            for e in reversed(events)
            if e.numbers.get("util_pct") is not None
        ],
        "latency": [
            {"x": e.decided_at.isoformat(), "y": e.numbers.get("latency_ms")}
            for e in reversed(events)
            if e.numbers.get("latency_ms") is not None
        ],
    }
    if whatif and whatif.get("result"):
        chart["whatif"] = [
            {"x": datetime.fromtimestamp(t, UTC).isoformat(), "y": cards}
            for t, cards in whatif["result"].timeline
        ]
    try:
        hpa_yaml = elastic_hpa_yaml(policy=policy)
    except DomainError as exc:
        hpa_yaml = f"# {exc.message}"
    return render(
        request,
        "pools/elastic/detail.html",
        {
            "policy": policy,
            "allocation": policy.allocation,
            "form": form,
            "can_edit": can_edit,
            "whatif": whatif,
            "events": events,
            "chart": chart,
            "burst": max(0, policy.cards_held - policy.allocation.card_count),
            "now": timezone.now(),
            "hpa_yaml": hpa_yaml,
            "rise": _rise(policy),
        },
    )


def _rise(policy) -> dict | None:
    found = next_prescale(policy, timezone.now())
    if found is None:
        return None
    return {
        "cards": found.cards,
        "at": datetime.fromtimestamp(found.start, UTC),
        "peak_at": datetime.fromtimestamp(found.peak_at, UTC) if found.peak_at else None,
        "rate": found.expected_rate,
    }
