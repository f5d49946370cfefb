"""The capacity dashboards: the pool admins' (``/dashboard/``) and a team's
(``/teams/<slug>/dashboard/``).

They join inventory and allocations (``pools.dashboards.capacity``) with costs
(``billing.dashboards.costs``), so
they live on the billing floor, the lowest that may read both. One URL answers with the page,
the htmx fragment (``HX-Request``: the 60-second refresh and the filters), a part loaded after
the page (``?part=heatmap``, ``?part=utilisation``: the chart) or a table as CSV
(``?export=<table>``). The query count does not grow with the fleet. No request asks
Prometheus: what it says is read by a task and shown with its age
(``pools.dashboards.utilisation_store``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.contrib import messages
from django.db.models import Exists, OuterRef
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_POST

from billing.budgets.selectors import team_budget_banner
from billing.conf import billing_zone
from billing.dashboards import costs
from billing.dashboards import serving as serving_dash
from billing.pricing import local_midnight, month_of, next_month, previous_month, round_money
from billing.rate_periods import RatePeriod, rate_periods_or_unpriced
from pools.capacity.availability import MAINTENANCE_AWAY, RECURRING_HELD
from pools.capacity.views import BLOCKED_COLOURS
from pools.clusters.selectors import cluster_list
from pools.common.choices import IdleFindingState, Scheduler
from pools.dashboards import capacity as dashboard
from pools.dashboards import utilisation, utilisation_store
from pools.dashboards.forms import DashboardFilterForm
from pools.dashboards.stranded import stranded_for_dashboard
from pools.elastic.selectors import borrowed_cards_by_pool
from pools.inventory.models import DriverGroup, Gpu, GpuModel, Pool
from pools.jobs import enqueue
from pools.overrides.selectors import team_overrides_in_force
from pools.reclamation.card_timeline import card_changes
from pools.reclamation.models import IdleFinding
from pools.serving import selectors as serving_selectors
from pools.serving.precision import signal_shown
from pools.tenancy.models import Team
from pools.tenancy.permissions import may_see_team
from pools.web.csv_numbers import card_hours_csv
from pools.web.pages import (
    PALETTE,
    Column,
    checked_export,
    csv_response,
    filter_refusal,
    mig_slices_text,
    pool_admin_required,
    refuse_export,
)

CAPACITY_COLUMNS = [
    Column("pool", lambda r: r["pool"]),
    Column("gpu_model", lambda r: r["gpu_model"]),
    Column("pool_slug", lambda r: r["pool_slug"]),  # to join with the other tables' slugs
    Column("gpu_model_slug", lambda r: r["gpu_model_slug"]),
    Column("driver_group", lambda r: r["driver_group"]),
    Column("total", lambda r: r["total"]),
    Column("healthy", lambda r: r["healthy"]),
    Column("schedulable", lambda r: r["schedulable"]),
    Column("usable", lambda r: r["usable"]),
    Column("allocated", lambda r: r["allocated"]),
    Column("in_use", lambda r: r["in_use"]),
    Column("in_use_reporting", lambda r: r["in_use_reporting"]),
    Column("idle_allocated", lambda r: r["idle_allocated"]),
    Column("free", lambda r: r["free"]),
    Column("headroom", lambda r: r["headroom"]),
    # cards in MIG mode are not in usable: shown apart, with their slices by profile
    Column("mig_cards", lambda r: r["mig_cards"]),
    Column("mig_slices", lambda r: mig_slices_text(r["mig_slices"])),
]
STRANDED_COLUMNS = [
    Column("pool_slug", lambda c: c.row.pool_slug),
    Column("gpu_model_slug", lambda c: c.row.gpu_model_slug),
    Column("cards", lambda c: c.row.cards),
    Column("free_card_hours", lambda c: card_hours_csv(c.row.free_card_hours)),
    Column("stranded_card_hours", lambda c: card_hours_csv(c.row.stranded_card_hours)),
    Column("stranded_for_2_card_hours", lambda c: card_hours_csv(c.row.card_hours_for[2])),
    Column("stranded_for_4_card_hours", lambda c: card_hours_csv(c.row.card_hours_for[4])),
    Column("stranded_for_8_card_hours", lambda c: card_hours_csv(c.row.card_hours_for[8])),
    Column(
        "unknown_topology_card_hours", lambda c: card_hours_csv(c.row.unknown_topology_card_hours)
    ),
    Column("price_per_card_hour", lambda c: c.price_per_card_hour),
    Column("amount", lambda c: c.amount),
    Column("currency", lambda c: c.currency),
    Column(
        "win_back",
        lambda c: "; ".join(
            f"{w.node}: free {w.cards_to_free} held card(s) for a whole {w.target_cards}"
            for w in c.row.win_back
        ),
    ),
]
PLAN_COLUMNS = [
    Column("pool", lambda r: r[0]),
    Column("gpu_model", lambda r: r[1]),
    Column("day", lambda r: r[2]),
    # each local day at its busiest instant (pools.dashboards.capacity.allocation_plan), of
    # the cards held (allocations, recurring reservations, maintenance: the timeline's count)
    # and of the pending requests apart; the held cards split by kind at that instant
    Column("allocated_cards_at_peak", lambda r: r[3]),
    Column("allocated_peak_at", lambda r: timezone.localtime(r[4]).isoformat()),
    Column("pending_cards_at_peak", lambda r: r[5]),
    Column("pending_peak_at", lambda r: timezone.localtime(r[6]).isoformat()),
    Column("usable_cards", lambda r: r[7]),
    Column("recurring_cards_at_peak", lambda r: r[8]),
    Column("maintenance_cards_at_peak", lambda r: r[9]),
]
FORECAST_COLUMNS = [
    Column("pool", lambda f: f.pool_slug),
    Column("gpu_model", lambda f: f.gpu_model_slug),
    Column("weekly_card_days", lambda f: " ".join(f"{y:.1f}" for y in f.weekly)),
    Column("slope_card_days_per_week", lambda f: f"{f.slope:.2f}"),
    Column("capacity_card_days_per_week", lambda f: f"{f.capacity:.0f}"),
    Column("runs_out", lambda f: f.runs_out.date().isoformat() if f.runs_out else None),
    Column("forecast", lambda f: f.text),
]
TEAM_CARD_COLUMNS = [
    Column("team", lambda t: t["slug"]),
    Column("cards_held", lambda t: t["cards"]),
]
TEAM_COST_COLUMNS = [
    Column("team", lambda t: t.slug),
    Column("amount", lambda t: f"{t.amount:.2f}"),
    Column("currency", lambda t: t.currency),
]
ALERT_COLUMNS = [
    Column("kind", lambda a: a[0]),
    Column("subject", lambda a: a[1]),
    Column("detail", lambda a: a[2]),
    Column("scheduler_message", lambda a: a[3]),  # a drift's: what the scheduler answered
]
HEATMAP_COLUMNS = [
    Column("node", lambda r: r[0].hostname),
    Column("pool", lambda r: r[0].pool_slug),
    Column("node_state", lambda r: r[0].node_state),
    Column("gpu_index", lambda r: r[1].index),
    Column("gpu_model", lambda r: r[1].gpu_model),
    Column("gpu_state", lambda r: r[1].state),
    Column("util_pct", lambda r: None if r[1].util_pct is None else f"{r[1].util_pct:.1f}"),
    Column("cluster", lambda r: r[0].cluster_slug),  # host names are unique per cluster only
]


def _filter_form(request) -> tuple[DashboardFilterForm, dashboard.DashboardFilters]:
    form = DashboardFilterForm(
        request.GET or None,
        pools=Pool.objects.order_by("name").values_list("slug", "name"),
        # models some GPU has: one index probe per model, not a DISTINCT over every GPU
        gpu_models=GpuModel.objects.filter(Exists(Gpu.objects.filter(gpu_model=OuterRef("pk"))))
        .order_by("name")
        .values_list("slug", "name"),
        branches=DriverGroup.objects.order_by("branch").values_list("branch", flat=True),
    )
    if not form.is_bound or not form.is_valid():
        return form, dashboard.DashboardFilters()
    data = form.cleaned_data
    return form, dashboard.DashboardFilters(
        pool=data["pool"] or None,
        gpu_model=data["gpu_model"] or None,
        driver_branch=data["driver_branch"],
        team=data["team"].slug if data["team"] else None,
    )


def _in_use_cells(in_use: dashboard.CardsInUse | None) -> dict:
    """``in_use`` and ``in_use_reporting`` for the CSV: empty when unknown, never 0."""
    if in_use is None or not in_use.reporting:
        return {"in_use": None, "in_use_reporting": None}
    return {"in_use": in_use.busy, "in_use_reporting": in_use.reporting}


def _capacity_table(rows: list[dashboard.CapacityRow]) -> list[dict]:
    """One line per pool × model (driver group "all") followed by its driver groups."""
    table = []
    for row in rows:
        table.append(
            {
                "pool": row.pool,
                "gpu_model": row.gpu_model,
                "pool_slug": row.pool_slug,
                "gpu_model_slug": row.gpu_model_slug,
                "driver_group": "all",
                "total": row.total,
                "healthy": row.healthy,
                "schedulable": row.schedulable,
                "usable": row.usable,
                "mig_cards": row.mig_cards,
                "mig_slices": row.mig_slices,
                "allocated": row.allocated,
                **_in_use_cells(row.in_use),
                "idle_allocated": row.idle_allocated,
                "free": row.free,
                "headroom": row.headroom.level,
            }
        )
        for g in row.groups:
            table.append(
                {
                    "pool": row.pool,
                    "gpu_model": row.gpu_model,
                    "pool_slug": row.pool_slug,
                    "gpu_model_slug": row.gpu_model_slug,
                    "driver_group": g.driver_group,
                    "total": g.total,
                    "healthy": g.healthy,
                    "schedulable": g.schedulable,
                    "usable": None,
                    "mig_cards": g.mig_cards,
                    "mig_slices": None,
                    "allocated": None,
                    **_in_use_cells(g.in_use),
                    "idle_allocated": None,
                    "free": None,
                    "headroom": None,
                }
            )
    return table


def _plan_chart(plan, rows, days) -> dict:
    """Held and pending cards per local day summed over the shown pool × models (each pair's
    busiest instant of the day, :func:`pools.dashboards.capacity.allocation_plan`: the cards
    the pairs shown hold at their busiest, which need not be one instant), the held ones split
    into allocations, recurring reservations and maintenance (the last two only when some day
    has them), and usable cards."""
    shown = {(r.pool_slug, r.gpu_model_slug) for r in rows}
    sums = {name: [0] * len(days) for name in ("allocated", "recurring", "maintenance", "pending")}
    for key, series in plan.items():
        if key in shown:
            for name, total in sums.items():
                sums[name] = [a + b for a, b in zip(total, getattr(series, name), strict=True)]
    usable = sum(r.usable for r in rows if r.recognised)
    held = [
        (label, sums[name], colour)
        for name, label, colour in (
            ("allocated", "allocated (approved and later)", PALETTE[0]),
            ("recurring", "recurring reservations", BLOCKED_COLOURS[RECURRING_HELD]),
            ("maintenance", "maintenance", BLOCKED_COLOURS[MAINTENANCE_AWAY]),
        )
        if name == "allocated" or any(sums[name])
    ]
    return {
        "labels": [d.strftime("%d %b") for d in days],
        "datasets": [
            *({"type": "bar", "label": label, "data": data, "stack": "demand",
               "backgroundColor": colour, "pointStyle": "rect"} for label, data, colour in held),
            {"type": "bar", "label": "pending (submitted)", "data": sums["pending"],
             "stack": "demand", "backgroundColor": PALETTE[1], "pointStyle": "rect"},
            # pointStyle "line": the legend draws the dashed line's swatch as a line
            {"type": "line", "label": "usable cards", "data": [usable] * len(days),
             "pointRadius": 0, "pointStyle": "line", "borderDash": [6, 4],
             "borderColor": "#000000", "backgroundColor": "#000000", "stack": "usable"},
        ],
    }  # fmt: skip


def _plan_chart_label(chart: dict) -> str:
    """The plan chart's text for screen readers, naming the bars it draws (from
    :func:`_plan_chart`'s datasets, so a bar drawn is a bar named): ``"Cards held per day by
    allocated (approved and later), recurring reservations and maintenance, with pending
    (submitted) requests stacked on top, against usable cards"``."""
    *held, pending = (d["label"] for d in chart["datasets"] if d["type"] == "bar")
    named = held[0] if len(held) == 1 else f"{', '.join(held[:-1])} and {held[-1]}"
    return (
        f"Cards held per day by {named}, with {pending} requests stacked on top, "
        "against usable cards"
    )


def _utilisation_chart(history: utilisation.UtilisationHistory) -> dict:
    """Chart.js line data: mean utilisation % per pool × model at each step, local time."""
    return {
        "labels": [timezone.localtime(t).strftime("%d %b %H:%M") for t in history.timestamps],
        "datasets": [
            {"type": "line", "label": f"{s.pool} · {s.gpu_model}", "data": s.values,
             "borderColor": PALETTE[i % len(PALETTE)], "backgroundColor": PALETTE[i % len(PALETTE)],
             "pointRadius": 0, "borderWidth": 1.5, "spanGaps": False}
            for i, s in enumerate(history.series)
        ],
    }  # fmt: skip


def _utilisation_part(request, filters, now):
    """The utilisation chart (``?part=utilisation&range=24h|7d|30d``) from the stored reading,
    its error, its emptiness or "being read" said in the fragment; answers 200 whatever
    Prometheus does."""
    range_key = request.GET.get("range", utilisation.DEFAULT_RANGE)
    history = utilisation_store.history_stored(filters=filters, now=now, range_key=range_key)
    response = render(
        request,
        "dashboard/admin.html#utilisation",
        {"history": history, "ranges": utilisation.RANGES.values(),
         "range": history.range.key, "chart": _utilisation_chart(history), "now": now},
    )  # fmt: skip
    patch_vary_headers(response, ["HX-Request"])
    return response


def _cost_month(now) -> tuple:
    """This month's top teams by cost; last month's, labelled, when this month has none."""
    this_month = month_of(now, billing_zone())
    return this_month, previous_month(this_month)


@pool_admin_required
@require_POST
def stranded_recompute(request):
    """*Recompute* on the dashboard: the stranded-capacity snapshot by its task (run at once
    where tasks run eagerly, else queued for a worker), then back to the dashboard."""
    if enqueue("pools.dashboards.tasks.stranded_snapshot_task") is None:
        messages.info(request, "Stranded capacity is being recomputed: reload in a minute.")
    else:
        messages.success(request, "Stranded capacity recomputed.")
    return redirect("dashboard")


ADMIN_EXPORTS = (
    "capacity", "serving", "serving-allocations", "stranded", "plan", "forecast", "teams-cards",
    "teams-cost", "alerts", "heatmap",
)  # fmt: skip
"""The admin dashboard's tables as CSV, ``?export=<name>``; any other name is a 400."""
TEAM_EXPORTS = ("serving", "allocations", "spend")
"""A team's dashboard's tables as CSV, ``?export=<name>``; any other name is a 400."""

_NO_IN_USE_EXPORTS = ("plan", "forecast", "teams-cards", "teams-cost", "alerts")
"""Exports that show no cards in use: Prometheus is not asked for them."""


@dataclass
class _Board:
    """What the admin dashboard reads for the page and its exports, in the order it reads it;
    ``stranded`` and ``stranded_at`` only after the exports that do not need them."""

    plan: dict[tuple, dashboard.PlanSeries]  # (pool slug, model slug) -> series
    rows: list[dashboard.CapacityRow]
    in_use: utilisation.UtilisationNow
    days: list[datetime]
    usable: dict[tuple[str, str], int]  # (pool slug, model slug) -> usable cards
    forecasts: list[dashboard.Forecast]
    alerts: dashboard.Alerts
    top_cards: list[dict]
    this_month: date  # first day of the billing month
    cost_month: date  # the month top_cost is of
    top_cost: list[costs.TeamCost]
    serving_rows: list
    serving_groups: list
    serving_state: serving_selectors.RollupState  # read once for the rows and the page
    rate_periods: list[RatePeriod]  # this month's: read once for serving and stranded costs
    stranded: list[costs.StrandedCost] | None = None
    stranded_at: datetime | None = None


def _heatmap_part(request, filters, now, heat, export):
    """The GPU heatmap fragment (``?part=heatmap&page=N``), or every node as CSV
    (``?export=heatmap``); colour by state or, ``heat=util``, by utilisation."""
    try:
        page = int(request.GET.get("page", 1))
    except ValueError:
        page = 1
    export = export == "heatmap"  # every node, not the page shown
    nodes, pages = dashboard.node_heatmap(filters=filters, now=now, page=None if export else page)
    heat_error, reading = None, None
    if heat == "util":
        reading = utilisation_store.cards_stored(now=now, per_card=True)  # None: being read
        if reading is not None:
            nodes, heat_error = utilisation.heatmap_utilisation(rows=nodes, reading=reading)
    if export:
        cells = ((r, c) for r in nodes for c in r.cells)
        return csv_response(cells, HEATMAP_COLUMNS, "dashboard-gpus.csv")
    query = request.GET.copy()
    query.pop("page", None)
    response = render(
        request,
        "dashboard/admin.html#heatmap",
        {"heat": nodes, "page": min(max(page, 1), pages), "pages": pages,
         "query": query.urlencode(), "colour": heat, "heat_error": heat_error,
         "heat_warn": heat_error not in (None, utilisation.NOT_CONFIGURED),
         "heat_pending": heat == "util" and reading is None,
         "heat_read_at": reading.computed_at if reading is not None else None, "now": now},
    )  # fmt: skip
    patch_vary_headers(response, ["HX-Request"])
    return response


def _top_cost(filters, now) -> tuple:
    """(this month, the month shown, its top teams by cost): this month's by cost so far (the
    figure each team's dashboard shows), last month's statements when this month has none."""
    this_month, last_month = _cost_month(now)
    top_cost = costs.top_teams_by_cost_so_far(now=now, team=filters.team)
    if top_cost:
        return this_month, this_month, top_cost
    return this_month, last_month, costs.top_teams_by_cost(month=last_month, team=filters.team)


def _load_board(filters, now, export) -> _Board:
    """Everything but the stranded capacity; the stored cards in use are read only for the
    page and the capacity and serving exports."""
    names = dashboard.pool_model_names()  # the plan's, the table's and the forecast's
    plan = dashboard.allocation_plan(filters=filters, now=now, names=names)
    rows = dashboard.capacity_rows(filters=filters, now=now, plan=plan, names=names)
    in_use = utilisation.UtilisationNow(now=now, error="not read for this export")
    if export not in _NO_IN_USE_EXPORTS:
        in_use = utilisation_store.in_use_stored(filters=filters, now=now)  # page, capacity
        utilisation.apply_in_use(rows, in_use)
    usable = {(r.pool_slug, r.gpu_model_slug): r.usable for r in rows}
    days = dashboard.plan_days(now)
    forecasts = dashboard.demand_forecasts(filters=filters, now=now, usable=usable, names=names)
    alerts = dashboard.dashboard_alerts(now=now)
    top_cards = dashboard.top_teams_by_cards(filters=filters, now=now)
    this_month, cost_month, top_cost = _top_cost(filters, now)
    month_start = local_midnight(this_month, billing_zone())
    served = serving_selectors.allocations_served(start=month_start, end=now + timedelta(minutes=5))
    serving_state = serving_selectors.serving_state(now=now)
    # cards mixing currencies this month: nothing priced (no serving cost, no stranded cost)
    periods = rate_periods_or_unpriced(month=this_month, zone=billing_zone())
    serving_rows = serving_dash.serving_rows(
        allocations=served, month=this_month, now=now, state=serving_state, periods=periods
    )
    return _Board(
        plan=plan, rows=rows, in_use=in_use, days=days, usable=usable, forecasts=forecasts,
        alerts=alerts, top_cards=top_cards, this_month=this_month, cost_month=cost_month,
        top_cost=top_cost, serving_rows=serving_rows,
        serving_groups=serving_dash.serving_groups(serving_rows), serving_state=serving_state,
        rate_periods=periods,
    )  # fmt: skip


def _plan_lines(board: _Board):
    """PLAN_COLUMNS rows: per placed pool × model and local day, the allocations' cards at the
    day's busiest instant of held cards and that instant (the first), the same of the pending
    requests, the usable cards, and the cards recurring reservations hold and maintenance
    windows take away at the held cards' instant."""
    return (
        (pool, model, d.date().isoformat(), allocated[i], s.held_at[i], s.pending[i],
         s.pending_at[i], board.usable.get((pool, model)), s.recurring[i], s.maintenance[i])
        for (pool, model), s in sorted(board.plan.items()) if pool
        for allocated in [s.allocated]
        for i, d in enumerate(board.days)
    )  # fmt: skip


def _alert_lines(alerts) -> list[tuple]:
    """ALERT_COLUMNS rows: unrecognised models, scheduler drift (with the scheduler's message,
    e.g. why it refused a repair or an unbind), over-commit."""
    lines = [
        ("unrecognised_model", u["raw_model_name"], f"{u['gpu_count']} cards", "")
        for u in alerts.unrecognised
    ]
    lines += [("scheduler_drift", d.subject, f"expected {d.expected}, found {d.found}", d.detail)
              for d in alerts.drifts]  # fmt: skip
    lines += [("over_commit", f"{o.pool} {o.gpu_model}", str(o), "") for o in alerts.overcommitted]
    return lines


def _export_before_stranded(export, board: _Board):
    """The CSV of ``?export=`` for the tables read before the stranded capacity, or None."""
    make = {
        "serving": lambda: csv_response(
            board.serving_groups, SERVING_GROUP_COLUMNS, "dashboard-serving.csv"
        ),
        "serving-allocations": lambda: csv_response(
            board.serving_rows, SERVING_COLUMNS, "dashboard-serving-allocations.csv"
        ),
        "capacity": lambda: csv_response(
            _capacity_table(board.rows), CAPACITY_COLUMNS, "dashboard-capacity.csv"
        ),
    }.get(export)
    return make() if make else None


def _export_after_stranded(export, board: _Board):
    """The CSV of ``?export=`` for the stranded capacity and the tables after it, or None."""
    make = {
        "stranded": lambda: csv_response(
            board.stranded, STRANDED_COLUMNS, "dashboard-stranded.csv"
        ),
        "plan": lambda: csv_response(_plan_lines(board), PLAN_COLUMNS, "dashboard-plan.csv"),
        "forecast": lambda: csv_response(
            board.forecasts, FORECAST_COLUMNS, "dashboard-forecast.csv"
        ),
        "teams-cards": lambda: csv_response(
            board.top_cards, TEAM_CARD_COLUMNS, "dashboard-teams-cards.csv"
        ),
        "teams-cost": lambda: csv_response(
            board.top_cost, TEAM_COST_COLUMNS, f"dashboard-teams-cost-{board.cost_month:%Y-%m}.csv"
        ),
        "alerts": lambda: csv_response(
            _alert_lines(board.alerts), ALERT_COLUMNS, "dashboard-alerts.csv"
        ),
    }.get(export)
    return make() if make else None


def _totals(board: _Board, borrowed) -> dict:
    """The capacity table's totals row (cards); in use None when Prometheus could not say."""
    rows, in_use = board.rows, board.in_use
    return {
        "total": sum(r.total for r in rows),
        "healthy": sum(r.healthy for r in rows),
        "allocated": sum(r.allocated for r in rows),
        "free": sum(r.free for r in rows),
        "usable": sum(r.usable for r in rows),
        "in_use": sum(c.busy for c in in_use.rows.values()) if in_use.known else None,
        "in_use_reporting": sum(c.reporting for c in in_use.rows.values()),
        "borrowed": sum(cards for _, cards in borrowed),
    }


def _page_context(request, form, filters, board: _Board, now, heat) -> dict:
    """The admin dashboard page's template context."""
    borrowed = borrowed_cards_by_pool(now=now)
    unplaced = board.plan.get(("", ""))
    range_key = request.GET.get("range")
    chart = _plan_chart(board.plan, board.rows, board.days)
    return {
        "form": form,
        "filters": filters,
        "rows": board.rows,
        "totals": _totals(board, borrowed),
        "borrowed_by_pool": borrowed,
        "chart": chart,
        "plan_chart_label": _plan_chart_label(chart),
        "unplaced_pending": unplaced.unplaced_pending if unplaced else 0,
        "plan_zone": timezone.get_current_timezone_name(),  # the plan's days are local days
        "forecasts": board.forecasts,
        "stranded": board.stranded,
        "stranded_at": board.stranded_at,
        "alerts": board.alerts,
        "top_cards": board.top_cards,
        "top_cost": board.top_cost,
        "cost_month": board.cost_month,
        "serving_groups": board.serving_groups,
        "serving_state": board.serving_state,
        "this_month": board.this_month,
        "in_use": board.in_use,
        "colour": heat,
        "ranges": utilisation.RANGES.values(),
        "range": range_key if range_key in utilisation.RANGES else utilisation.DEFAULT_RANGE,
        "query": request.GET.urlencode(),
        "now": now,
        "clusters": list(cluster_list()),  # one query whatever the number of clusters
    }


def _refused(request, form: DashboardFilterForm):
    """The dashboard's 400 to filters it cannot use: the page (the body alone for htmx) with
    the form, its errors and :func:`pools.web.pages.filter_refusal`, and no figures."""
    context = {"form": form, "refusal": filter_refusal(form), "query": request.GET.urlencode()}
    template = "dashboard/admin.html#body" if request.htmx else "dashboard/admin.html"
    response = render(request, template, context, status=400)
    patch_vary_headers(response, ["HX-Request"])
    return response


@pool_admin_required
def admin_dashboard(request):
    """The pool admins' dashboard: the page, its htmx body, a part (``?part=utilisation``,
    ``?part=heatmap``) or a table as CSV (``?export=<table>``, one of :data:`ADMIN_EXPORTS`,
    any other a 400: :func:`pools.web.pages.checked_export`); see the module doc.

    Filters the form cannot use (a team the user may not see, a pool or GPU model of no slug)
    are a 400, as on the timeline and the lists: the page (or its htmx body, or a part) with
    the refusal and no figures; a download :func:`pools.web.pages.refuse_export`. The whole
    fleet's figures under a filter it could not read would pass for the filtered ones."""
    export = checked_export(request, ADMIN_EXPORTS)
    now = timezone.now()
    form, filters = _filter_form(request)
    part = request.GET.get("part")
    if form.is_bound and not form.is_valid():
        if export:
            refuse_export(request, form)  # htmx: the body says why, as without export
        return _refused(request, form)
    if part == "utilisation":
        return _utilisation_part(request, filters, now)
    heat = "util" if request.GET.get("heat") == "util" else "state"
    if part == "heatmap" or export == "heatmap":
        return _heatmap_part(request, filters, now, heat, export)
    board = _load_board(filters, now, export)
    if (response := _export_before_stranded(export, board)) is not None:
        return response
    snapshot = stranded_for_dashboard(filters=filters, now=now)
    board.stranded = costs.stranded_costs(snapshot.rows, now=now, periods=board.rate_periods)
    board.stranded_at = snapshot.computed_at
    if (response := _export_after_stranded(export, board)) is not None:
        return response
    context = _page_context(request, form, filters, board, now, heat)
    template = "dashboard/admin.html#body" if request.htmx else "dashboard/admin.html"
    response = render(request, template, context)
    patch_vary_headers(response, ["HX-Request"])
    return response


TEAM_ALLOCATION_COLUMNS = [
    Column("id", lambda r: r["allocation"].pk),
    Column("pool", lambda r: r["allocation"].pool.slug),
    Column("gpu_model", lambda r: r["allocation"].gpu_model.slug),
    Column("cards", lambda r: r["allocation"].card_count),
    Column("status", lambda r: r["allocation"].status),
    Column("starts_at", lambda r: r["allocation"].starts_at.isoformat()),
    Column("ends_at", lambda r: r["allocation"].ends_at.isoformat()),
    Column("held_card_hours", lambda r: card_hours_csv(r["held"])),
    Column("used_card_hours", lambda r: card_hours_csv(r["used"])),
    Column("used_percent", lambda r: r["used_percent"]),
]


def _signal_column(name: str) -> Column:
    """The newest bucket's signal ``name`` as the Serving table shows it (``0.7`` requests
    waiting, not the stored ``0.74``): :func:`pools.serving.precision.signal_shown`."""
    return Column(name, lambda r: signal_shown(name, r["now"].get(name)))


# Per allocation: ``cost`` is what holding its cards cost this month (held card-hours x the
# reserved price, tokens or not; empty when unpriced), ``cost_per_million_output`` that of the
# card-hours that served tokens per million output tokens (:mod:`billing.dashboards.serving`).
SERVING_COLUMNS = [
    Column("allocation", lambda r: r["allocation"].pk),
    Column("team", lambda r: r["allocation"].team.slug),
    Column("pool", lambda r: r["allocation"].pool.slug),
    Column("gpu_model", lambda r: r["allocation"].gpu_model.slug),
    Column("cards", lambda r: r["allocation"].card_count),
    Column("engine", lambda r: r["now"].get("engine")),
    _signal_column("requests_waiting"),
    _signal_column("kv_cache_usage_pct"),
    _signal_column("ttft_p95_s"),
    _signal_column("itl_p95_s"),
    Column("output_tokens_5min", lambda r: r["now"].get("generation_tokens")),
    _signal_column("gpu_util_pct"),
    Column("month_held_card_hours", lambda r: card_hours_csv(_usage(r, "held_card_hours"))),
    Column("month_output_tokens", lambda r: _usage(r, "output_tokens")),
    Column("month_input_tokens", lambda r: _usage(r, "input_tokens")),
    Column("output_tokens_per_card_hour", lambda r: _usage(r, "output_tokens_per_card_hour")),
    Column("busy_share", lambda r: _usage(r, "busy_share")),
    Column("cost", lambda r: r["efficiency"] and r["efficiency"].cost),
    Column(
        "cost_per_million_output",
        lambda r: r["efficiency"] and r["efficiency"].cost_per_million_output,
    ),
    Column("currency", lambda r: r["efficiency"] and r["efficiency"].currency),
]


SERVING_GROUP_COLUMNS = [
    Column("pool", lambda g: g["pool"]),
    Column("gpu_model", lambda g: g["gpu_model"]),
    Column("team", lambda g: g["team"]),
    Column("allocations", lambda g: g["allocations"]),
    Column("held_card_hours", lambda g: card_hours_csv(g["usage"].held_card_hours)),
    Column("busy_card_hours", lambda g: card_hours_csv(g["usage"].busy_card_hours)),
    Column("busy_share", lambda g: g["usage"].busy_share),
    Column("output_tokens", lambda g: g["usage"].output_tokens),
    Column("input_tokens", lambda g: g["usage"].input_tokens),
    Column("output_tokens_per_card_hour", lambda g: g["usage"].output_tokens_per_card_hour),
    Column("cost", lambda g: g["cost"]),
    Column("cost_per_million_output", lambda g: g["cost_per_million_output"]),
    Column("currency", lambda g: g["currency"]),
]


def _usage(row: dict, name: str):
    return None if row["efficiency"] is None else getattr(row["efficiency"].usage, name)


SPEND_COLUMNS = [
    Column("month", lambda s: f"{s.month:%Y-%m}"),
    Column("amount", lambda s: None if s.amount is None else round_money(s.amount, s.currency)),
    Column("currency", lambda s: s.currency),
    Column("final", lambda s: s.final),
    # True: no statement yet, the amount is the month in progress's cost so far
    Column("so_far", lambda s: s.so_far),
]


def team_dashboard(request, slug: str):
    team = get_object_or_404(Team, slug=slug)
    if not may_see_team(request.user, team):
        raise Http404("No such team.")  # never say whether another team exists
    export = checked_export(request, TEAM_EXPORTS)
    now = timezone.now()
    zone = billing_zone()
    month = month_of(now, zone)
    month_start, month_end = local_midnight(month, zone), local_midnight(next_month(month), zone)
    allocations = dashboard.team_allocations(team_id=team.pk, now=now)
    used = costs.used_card_hours(allocation_ids=[a.pk for a in allocations])
    read_until = costs.slurm_accounting_read_until()
    changes = card_changes(a.pk for a in allocations)
    rows = []
    for a in allocations:
        held = costs.held_card_hours(a, a.starts_at, min(now, a.ends_at), changes.get(a.pk, ()))
        used_hours = _allocation_used(a, used, read_until)
        rows.append(
            {
                "allocation": a,
                "time_left": a.ends_at - now if a.ends_at > now else None,
                "started": a.starts_at <= now,
                "held": held,
                "used": used_hours,
                "used_percent": (
                    round(used_hours / held * 100) if used_hours is not None and held else None
                ),
                "progress": _progress(a, now),
            }
        )
    spend_now, spend_before = costs.team_spend(team_id=team.pk, month=month)
    cost_so_far = costs.teams_cost_so_far(team_ids=[team.pk], now=now)[team.pk]
    spend_now = costs.spend_so_far(spend_now, cost_so_far)
    serving, serving_sort = serving_dash.sort_rows(
        serving_dash.serving_rows(allocations=allocations, month=month, now=now),
        request.GET.get("serving_sort", "allocation"),
    )
    if export == "serving":
        return csv_response(serving, SERVING_COLUMNS, f"{team.slug}-serving.csv")
    if export == "allocations":
        return csv_response(rows, TEAM_ALLOCATION_COLUMNS, f"{team.slug}-allocations.csv")
    if export == "spend":
        return csv_response([spend_before, spend_now], SPEND_COLUMNS, f"{team.slug}-spend.csv")
    # unknown usage (Kubernetes, Slurm before accounting reached it) is left out of the ratio
    known = [r["allocation"].pk for r in rows if r["used"] is not None]
    used_inside, used_outside = costs.team_used_card_hours(
        team_id=team.pk, month=month, allocation_ids=known
    )
    used_share = costs.used_share(
        used=used_inside,
        held=(
            (
                costs.held_card_hours(a, month_start, min(now, month_end), changes.get(a.pk, ())),
                a.pk in known,
            )
            for a in allocations
        ),
    )
    context = {
        "team": team,
        "rows": rows,
        "spend_now": spend_now,
        "spend_before": spend_before,
        "cost_so_far": cost_so_far,
        "used_share": used_share,
        "used_outside_month": used_outside,
        "slurm_read_until": read_until,
        "month": month,
        "estimates": team.sizing_estimates.order_by("-created_at")[:5],
        "serving": serving,
        "serving_sort": serving_sort,
        "serving_headers": serving_dash.HEADERS,
        "budget_banner": team_budget_banner(team_id=team.pk, now=now),
        "overrides_in_force": team_overrides_in_force(team_id=team.pk, now=now),
        "idle_findings": IdleFinding.objects.filter(
            allocation__team=team, state=IdleFindingState.OPEN
        ).count(),
        "now": now,
    }
    template = "dashboard/team.html#body" if request.htmx else "dashboard/team.html"
    response = render(request, template, context)
    patch_vary_headers(response, ["HX-Request"])
    return response


def _allocation_used(allocation, used: dict, read_until) -> Decimal | None:
    """Card-hours Slurm accounting metered inside ``allocation`` (``used`` by id); a Slurm
    allocation with no metered job used 0 once accounting was imported past its start
    (``read_until``); ``None`` (unknown) otherwise: before that import, and on Kubernetes,
    which meters no job."""
    if allocation.pk in used:
        return used[allocation.pk]
    if allocation.pool.scheduler != Scheduler.SLURM or read_until is None:
        return None
    return Decimal(0) if read_until > allocation.starts_at else None


def _progress(allocation, now) -> int:
    total = allocation.ends_at - allocation.starts_at
    elapsed = max(timedelta(0), min(now, allocation.ends_at) - allocation.starts_at)
    return round(100 * elapsed / total) if total else 0
