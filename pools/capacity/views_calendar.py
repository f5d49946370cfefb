"""Calendars: ``/teams/<slug>/calendar.ics``, the team's allocations and recurring
reservations as an iCalendar feed (:mod:`pools.capacity.calendar_ics`), for members, managers
and pool admins (anyone else gets the 404 the team's pages give); and
``/pools/<pool>/<model>/calendar/?week=YYYY-Www``, a pool × GPU model's week
(:mod:`pools.capacity.calendar_week`) for anyone signed in, other teams' names hidden as on the
timeline."""

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
        "usable": usable_cards(
            schedulable_cards(pool=pool_obj, gpu_model=gpu_model), pool_obj.overcommit_ratio
        ),
        "days": days,
        "time_zone": timezone.get_current_timezone_name(),
        "holds": sorted(holds.values(), key=lambda h: (h.starts_at, h.kind, h.ref)),
    }
    return render(request, "pools/requests/pool_calendar.html", context)
