"""Cost pages: a team's month and finance's month, with CSV and PDF downloads of the same data."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html_join

from billing import selectors
from billing.budgets.selectors import team_budget_banner
from billing.choices import ChargeBasis
from billing.conf import billing_zone
from billing.dashboards.serving import team_showback
from billing.focus import focus_csv
from billing.pricing import local_midnight, month_of, next_month, previous_month, round_money
from billing.reports import (
    ambiguous_time_of,
    idle_costs_csv,
    lines_key,
    shared_cards_csv,
    showback_csv,
    statement_pdf,
    statements_csv,
    top_allocations_csv,
)
from billing.services.statements import statement_preview, statements_preview_month
from pools.common.validators import DATE_RANGE_MESSAGE, date_in_range
from pools.tenancy.models import Team
from pools.tenancy.permissions import may_see_all_costs, may_see_costs
from pools.tenancy.selectors import member_team_list, team_list
from pools.web.pages import (
    Column,
    ParameterInvalid,
    checked_export,
    checked_page,
    csv_response,
    pool_admin_required,
)

STATEMENTS_PER_PAGE = 50
LINES_PER_PAGE = 100


MONTH_FORMAT = "a month YYYY-MM (2026-11)"


def _month(text: str | None, *, back: str = "") -> date:
    """The month a cost page shows: ``YYYY-MM`` within the portal's dates (2000–2100); absent
    or empty, last month. Text that is no month (``2026-13``, ``junk``) raises
    :class:`ParameterInvalid` naming ``month`` (a 400 page, as the calendars' ``?month=``); a
    month outside the dates is a 404 (there are no statements outside, and year 1 has no month
    before it to link to). ``back``: the page to offer instead when ``text`` came in the path
    (the month in progress's page), empty for the query's ``?month=``."""
    if not text:
        return previous_month(month_of(timezone.now(), billing_zone()))
    try:
        year, month = (int(p) for p in text.split("-"))
        first = date(year, month, 1)
    except ValueError:
        if back:
            raise ParameterInvalid(
                "month", MONTH_FORMAT, path_value=text, back=back, back_text="This month's page"
            ) from None
        raise ParameterInvalid("month", MONTH_FORMAT) from None
    if not date_in_range(first):
        raise Http404(DATE_RANGE_MESSAGE)
    return first


def _month_instant(month: date) -> datetime:
    """The instant whose budgets a cost page of ``month`` shows: now for the month in progress,
    else the month's last microsecond (billing zone), so a budget that started in the month
    counts and one that starts after it does not."""
    now = timezone.now()
    end = local_midnight(next_month(month), billing_zone()) - timedelta(microseconds=1)
    return min(now, end) if month <= month_of(now, billing_zone()) else end


def _this_month_url(name: str, *args) -> str:
    """The address of cost page ``name`` for the month in progress (``args`` before it)."""
    return reverse(name, args=[*args, f"{month_of(timezone.now(), billing_zone()):%Y-%m}"])


def _chart(items, label):
    return {
        "labels": [i["label"] for i in items],
        "datasets": [{"label": label, "data": [float(i["amount"]) for i in items]}],
    }


SO_FAR_COLOURS = ("rgba(54, 162, 235, 0.5)", "rgba(54, 162, 235, 0.15)")
"""A trend bar's fill: a statement's, then the month in progress's so far (paler: not a
statement). The first is Chart.js's own first colour (its Colors plugin), which it stops
giving once a dataset names colours."""


def _trend_chart(trend: list[dict], so_far: Decimal | None) -> dict:
    """The 12-month chart of ``trend`` (:func:`billing.selectors.month_trend`); with
    ``so_far`` (the month in progress's total so far, it has no statement yet) its last bar is
    that amount, labelled "YYYY-MM so far" and drawn paler."""
    items = [{"label": f"{t['month']:%Y-%m}", "amount": t["total"]} for t in trend]
    if so_far is not None and items:
        items[-1] = {"label": f"{items[-1]['label']} so far", "amount": so_far}
    chart = _chart(items, "Total")
    if so_far is not None and items:
        fills = [SO_FAR_COLOURS[0]] * (len(items) - 1) + [SO_FAR_COLOURS[1]]
        chart["datasets"][0].update(
            backgroundColor=fills, borderColor="rgb(54, 162, 235)", borderWidth=1
        )
    return chart


def _charts_empty(**charts) -> dict[str, bool]:
    """Per chart, whether it has nothing to draw (no bar, or every bar 0): the page writes a
    sentence instead of empty axes."""
    return {
        name: not any(v for v in chart["datasets"][0]["data"]) for name, chart in charts.items()
    }


TEAM_MONTH_EXPORTS = ("csv", "focus", "showback", "pdf", "top")
FINANCE_MONTH_EXPORTS = ("csv", "focus", "statements", "idle", "top", "shared")


@login_required
def costs_index(request):
    """Staff land on the finance page; members on their first team's month. The query string
    other than ``month`` goes along (``/costs/?export=csv`` is that month's statement CSV);
    ``?export=`` for a user in no team is a 400 in plain text (there is no table)."""
    month = _month(request.GET.get("month"))
    params = request.GET.copy()
    params.pop("month", None)
    query = f"?{params.urlencode()}" if params else ""
    if may_see_all_costs(request.user):
        return redirect(reverse("billing:finance-month", args=[f"{month:%Y-%m}"]) + query)
    team = team_list(user=request.user).first()
    if team is None:
        if "export" in request.GET:
            return HttpResponse(
                "You are in no team, so there is no cost table to export.\n",
                status=400,
                content_type="text/plain; charset=utf-8",
            )
        return render(request, "billing/no_team.html")
    return redirect(reverse("billing:team-month", args=[team.slug, f"{month:%Y-%m}"]) + query)


def _mark_ambiguous_time(lines: list, statement) -> None:
    """Put each ``ambiguous_time`` warning of the statement on the usage line it is part of
    (same GPU model and basis, the statement's own month) as ``line.ambiguous``."""
    for line in lines:
        line.ambiguous = ambiguous_time_of(line, statement)


@login_required
def team_month(request, team: str, month: str):
    team_obj = get_object_or_404(Team, slug=team)
    if not may_see_costs(request.user, team_obj):
        raise Http404("No such team.")
    month_d = _month(month, back=_this_month_url("billing:team-month", team_obj.slug))
    export = checked_export(request, TEAM_MONTH_EXPORTS)
    statement = (
        selectors.statement_list(user=request.user).filter(team=team_obj, month=month_d).first()
    )
    lines = list(selectors.statement_lines(statement=statement)) if statement else []
    # the month in progress has no statement until it closes: show what it would hold now
    in_progress = statement is None and month_d == month_of(timezone.now(), billing_zone())
    preview = None
    if in_progress:
        preview, lines = statement_preview(team=team_obj, month=month_d)
    _mark_ambiguous_time(lines, statement or preview)
    if export == "top":
        rows = selectors.top_allocations(month=month_d, team=team_obj)
        return _top_allocations_response(month_d, rows, f"top-allocations-{team}-{month}.csv")
    if export == "csv" and preview is not None:
        response = HttpResponse(
            statements_csv([preview], lines_of={lines_key(preview): lines}),
            content_type="text/csv; charset=utf-8",
        )
        response["Content-Disposition"] = f'attachment; filename="so-far-{team}-{month}.csv"'
        return response
    if export and statement is None:
        raise Http404("No statement for this month.")
    if export == "csv":
        response = HttpResponse(statements_csv([statement]), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="statement-{team}-{month}.csv"'
        return response
    if export == "focus":
        return _focus_response([statement], f"focus-{team}-{month}.csv")
    if export == "showback":
        response = HttpResponse(showback_csv(statement), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="showback-{team}-{month}.csv"'
        return response
    if export == "pdf":
        response = HttpResponse(statement_pdf(statement), content_type="application/pdf")
        response["Content-Disposition"] = f'attachment; filename="statement-{team}-{month}.pdf"'
        return response
    trend = selectors.month_trend(team=team_obj, month=month_d)
    by_model = selectors.cost_by_gpu_model(lines)
    context = {
        "team": team_obj,
        "month": month_d,
        "prev": previous_month(month_d),
        "next": next_month(month_d),
        "statement": statement,
        "preview": preview,
        "lines": lines,
        # reserved and used lines of one GPU model read as a double charge unless told apart
        "used_lines": any(line.basis == ChargeBasis.USED for line in lines),
        "top_allocations": selectors.top_allocations(month=month_d, team=team_obj),
        "showback": team_showback(team_id=team_obj.pk, month=month_d) if statement else [],
        "trend_chart": _trend_chart(trend, preview.total_amount if preview else None),
        "model_chart": _chart(by_model, "Cost"),
        "team_links": _team_links(request.user, team_obj, month_d),
        "budget_banner": team_budget_banner(team_id=team_obj.pk, at=_month_instant(month_d)),
        "currency": (statement or preview).currency if statement or preview else None,
    }
    context["charts_empty"] = _charts_empty(
        trend=context["trend_chart"], model=context["model_chart"]
    )
    return render(request, "billing/team_month.html", context)


def _focus_response(statements, filename: str) -> HttpResponse:
    """The statements as a FOCUS 1.2 CSV download (:mod:`billing.focus`)."""
    response = HttpResponse(focus_csv(statements), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _top_allocations_response(month: date, rows, filename: str) -> HttpResponse:
    """The page's top allocations as a CSV (:func:`billing.reports.top_allocations_csv`)."""
    response = HttpResponse(
        top_allocations_csv(month, rows), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _team_links(user, current: Team, month: date) -> str:
    """Links (each led by " · ") to the same month of the other teams the user is a member of.
    Pool admins reach every team from the finance month (paged), not from 1,600 links here."""
    marker = "team-slug-placeholder"
    href = reverse("billing:team-month", args=[marker, f"{month:%Y-%m}"])
    others = member_team_list(user=user).exclude(pk=current.pk).order_by("name", "pk")
    return format_html_join(
        "", ' · <a href="{}">{}</a>', ((href.replace(marker, t.slug), t.name) for t in others)
    )


# The finance month's Statements table as CSV (every statement of the month, in the page's
# order, not one page): amounts to the currency's minor unit (3.00 EUR, 300 JPY), as shown.
STATEMENT_COLUMNS = (
    Column("team", lambda s: s.team.slug),
    Column("team_name", lambda s: s.team.name),
    Column("cost_centre", lambda s: s.cost_centre),
    Column("status", lambda s: s.status),
    Column("currency", lambda s: s.currency),
    *(
        Column(name, lambda s, name=name: round_money(getattr(s, name), s.currency))
        for name in ("usage_amount", "adjustment_amount", "total_amount")
    ),
)


@pool_admin_required
def finance_month(request, month: str):
    month_d = _month(month, back=_this_month_url("billing:finance-month"))
    export = checked_export(request, FINANCE_MONTH_EXPORTS)
    data = selectors.finance_month(month=month_d)
    # the month in progress has no statements until it closes: show what they would hold now
    previews = None
    if data["statement_count"] == 0 and month_d == month_of(timezone.now(), billing_zone()):
        previews = statements_preview_month(month=month_d)
        data = selectors.finance_month_so_far(previews)
    prefix = "so-far-" if previews is not None else ""
    if export == "csv":
        lines_of = None if previews is None else {lines_key(s): ls for s, ls in previews}
        response = HttpResponse(
            statements_csv(data["statements"], lines_of=lines_of),
            content_type="text/csv; charset=utf-8",
        )
        response["Content-Disposition"] = f'attachment; filename="{prefix}statements-{month}.csv"'
        return response
    if export == "focus":
        # FOCUS rows are billed charges: none before the month closes (the page links none)
        return _focus_response([] if previews else data["statements"], f"focus-{month}.csv")
    if export == "statements":
        return csv_response(
            data["statements"], STATEMENT_COLUMNS, f"{prefix}statements-{month}.csv"
        )
    if export == "idle":
        idle_csv = idle_costs_csv(month_d, selectors.pool_idle_costs(month=month_d))
        response = HttpResponse(idle_csv, content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="idle-cost-{month}.csv"'
        return response
    if export == "top":
        rows = selectors.top_allocations(month=month_d)
        return _top_allocations_response(month_d, rows, f"top-allocations-{month}.csv")
    shared_cards, shared_currency = selectors.shared_card_idle(month=month_d)
    if export == "shared":
        response = HttpResponse(
            shared_cards_csv(month_d, shared_cards, shared_currency),
            content_type="text/csv; charset=utf-8",
        )
        response["Content-Disposition"] = f'attachment; filename="shared-cards-{month}.csv"'
        return response
    trend = selectors.month_trend(team=None, month=month_d)
    # a person pages through a month's statements and lines; the sums above cover all
    pages = Paginator(data["statements"], STATEMENTS_PER_PAGE)
    line_pages = Paginator(data["lines"], LINES_PER_PAGE)
    # counted with the month's sums (kept per statements' generation), not counted again here
    pages.count, line_pages.count = data["statement_count"], data["line_count"]
    trend_chart = _trend_chart(trend, data["total"] if previews is not None else None)
    team_chart, model_chart = _chart(data["by_team"], "Cost"), _chart(data["by_gpu_model"], "Cost")
    statements = checked_page(request, pages)
    marker = "team-slug-placeholder"  # one reverse() for the page, not two per row
    href = reverse("billing:team-month", args=[marker, month])
    for s in statements:
        s.month_url = href.replace(marker, s.team.slug)
    context = {
        **data,
        "statements": statements,
        "lines": checked_page(request, line_pages, param="lines_page"),
        "month": month_d,
        "prev": previous_month(month_d),
        "next": next_month(month_d),
        "idle": selectors.pool_idle_costs(month=month_d),
        "shared_cards": shared_cards,
        "shared_currency": shared_currency,
        "top_allocations": selectors.top_allocations(month=month_d),
        "so_far": previews is not None,
        "trend_chart": trend_chart,
        "team_chart": team_chart,
        "model_chart": model_chart,
        "charts_empty": _charts_empty(trend=trend_chart, team=team_chart, model=model_chart),
    }
    return render(request, "billing/finance_month.html", context)
