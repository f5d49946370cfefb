"""Pages of elastic capacity: the team's elastic allocations with their live state, one
allocation's policy editor with its what-if (queued: a task reads the history and prices it
with and without burst; the page polls ``?whatif=<id>`` over htmx), scale history and chart,
and the teams' opt-ins to burst pools."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_http_methods

from pools.common.errors import DomainError
from pools.elastic import selectors
from pools.elastic.forms import BurstOptInForm, ElasticPolicyForm
from pools.elastic.services import (
    burst_opt_in_set,
    covered_text,
    elastic_hpa_yaml,
    elastic_policy_update,
    elastic_whatif_queue,
    next_prescale,
)
from pools.tenancy.permissions import may_administer_pools, may_manage_elastic
from pools.tenancy.selectors import managed_team_list, team_list
from pools.web.csv_numbers import card_hours_csv
from pools.web.pages import (
    Column,
    checked_export,
    csv_response,
    form_add_domain_errors,
    whole_number,
)

CHART_SPAN = timedelta(hours=24)


def _money_of(attribute: str):
    """A CSV cell of a policy's 7-day money (``policy.money``; empty when unpriced)."""
    return lambda p: getattr(p.money, attribute) if p.money else None


ELASTIC_COLUMNS = [
    Column("allocation", lambda p: p.allocation_id),
    Column("team", lambda p: p.allocation.team.slug),
    Column("pool", lambda p: p.allocation.pool.slug),
    Column("gpu_model", lambda p: p.allocation.gpu_model.slug),
    Column("enabled", lambda p: p.enabled),
    Column("floor_cards", lambda p: p.allocation.card_count),
    Column("cards_now", lambda p: p.cards_held),
    Column("ceiling_cards", lambda p: p.ceiling_cards),
    Column(
        "burst_card_hours_7d",
        lambda p: card_hours_csv(p.money.burst_card_hours) if p.money else None,
    ),
    Column("burst_amount_7d", _money_of("burst_amount")),
    Column("currency", _money_of("currency")),
    Column("last_decision", lambda p: (p.last_decision or {}).get("reason")),
]
"""The list's CSV: the page's columns, the 7-day burst in card-hours (3 places, as shown) and
its amount in ``currency`` (empty when no rate card prices it), the last decision's reason."""


def _decision(attribute: str):
    """A CSV cell of a decision's money (``event.money``; empty when unpriced or unknown)."""
    return lambda e: getattr(e.money, attribute) if e.money else None


SCALE_EVENT_COLUMNS = [
    Column("decided_at", lambda e: e.decided_at),
    Column("action", lambda e: e.action),
    Column("source", lambda e: e.source),
    Column("reason", lambda e: e.reason),
    Column("message", lambda e: e.message),
    Column("cards_from", lambda e: e.cards_from),
    Column("cards_to", lambda e: e.cards_to),
    Column("cards_changed", _decision("cards")),
    Column(
        "card_hours",
        lambda e: card_hours_csv(e.money.card_hours) if e.money else None,
    ),
    Column("amount", _decision("amount")),
    Column("currency", _decision("currency")),
    Column("effective_at", lambda e: e.effective_at),
    Column("util_pct", lambda e: e.numbers.get("util_pct")),
    Column("latency_ms", lambda e: e.numbers.get("latency_ms")),
    Column("applied", lambda e: e.applied),
    Column("apply_note", lambda e: e.apply_note),
]
"""The scaling history's CSV (the 50 decisions the page lists): each decision's cards changed
(+ added, - released), the card-hours they made or saved (3 places, as shown) and their amount
in ``currency`` (empty when unpriced)."""


def elastic_list(request):
    """Every elastic allocation the user may see: floor, ceiling, cards now, the last 7 days'
    burst and its money, last decision; ``?export=csv``: :data:`ELASTIC_COLUMNS`."""
    export = checked_export(request)
    policies = list(selectors.elastic_policy_list(user=request.user))
    money = _money(policies)
    for policy in policies:
        policy.money = money.get(policy.pk) if money else None
    if export == "csv":
        return csv_response(policies, ELASTIC_COLUMNS, "elastic-allocations.csv")
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
    export = checked_export(request) if request.method == "GET" else None
    can_edit = may_manage_elastic(request.user, policy.allocation.team)
    form = ElasticPolicyForm(instance=policy)
    whatif_form = whatif = None
    if request.method == "POST" and request.POST.get("whatif"):
        whatif_form = _whatif_queue(request, policy)
    elif request.method == "POST":
        if not can_edit:
            raise PermissionDenied("Only the team's managers and pool admins edit the policy.")
        form = _policy_save(request, policy)
    for answer in (form, whatif_form):
        if isinstance(answer, HttpResponse):
            return answer
    if whatif_form is None:
        whatif = _whatif(request, policy)
        if whatif and request.htmx:  # the what-if's poll
            return _whatif_fragment(request, policy, whatif)
        whatif_form = _whatif_form(policy, whatif)
    events, money = _events_with_money(policy)
    if export == "csv":
        return csv_response(
            events, SCALE_EVENT_COLUMNS, f"elastic-{policy.allocation_id}-scaling.csv"
        )
    now = timezone.now()
    chart = _chart(policy, events, now)
    if whatif and whatif["result"]:
        chart["whatif"] = _whatif_line(whatif["result"]["timeline"], since=now - CHART_SPAN)
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
            "whatif_form": whatif_form,
            "events": events,
            "chart": chart,
            "burst": max(0, policy.cards_held - policy.allocation.card_count),
            "money": money,
            "now": now,
            "hpa_yaml": hpa_yaml,
            "rise": _rise(policy),
        },
    )


def _events_with_money(policy) -> tuple[list, object]:
    """The policy's newest 50 scale events, each with its decision's ``money`` (``None``
    without pricing), and the policy's 7-day money (:func:`_money`; ``None`` without)."""
    events = list(policy.events.order_by("-decided_at", "-id")[:50])
    costs = _money([policy], events)
    money = costs.get(policy.pk) if costs else None
    for event in events:
        event.money = money.decisions.get(event.pk) if money else None
    return events, money


def _policy_save(request, policy):
    """Save the POSTed policy (the redirect back), or the form with its errors."""
    form = ElasticPolicyForm(request.POST, instance=copy.copy(policy))
    if not form.is_valid():
        return form
    try:
        elastic_policy_update(policy=policy, actor=request.user, **form.cleaned_data)
    except DomainError as exc:
        form_add_domain_errors(form, exc)
        return form
    messages.success(request, "Elastic policy saved.")
    return redirect("pools:elastic-detail", pk=policy.pk)


def _whatif_form(policy, whatif: dict | None) -> ElasticPolicyForm:
    """The what-if form: the shown what-if's trial values, days and source, else the saved
    policy's values over 7 days."""
    params = whatif["run"].params if whatif else {}
    form = ElasticPolicyForm(instance=policy, initial=params.get("fields"))
    form.days, form.source = params.get("days", 7), params.get("source", "")
    return form


def _whatif_queue(request, policy):
    """Queue the what-if of the POSTed trial values (:func:`elastic_whatif_queue`) and send
    the browser to ``?whatif=<id>``, where it polls; or the what-if form with its errors."""
    trial = ElasticPolicyForm(request.POST, instance=copy.copy(policy))
    raw_days = request.POST.get("days", "")
    trial.days, trial.source = raw_days, request.POST.get("source", "")
    if not trial.is_valid():
        return trial
    fields = {k: v for k, v in trial.cleaned_data.items() if k not in ("enabled", "deployment")}
    try:
        whatif = elastic_whatif_queue(
            policy=policy, actor=request.user, source=trial.source or None, fields=fields,
            days=raw_days if (days := whole_number(raw_days)) is None else days,
        )  # fmt: skip
    except DomainError as exc:
        form_add_domain_errors(trial, exc, name_other_fields=True)
        return trial
    url = reverse("pools:elastic-detail", args=[policy.pk])
    return redirect(f"{url}?whatif={whatif.pk}#whatif")


def _whatif(request, policy) -> dict | None:
    """The queued what-if ``?whatif=<id>`` of this policy (``None``: none asked, or not one of
    this policy's): the run, its result and the span it covers as datetimes and in words."""
    pk = whole_number(request.GET.get("whatif"))
    if pk is None:
        return None
    run = selectors.elastic_whatif_list(user=request.user).filter(policy=policy, pk=pk).first()
    if run is None:
        return None
    trial = run.params.get("fields") or {}
    view = {
        "run": run,
        "result": run.result if run.status == "done" else None,
        "latency_ms": trial.get("up_latency_ms", policy.up_latency_ms),
    }
    if view["result"]:
        start = datetime.fromisoformat(run.result["start"])
        end = datetime.fromisoformat(run.result["end"])
        view.update(start=start, end=end, covered_text=covered_text((end - start).total_seconds()))
    return view


def _whatif_fragment(request, policy, whatif: dict) -> HttpResponse:
    """The polled what-if: its progress while it runs; once done the whole page again (its
    chart draws the what-if's cards), once failed the error."""
    if whatif["result"]:
        response = HttpResponse(status=204)
        response["HX-Refresh"] = "true"
    else:
        context = {"policy": policy, "allocation": policy.allocation, "whatif": whatif}
        response = render(request, "pools/elastic/detail.html#whatif_result", context)
    patch_vary_headers(response, ["HX-Request"])
    return response


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


# ------------------------------------------------------------------------------ burst pools

BURST_OPT_IN_COLUMNS = [
    Column("team", lambda r: r[0].team.slug),
    Column("burst_pool", lambda r: r[0].pool.slug),
    Column("cluster", lambda r: r[0].pool.cluster.slug if r[0].pool.cluster_id else ""),
    Column("gpu_model", lambda r: r[1].gpu_model if r[1] else None),
    Column("price_per_card_hour", lambda r: r[1].shown_price if r[1] else None),
    Column("currency", lambda r: r[1].currency if r[1] else None),
    Column("opted_in_at", lambda r: r[0].created_at),
]
"""The opt-ins' CSV, rows ``(opt-in, price or None)``: one per GPU model the rate card prices
in the burst pool, the price a plain number beside its currency; an opt-in to a pool the card
prices nothing in is one row with those cells empty (unknown, never 0)."""


def _managed_teams(user):
    """The teams whose burst pools ``user`` chooses: every team for a pool admin, else the
    teams they manage (:func:`pools.tenancy.permissions.may_manage_elastic`)."""
    return (
        team_list(user=user) if may_administer_pools(user) else managed_team_list(user=user)
    ).order_by("name")


@require_http_methods(["GET", "POST"])
def burst_opt_in_list(request):
    """The teams' opt-ins to burst pools (issue 35; your teams', all for pool admins) with each
    pool's card-hour prices (CSV too), and a form to opt a team in (its managers, pool
    admins; audited by :func:`pools.elastic.services.burst_opt_in_set`)."""
    export = checked_export(request) if request.method == "GET" else None
    opt_ins = list(selectors.burst_opt_in_list(user=request.user))
    pools = list(selectors.burst_pool_list())
    prices = selectors.burst_pool_prices(
        pool_ids={p.pk for p in pools} | {o.pool_id for o in opt_ins}, now=timezone.now()
    )
    teams = _managed_teams(request.user)
    managed = set(teams.values_list("pk", flat=True))  # one query, not one per row
    for opt_in in opt_ins:
        opt_in.prices = prices.get(opt_in.pool_id, [])
        opt_in.can_opt_out = opt_in.team_id in managed
    if export == "csv":
        rows = [(o, price) for o in opt_ins for price in (o.prices or [None])]
        return csv_response(rows, BURST_OPT_IN_COLUMNS, "burst-opt-ins.csv")
    form = BurstOptInForm(
        request.POST or None,
        teams=teams,
        pools=selectors.burst_pool_list(),
        prices=prices,
    )
    if request.method == "POST":
        if not managed:
            raise PermissionDenied("Only a team's managers and pool admins choose burst pools.")
        if form.is_valid():
            team, pool = form.cleaned_data["team"], form.cleaned_data["pool"]
            try:
                changed = burst_opt_in_set(team=team, pool=pool, actor=request.user, opted=True)
            except DomainError as exc:
                form.add_error(None, exc.message)
            else:
                messages.success(
                    request,
                    f"{team.name} may burst into {pool.name}."
                    if changed
                    else f"{team.name} had already opted into {pool.name}.",
                )
                return redirect("pools:burst-opt-in-list")
    return render(
        request,
        "pools/elastic/burst_opt_ins.html",
        {"opt_ins": opt_ins, "form": form, "pools": pools, "prices": prices,
         "can_opt_in": bool(managed) and bool(pools),
         "every_team": may_administer_pools(request.user)},
    )  # fmt: skip


@require_http_methods(["GET", "POST"])
def burst_opt_out(request, pk: int):
    """Confirm (GET), then opt the team out of the burst pool (POST): its managers and pool
    admins; cards already placed there stay until the loop hands them back."""
    opt_in = selectors.burst_opt_in_list(user=request.user).filter(pk=pk).first()
    if opt_in is None:
        raise Http404("No such burst opt-in.")
    if not may_manage_elastic(request.user, opt_in.team):
        raise PermissionDenied("Only the team's managers and pool admins choose burst pools.")
    held = selectors.burst_cards_held(team_id=opt_in.team_id, pool_id=opt_in.pool_id)
    if request.method == "POST":
        burst_opt_in_set(team=opt_in.team, pool=opt_in.pool, actor=request.user, opted=False)
        messages.success(request, f"{opt_in.team.name} no longer bursts into {opt_in.pool.name}.")
        return redirect("pools:burst-opt-in-list")
    return render(request, "pools/elastic/burst_opt_out.html", {"opt_in": opt_in, "held": held})
