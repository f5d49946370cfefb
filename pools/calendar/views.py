"""Calendars: ``/teams/<slug>/calendar.ics``, the team's allocations and recurring
reservations as an iCalendar feed (:mod:`pools.calendar.ics`), for members, managers
and pool admins (anyone else gets the 404 the team's pages give); the same feed at the team's
secret link ``/calendar/<token>.ics`` for calendar apps, which have no session (any other token
404, every client address throttled to ``CALENDAR_FEED_THROTTLE_RATE``), shown with its copy
button and reset on ``/teams/<slug>/calendar/``; and
``/pools/<pool>/<model>/calendar/?week=YYYY-Www``, a pool × GPU model's week
(:mod:`pools.calendar.week`) for anyone signed in, other teams' names hidden as on the
timeline, or with ``?month=YYYY-MM`` its month (:mod:`pools.calendar.month`: free cards
and the count of what holds cards per day, no team named); and
``/driver-groups/<branch>/calendar/`` the same week or month across the pools × models a driver
group has cards in (:mod:`pools.calendar.driver`: free cards only). A ``week`` or ``month``
that cannot be read is a 400 page naming the parameter and its format; empty is the current."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from rest_framework.throttling import SimpleRateThrottle

from pools.calendar import selectors as calendar_selectors
from pools.calendar.driver import group_columns, group_days
from pools.calendar.ics import team_calendar
from pools.calendar.month import (
    month_days,
    month_first,
    month_grid,
    month_name,
    next_month,
    previous_month,
)
from pools.calendar.services import (
    team_calendar_feed_create,
    team_calendar_feed_reset,
)
from pools.calendar.week import (
    OTHER_TEAMS,
    local_midnight,
    week_days,
    week_monday,
    week_name,
)
from pools.capacity.arithmetic import usable_cards
from pools.capacity.availability import schedulable_cards
from pools.common.errors import PermissionDenied
from pools.inventory.models import DriverGroup, GpuModel, Pool
from pools.overrides.selectors import override_summary, pool_overrides_over
from pools.tenancy.models import Team
from pools.tenancy.permissions import may_reset_calendar_feed, may_see_team
from pools.web.pages import ParameterInvalid


def _visible_team(request, slug: str) -> Team:
    team = get_object_or_404(Team, slug=slug)
    if not may_see_team(request.user, team):
        raise Http404("No such team.")  # never say whether another team exists
    return team


@require_GET
def team_calendar_ics(request, slug: str):
    return _ics(request, _visible_team(request, slug))


class CalendarFeedThrottle(SimpleRateThrottle):
    """Feed requests per client address (``CALENDAR_FEED_THROTTLE_RATE``, default 60 a
    minute), found or not: a calendar app polls a few times an hour."""

    scope = "calendar_feed"

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


@login_not_required
@require_GET
def calendar_feed(request, token: str):
    throttle = CalendarFeedThrottle()
    if not throttle.allow_request(request, None):
        response = HttpResponse("Too many requests.", status=429, content_type="text/plain")
        response["Retry-After"] = str(int(throttle.wait() or 60))
        return response
    team = calendar_selectors.team_by_feed_token(token)
    if team is None:
        raise Http404("No such calendar.")
    response = _ics(request, team)
    response["X-Robots-Tag"] = "noindex"
    return response


def _ics(request, team: Team) -> HttpResponse:
    now = timezone.now()
    allocations, recurring = calendar_selectors.team_calendar_entries(team_id=team.pk, now=now)
    host = request.get_host().split(":")[0]
    body = team_calendar(team, allocations, recurring, host=host, now=now)
    response = HttpResponse(body, content_type="text/calendar; charset=utf-8")
    response["Content-Disposition"] = f'inline; filename="{team.slug}.ics"'
    return response


@require_GET
def team_calendar_page(request, slug: str):
    """The team's calendar subscription: its secret feed link with a copy button, the reset
    for managers and pool admins, and the download for the signed-in."""
    return _calendar_page(request, _visible_team(request, slug))


def _calendar_page(request, team: Team) -> HttpResponse:
    token = calendar_selectors.team_calendar_feed_token(team_id=team.pk)
    feed_url = (
        request.build_absolute_uri(reverse("pools:calendar-feed", args=[token])) if token else None
    )
    may_reset = may_reset_calendar_feed(request.user, team)
    context = {"team": team, "feed_url": feed_url, "may_reset": may_reset}
    return render(request, "pools/requests/team_calendar.html", context)


@require_POST
def team_calendar_link(request, slug: str, action: str):
    """``create`` (the first link, any member) or ``reset`` (a new one, managers and pool
    admins: the old link answers 404 from now on). Either way back to the team's calendar page
    (post, redirect, get), a refusal said there as an error message."""
    team = _visible_team(request, slug)
    services = {"create": team_calendar_feed_create, "reset": team_calendar_feed_reset}
    if action not in services:
        raise Http404("No such action.")
    try:
        services[action](actor=request.user, team=team)
    except PermissionDenied as exc:  # a member asking for a reset: back to the page, saying why
        messages.error(request, exc.message)
        return redirect("pools:team-calendar", slug=team.slug)  # a reload does not post again
    if action == "reset":
        messages.success(request, "New calendar link made; the old one no longer works.")
    return redirect("pools:team-calendar", slug=team.slug)


@require_GET
def pool_calendar(request, pool: str, model: str):
    pool_obj = get_object_or_404(Pool, slug=pool)
    gpu_model = get_object_or_404(GpuModel, slug=model)
    if "month" in request.GET:
        return _pool_month(request, pool_obj, gpu_model)
    try:
        monday = week_monday(request.GET.get("week"), timezone.localdate())
    except ValueError as exc:
        raise ParameterInvalid("week", str(exc)) from None
    team_names = dict(Team.objects.visible_to(request.user).values_list("pk", "name"))
    days = week_days(pool=pool_obj, gpu_model=gpu_model, monday=monday, team_names=team_names)
    holds = {(h.kind, h.ref, h.starts_at): h for d in days for h in d.holds}
    week_end = local_midnight(monday + timedelta(days=7))
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
        "overrides": _overrides(pool_obj, gpu_model, local_midnight(monday), week_end, team_names),
    }
    return render(request, "pools/requests/pool_calendar.html", context)


def _overrides(pool: Pool, gpu_model: GpuModel, start, end, team_names) -> list[str]:
    """The temporary overrides of the pool × model counting in ``[start, end)``, in words
    (another team's named "other teams", as its holds are)."""
    found = pool_overrides_over(pool_id=pool.pk, gpu_model_id=gpu_model.pk, start=start, end=end)
    return [override_summary(o, team_name=team_names.get(o.team_id, OTHER_TEAMS)) for o in found]


def _usable(pool: Pool, gpu_model: GpuModel) -> int:
    return usable_cards(schedulable_cards(pool=pool, gpu_model=gpu_model), pool.overcommit_ratio)


def _pool_month(request, pool: Pool, gpu_model: GpuModel):
    try:
        first = month_first(request.GET.get("month"), timezone.localdate())
    except ValueError as exc:
        raise ParameterInvalid("month", str(exc)) from None
    days = month_days(pool=pool, gpu_model=gpu_model, first=first)
    team_names = dict(Team.objects.visible_to(request.user).values_list("pk", "name"))
    bounds = (local_midnight(first), local_midnight(next_month(first)))
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
        "overrides": _overrides(pool, gpu_model, *bounds, team_names),
    }
    return render(request, "pools/requests/pool_calendar_month.html", context)


@require_GET
def driver_group_calendar(request, branch: int):
    group = get_object_or_404(DriverGroup, branch=branch)
    columns = group_columns(group)
    today = timezone.localdate()
    context = {
        "group": group,
        "columns": columns,
        "time_zone": timezone.get_current_timezone_name(),
    }
    view = "month" if "month" in request.GET else "week"
    read = month_first if view == "month" else week_monday
    try:
        first = read(request.GET.get(view), today)
    except ValueError as exc:
        raise ParameterInvalid(view, str(exc)) from None
    if view == "month":
        count = (next_month(first) - first).days
        days = group_days(columns=columns, first=first, count=count)
        context |= {
            "view": "month",
            "first": first,
            "month": month_name(first),
            "previous": month_name(previous_month(first)),
            "next": month_name(next_month(first)),
            "week": week_name(first),
            "days": days,
            "grid": month_grid(days),
        }
    else:
        context |= {
            "view": "week",
            "first": first,
            "last": first + timedelta(days=6),
            "week": week_name(first),
            "previous": week_name(first - timedelta(days=7)),
            "next": week_name(first + timedelta(days=7)),
            "month": month_name(first.replace(day=1)),
            "days": group_days(columns=columns, first=first, count=7),
        }
    return render(request, "pools/requests/driver_group_calendar.html", context)
