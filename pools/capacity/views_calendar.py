"""Calendars: ``/teams/<slug>/calendar.ics``, the team's allocations and recurring
reservations as an iCalendar feed (:mod:`pools.capacity.calendar_ics`), for members, managers
and pool admins (anyone else gets the 404 the team's pages give); and
``/pools/<pool>/<model>/calendar/?week=YYYY-Www``, a pool × GPU model's week
(:mod:`pools.capacity.calendar_week`) for anyone signed in, other teams' names hidden as on the
timeline, or with ``?month=YYYY-MM`` its month (:mod:`pools.capacity.calendar_month`: free cards
and the count of what holds cards per day, no team named)."""

from __future__ import annotations

from datetime import timedelta

from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.views.decorators.http import require_GET

from pools.capacity import selectors as capacity_selectors
from pools.capacity.arithmetic import usable_cards
from pools.capacity.availability import schedulable_cards
from pools.capacity.calendar_ics import team_calendar
from pools.capacity.calendar_month import (
    month_days,
    month_first,
    month_grid,
    month_name,
    next_month,
    previous_month,
)
from pools.capacity.calendar_week import week_days, week_monday, week_name
from pools.inventory.models import GpuModel, Pool
from pools.tenancy.models import Team
from pools.tenancy.permissions import may_see_team


@require_GET
def team_calendar_ics(request, slug: str):
    team = get_object_or_404(Team, slug=slug)
    if not may_see_team(request.user, team):
        raise Http404("No such team.")  # never say whether another team exists
    now = timezone.now()
    allocations, recurring = capacity_selectors.team_calendar_entries(team_id=team.pk, now=now)
    host = request.get_host().split(":")[0]
    body = team_calendar(team, allocations, recurring, host=host, now=now)
    response = HttpResponse(body, content_type="text/calendar; charset=utf-8")
    response["Content-Disposition"] = f'inline; filename="{team.slug}.ics"'
    return response


@require_GET
def pool_calendar(request, pool: str, model: str):
    pool_obj = get_object_or_404(Pool, slug=pool)
    gpu_model = get_object_or_404(GpuModel, slug=model)
    if "month" in request.GET:
        return _pool_month(request, pool_obj, gpu_model)
    monday = week_monday(request.GET.get("week"), timezone.localdate())
    team_names = dict(Team.objects.visible_to(request.user).values_list("pk", "name"))
    days = week_days(pool=pool_obj, gpu_model=gpu_model, monday=monday, team_names=team_names)
    holds = {(h.kind, h.ref, h.starts_at): h for d in days for h in d.holds}
    context = {
        "pool": pool_obj,
        "gpu_model": gpu_model,
        "week": week_name(monday),
        "monday": monday,
        "sunday": monday + timedelta(days=6),
        "previous_week": week_name(monday - timedelta(days=7)),
        "next_week": week_name(monday + timedelta(days=7)),
        "month": month_name(monday.replace(day=1)),
        "usable": _usable(pool_obj, gpu_model),
        "days": days,
        "time_zone": timezone.get_current_timezone_name(),
        "holds": sorted(holds.values(), key=lambda h: (h.starts_at, h.kind, h.ref)),
    }
    return render(request, "pools/requests/pool_calendar.html", context)


def _usable(pool: Pool, gpu_model: GpuModel) -> int:
    return usable_cards(schedulable_cards(pool=pool, gpu_model=gpu_model), pool.overcommit_ratio)


def _pool_month(request, pool: Pool, gpu_model: GpuModel):
    first = month_first(request.GET.get("month"), timezone.localdate())
    days = month_days(pool=pool, gpu_model=gpu_model, first=first)
    context = {
        "pool": pool,
        "gpu_model": gpu_model,
        "month": month_name(first),
        "first": first,
        "previous_month": month_name(previous_month(first)),
        "next_month": month_name(next_month(first)),
        "week": week_name(first),
        "usable": _usable(pool, gpu_model),
        "days": days,
        "grid": month_grid(days),
        "time_zone": timezone.get_current_timezone_name(),
    }
    return render(request, "pools/requests/pool_calendar_month.html", context)
