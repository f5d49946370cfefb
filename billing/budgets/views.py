"""Budget pages: the budgets of the caller's teams with the period's burn-down, CSV export,
and the banner the team's pages show from 80 % used."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_POST

from billing.budgets.filtersets import BudgetFilterSet
from billing.budgets.forms import BudgetForm
from billing.budgets.models import Budget
from billing.budgets.selectors import BudgetStatus, budget_list, budget_statuses
from billing.budgets.services import (
    BUDGETS_ADMIN_ONLY,
    budget_create,
    budget_delete,
    budget_update,
)
from billing.conf import billing_zone
from billing.pricing import local_midnight, next_month, round_money
from pools.common.errors import DomainError
from pools.tenancy.permissions import may_administer_pools
from pools.web.pages import (
    Column,
    checked_export,
    checked_page,
    csv_response,
    filter_refusal,
    form_add_domain_errors,
    refuse_export,
)

BUDGETS_PER_PAGE = 50


def _hours(dimension) -> Decimal | None:
    """Card-hours to 3 places (the limit's own precision) for the CSV; None when unknown."""
    if dimension is None or dimension.used is None:
        return None
    return dimension.used.quantize(Decimal("0.001"))


def _money(dimension) -> Decimal | None:
    """Money used, to the currency's minor unit as pages and the other CSVs write money
    (:func:`billing.pricing.round_money`, the currency in its own column); None when unknown."""
    if dimension is None or dimension.used is None:
        return None
    return round_money(dimension.used, dimension.unit)


def _money_limit(dimension) -> Decimal | None:
    """The money limit as :func:`_money` writes money: the column keeps 4 decimals
    (``1234.5000``), the page shows ``1 234.50 EUR``; None without a money limit."""
    return None if dimension is None else round_money(dimension.limit, dimension.unit)


CSV_COLUMNS = [
    Column("team", lambda s: s.budget.team.slug if s.budget.team_id else ""),
    Column("cost_centre", lambda s: s.budget.cost_centre),
    Column("pool", lambda s: s.budget.pool.slug if s.budget.pool_id else None),
    Column("gpu_model", lambda s: s.budget.gpu_model.slug if s.budget.gpu_model_id else None),
    Column("period", lambda s: s.budget.period),
    Column("period_start", lambda s: s.period.isoformat()),
    Column("enforcement", lambda s: s.budget.enforcement),
    Column("card_hours_limit", lambda s: s.card_hours.limit if s.card_hours else None),
    Column("card_hours_used", lambda s: _hours(s.card_hours)),
    Column("money_limit", lambda s: _money_limit(s.money)),
    Column("money_used", lambda s: _money(s.money)),
    Column("currency", lambda s: s.budget.currency or None),
    Column("percent", lambda s: s.percent),
    Column("alert", lambda s: s.alert),
    Column("run_out_at", lambda s: s.run_out_at.isoformat() if s.run_out_at else None),
]


def _days(status: BudgetStatus, at: datetime) -> float:
    return round((at - status.starts_at).total_seconds() / 86400, 2)


def burn_down(status: BudgetStatus, now: datetime) -> dict:
    """Chart.js data for one budget (card-hours when it has that limit, else money): what is
    left at the period start, at each month end passed and now; the even burn from the limit
    to 0 at the period end; and the forecast from now to the run-out. x: days into the
    period (real days: 86,400 s)."""
    dimension = status.card_hours or status.money
    column = 1 if status.card_hours else 2  # of the (month, card-hours, money) rows
    zone = billing_zone()
    left, points = dimension.limit, [{"x": 0, "y": float(dimension.limit)}]
    for row in status.months:
        if row[column] is None:
            break
        left -= row[column]
        at = min(local_midnight(next_month(row[0]), zone), now, status.ends_at)
        points.append({"x": _days(status, at), "y": float(left)})
    sets = [
        {"label": "left", "data": points},
        {"label": "even burn", "data": [{"x": 0, "y": float(dimension.limit)},
                                        {"x": _days(status, status.ends_at), "y": 0}]},
    ]  # fmt: skip
    if status.run_out_at is not None and dimension.remaining is not None:
        sets.append({"label": "forecast", "data": [
            {"x": _days(status, min(now, status.ends_at)), "y": float(dimension.remaining)},
            {"x": _days(status, status.run_out_at), "y": 0},
        ]})  # fmt: skip
    return {"unit": dimension.unit, "days": _days(status, status.ends_at), "datasets": sets}


@login_required
def budget_list_page(request):
    """``/costs/budgets/``: filter by team, pool, GPU model, period, enforcement (the API's
    FilterSet); ``?budget=<id>`` picks the budget charted (default: the fullest on the page);
    ``?export=csv`` every filtered budget with its figures. A filter it cannot use (a team
    the user may not see) is a 400: the page with the error and no rows, the CSV
    :func:`pools.web.pages.refuse_export`."""
    export = checked_export(request)
    now = timezone.now()
    filterset = BudgetFilterSet(
        request.GET or None, queryset=budget_list(user=request.user), request=request
    )
    refused = filterset.is_bound and not filterset.is_valid()
    # An invalid filter (a team the user may not see) is a 400 over no rows, never every budget.
    rows = filterset.queryset.none() if refused else filterset.qs
    rows = rows.order_by("team__name", "cost_centre", "period", "pk")
    if export and refused:
        refuse_export(request, filterset.form)  # htmx: the page says why, as without export
    elif export == "csv":
        statuses = budget_statuses(rows, now=now)
        return csv_response(statuses.values(), CSV_COLUMNS, "budgets.csv")
    page = checked_page(request, Paginator(rows, BUDGETS_PER_PAGE), refused=refused)
    statuses = budget_statuses(page.object_list, now=now)
    chosen = statuses.get(_int(request.GET.get("budget")))
    if chosen is None and statuses:
        chosen = max(statuses.values(), key=lambda s: s.percent or Decimal(-1))
    query = request.GET.copy()
    query.pop("page", None)
    query.pop("budget", None)
    context = {
        "filterset": filterset,
        "refusal": filter_refusal(filterset.form) if refused else "",
        "page": page,
        "statuses": [statuses[b.pk] for b in page.object_list],
        "chosen": chosen,
        "chart": burn_down(chosen, now) if chosen else None,
        "query": query.urlencode(),
        "now": now,
        "can_edit": may_administer_pools(request.user),
    }
    response = render(request, "billing/budgets/list.html", context, status=400 if refused else 200)
    patch_vary_headers(response, ["HX-Request"])
    return response


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        return None


def _budget_form(request, budget: Budget | None):
    """The create / edit page: pool admins only (others: 403); the service decides, and its
    field errors go next to the fields with nothing written."""
    if not may_administer_pools(request.user):
        raise PermissionDenied(BUDGETS_ADMIN_ONLY)
    form = BudgetForm(request.POST or None, budget=budget)
    if request.method == "POST" and form.is_valid():
        try:
            if budget is None:
                budget = budget_create(actor=request.user, **form.cleaned_data)
            else:
                budget = budget_update(budget=budget, actor=request.user, **form.cleaned_data)
        except DomainError as exc:
            form_add_domain_errors(form, exc)
        else:
            messages.success(request, f"Saved: {budget}.")
            return redirect(f"{reverse('billing:budget-list')}?budget={budget.pk}")
    return render(request, "billing/budgets/form.html", {"form": form, "budget": budget})


@login_required
def budget_create_page(request):
    """``/costs/budgets/new/``: a new budget (pool admins)."""
    return _budget_form(request, None)


@login_required
def budget_edit_page(request, pk: int):
    """``/costs/budgets/<id>/edit/``: change a budget (pool admins); it has the delete button."""
    return _budget_form(request, get_object_or_404(budget_list(user=request.user), pk=pk))


@login_required
@require_POST
def budget_delete_page(request, pk: int):
    """``POST /costs/budgets/<id>/delete/`` (the button asks first): pool admins."""
    if not may_administer_pools(request.user):
        raise PermissionDenied("Only pool admins delete budgets.")
    budget = get_object_or_404(budget_list(user=request.user), pk=pk)
    label = str(budget)
    budget_delete(budget=budget, actor=request.user)
    messages.success(request, f"Deleted: {label}.")
    return redirect("billing:budget-list")
