"""Pages of elastic capacity: the team's elastic allocations with their live state, and one
allocation's policy editor with its what-if, scale history and chart."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from pools.elastic import selectors
from pools.elastic.forms import ElasticPolicyForm
from pools.elastic.services import (
    WhatIfSource,
    elastic_hpa_yaml,
    elastic_policy_update,
    elastic_whatif,
    next_prescale,
)
from pools.errors import DomainError
from pools.tenancy.permissions import may_manage_elastic

CHART_SPAN = timedelta(hours=24)


def elastic_list(request):
    """Every elastic allocation the user may see: floor, ceiling, cards now, last decision."""
    policies = list(selectors.elastic_policy_list(user=request.user))
    money = _money(policies)
    for policy in policies:
        policy.money = money.get(policy.pk) if money else None
    return render(request, "pools/elastic/list.html", {"policies": policies, "money": money})


def _money(policies, events=()):
    """The policies' scaling money over the last :data:`selectors.SCALE_COST_SPAN_DAYS` days,
    with the decisions of ``events`` (those a page lists) priced too."""
    now = timezone.now()
    start = now - timedelta(days=selectors.SCALE_COST_SPAN_DAYS)
    since = min((e.effective_at for e in events), default=None)
    return selectors.scale_costs(policies, start=start, now=now, since=since)


@require_http_methods(["GET", "POST"])
def elastic_detail(request, pk: int):
    policy = selectors.elastic_policy_list(user=request.user).filter(pk=pk).first()
    if policy is None:
        raise Http404("No such elastic allocation.")
    can_edit = may_manage_elastic(request.user, policy.allocation.team)
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
    whatif = _whatif(request, policy) if request.GET.get("whatif") else None
    events = list(policy.events.order_by("-decided_at", "-id")[:50])
    costs = _money([policy], events)
    money = costs.get(policy.pk) if costs else None
    for event in events:
        event.money = money.decisions.get(event.pk) if money else None
    now = timezone.now()
    chart = _chart(policy, events, now)
    if whatif and whatif.get("run"):
        chart["whatif"] = _whatif_line(whatif["run"].result.timeline, since=now - CHART_SPAN)
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
            "money": money,
            "now": now,
            "hpa_yaml": hpa_yaml,
            "rise": _rise(policy),
        },
    )


def _whatif(request, policy) -> dict:
    """The what-if of the GET form: the trial values replayed over ``days`` of history (the
    source the user picked, else Prometheus when configured, else the recorded readings)."""
    days = request.GET.get("days", "7")
    days = int(days) if days.isascii() and days.isdigit() and 1 <= int(days) <= 30 else 7
    source = request.GET.get("source", "")
    source = source if source in set(WhatIfSource) else ""
    trial = ElasticPolicyForm(request.GET, instance=copy.copy(policy))
    if not trial.is_valid():
        return {"error": "Fix the values to run the what-if", "days": days, "source": source}
    try:
        run = elastic_whatif(policy=trial.save(commit=False), days=days, source=source or None)
    except DomainError as exc:
        return {"error": exc.message, "days": days, "source": source}
    except Exception as exc:  # noqa: BLE001 - shown on the page, never a 500
        return {"error": f"Prometheus could not be read: {exc}", "days": days, "source": source}
    if run is None:
        why = (
            "PROMETHEUS_URL is not set"
            if source == WhatIfSource.PROMETHEUS
            else "PROMETHEUS_URL is not set and the loop has recorded no readings for this "
            "allocation in that time"
        )
        return {"error": why, "days": days, "source": source}
    return {"run": run, "days": days, "source": source, "error": ""}


def _whatif_line(timeline, *, since: datetime) -> list[dict]:
    """The what-if's cards as chart points from ``since`` (the chart's span): the cards it
    held at ``since``, then each change."""
    start = since.timestamp()
    before = [cards for t, cards in timeline if t < start]
    points = [(start, before[-1])] if before else []
    points += [(t, cards) for t, cards in timeline if t >= start]
    return [{"x": datetime.fromtimestamp(t, UTC).isoformat(), "y": cards} for t, cards in points]


def _chart(policy, events, now) -> dict:
    """Cards held, utilisation and latency over the last day from the loop's recorded
    readings (thinned to about 300 points); without readings, at each recorded decision."""
    readings = selectors.reading_timeline(policy_id=policy.pk, start=now - CHART_SPAN, end=now)
    if readings:
        return {
            "recorded": True,
            "cards": [{"x": r.read_at.isoformat(), "y": r.cards_held} for r in readings],
            "util": [
                {"x": r.read_at.isoformat(), "y": r.util_pct}
                for r in readings
                if r.util_pct is not None
            ],
            "latency": [
                {"x": r.read_at.isoformat(), "y": round(r.latency_ms)}
                for r in readings
                if r.latency_ms is not None
            ],
        }
    ordered = list(reversed(events))
    return {
        "recorded": False,
        "cards": [{"x": e.decided_at.isoformat(), "y": e.cards_to} for e in ordered],
        "util": [
            {"x": e.decided_at.isoformat(), "y": e.numbers.get("util_pct")}
            for e in ordered
            if e.numbers.get("util_pct") is not None
        ],
        "latency": [
            {"x": e.decided_at.isoformat(), "y": e.numbers.get("latency_ms")}
            for e in ordered
            if e.numbers.get("latency_ms") is not None
        ],
    }


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
