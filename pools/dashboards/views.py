"""Overview pages that read several sub-domains: *My teams* (a member's allocations, the cards
they held so far after any reclamation, and recent requests), and where sign-in lands."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.module_loading import import_string

from pools.capacity import selectors as capacity_selectors
from pools.capacity.arithmetic import card_hours
from pools.capacity.availability import (
    team_usage,
)
from pools.elastic.selectors import borrowed_cards_by_team
from pools.reclamation.card_timeline import card_changes, card_pieces
from pools.tenancy import selectors as tenancy_selectors
from pools.tenancy.roles import is_pool_admin
from pools.web.pages import UrlOfId, minute_text

MY_TEAMS_PAGE_SIZE = 50  # teams, and allocations, per page of "My teams"


def landing(request):
    """Where sign-in leads (``LOGIN_REDIRECT_URL``, also after single sign-on): pool admins to
    *Fleet*, the page they run the pool from; members to *My teams*, the page that serves them."""
    return redirect("pools:fleet-overview" if is_pool_admin(request.user) else "pools:my-teams")


def my_teams(request):
    """The user's teams: the cards each holds now (allocations' cards plus what elastic ones
    borrowed above their floors), allocations with time left, usage so far, recent requests.
    Teams and allocations are paged (a pool admin sees every team)."""
    team_page = Paginator(
        tenancy_selectors.team_list(user=request.user).order_by("name", "pk"), MY_TEAMS_PAGE_SIZE
    ).get_page(request.GET.get("teams_page"))
    teams = list(team_page.object_list)
    now = timezone.now()
    # The selectors already keep to the user's teams (every team for a pool admin).
    holding = (
        capacity_selectors.allocation_list(user=request.user, names_only=True)
        .holding()
        .order_by("ends_at", "pk")
    )
    page = Paginator(holding, MY_TEAMS_PAGE_SIZE).get_page(request.GET.get("page"))
    recent = capacity_selectors.capacity_request_list(user=request.user).order_by(
        "-created_at", "-pk"
    )
    requests = recent[:20]
    held = team_usage(team_ids=[t.pk for t in teams], at=now)
    borrowed = borrowed_cards_by_team(team_ids=[t.pk for t in teams], now=now)
    for team_id, cards in borrowed.items():  # the floors are in ``held`` already
        held[team_id] += cards
    allocations = list(page.object_list)
    allocations = list(allocations)
    changes = card_changes(a.pk for a in allocations)
    # Links and windows written once here, not by {% url %} and date filters per row.
    marker = "team-slug-placeholder"
    team_href = reverse("team-dashboard", args=[marker])
    for team in teams:
        team.dashboard_url = team_href.replace(marker, team.slug)
    detail_url = UrlOfId("pools:request-detail")
    rows = []
    for allocation in allocations:
        elapsed = max(timedelta(0), min(now, allocation.ends_at) - allocation.starts_at)
        total = allocation.ends_at - allocation.starts_at
        held_so_far = sum(
            (
                card_hours(piece.cards, piece.start, min(piece.end, now))
                for piece in card_pieces(allocation, changes.get(allocation.pk, ()))
            ),
            Decimal(0),
        )
        rows.append(
            {
                "allocation": allocation,
                "time_left": allocation.ends_at - now if allocation.ends_at > now else None,
                "held_card_hours": held_so_far,
                "window_card_hours": card_hours(
                    allocation.card_count, allocation.starts_at, allocation.ends_at
                ),
                "progress": round(100 * elapsed / total) if total else 0,
                "url": detail_url(allocation.request_id),
                "window": f"{minute_text(allocation.starts_at)} → "
                f"{minute_text(allocation.ends_at)}",
            }
        )
    return render(
        request,
        "pools/requests/my_teams.html",
        {
            "teams": teams,
            "team_page": team_page,
            "page": page,
            "rows": rows,
            "requests": requests,
            "held": held,
            "borrowed": borrowed,
            "costs": _costs_so_far([t.pk for t in teams], now),
            "now": now,
        },
    )


def _costs_so_far(team_ids: list[int], now) -> dict:
    """Team id -> this month's cost so far and forecast, from the function
    ``settings.TEAM_COSTS_SO_FAR`` names (billing's, through the statements' own pricing path;
    pools do not import billing); ``{}`` without one."""
    provider = getattr(settings, "TEAM_COSTS_SO_FAR", "")
    return import_string(provider)(team_ids=team_ids, now=now) if provider and team_ids else {}
