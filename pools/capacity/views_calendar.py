"""``/teams/<slug>/calendar.ics``: the team's allocations and recurring reservations as an
iCalendar feed (:mod:`pools.capacity.calendar_ics`). Members, managers and pool admins; any
other user gets the 404 the team's pages give."""

from __future__ import annotations

from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone
from django.views.decorators.http import require_GET

from pools.capacity import selectors as capacity_selectors
from pools.capacity.calendar_ics import team_calendar
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
