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
from pools.elastic.selectors import borrowed_cards_by_team, elastic_cards_by_allocation
from pools.reclamation.card_timeline import card_changes, card_pieces
from pools.tenancy import selectors as tenancy_selectors
from pools.tenancy.roles import is_pool_admin
from pools.web.csv_numbers import plain_number
from pools.web.numbers import CARD_HOUR_PLACES
from pools.web.pages import Column, UrlOfId, checked_export, checked_page, csv_response, minute_text

MY_TEAMS_PAGE_SIZE = 50  # teams, and allocations, per page of "My teams"
MY_TEAMS_RECENT_REQUESTS = 20  # the newest requests under the allocations

MY_ALLOCATION_COLUMNS = [
    Column("allocation", lambda r: r["allocation"].pk),
    Column("team", lambda r: r["allocation"].team.slug),
    Column("pool", lambda r: r["allocation"].pool.slug),
    Column("gpu_model", lambda r: r["allocation"].gpu_model.slug),
    Column("cards", lambda r: r["cards"]),
    Column("elastic_floor", lambda r: r["allocation"].card_count if r["elastic"] else None),
    Column("elastic_ceiling", lambda r: r["ceiling"]),
    Column("mig_profile", lambda r: r["allocation"].mig_profile),
    Column("status", lambda r: r["allocation"].status),
    Column("starts_at", lambda r: r["allocation"].starts_at.isoformat()),
    Column("ends_at", lambda r: r["allocation"].ends_at.isoformat()),
    Column("held_card_hours", lambda r: plain_number(r["held_card_hours"], CARD_HOUR_PLACES)),
    Column("window_card_hours", lambda r: plain_number(r["window_card_hours"], CARD_HOUR_PLACES)),
]
MY_REQUEST_COLUMNS = [
    Column("request", lambda r: r.pk),
    Column("team", lambda r: r.team.slug),
    Column("workload_kind", lambda r: r.workload_kind),
    Column("pool", lambda r: r.pool.slug if r.pool_id else None),
    Column("gpu_model", lambda r: r.gpu_model.slug if r.gpu_model_id else None),
    Column("min_memory_gib", lambda r: r.min_memory_gib),
    Column("cards", lambda r: r.card_count),
    Column("status", lambda r: r.status),
    Column("starts_at", lambda r: r.starts_at.isoformat()),
    Column("ends_at", lambda r: r.ends_at.isoformat()),
    Column("created_at", lambda r: r.created_at.isoformat()),
]


def landing(request):
    """Where sign-in leads (``LOGIN_REDIRECT_URL``, also after single sign-on): pool admins to
    *Fleet*, the page they run the pool from; members to *My teams*, the page that serves them."""
    return redirect("pools:fleet-overview" if is_pool_admin(request.user) else "pools:my-teams")


def my_teams(request):
    """The user's teams: the cards each holds now (allocations' cards plus what elastic ones
    borrowed above their floors), allocations with time left, usage so far, recent requests.
    Teams and allocations are paged (a pool admin sees every team). ``?export=allocations``:
    every allocation of the table as CSV (:data:`MY_ALLOCATION_COLUMNS`, same order);
    ``?export=requests``: the recent requests' (:data:`MY_REQUEST_COLUMNS`)."""
    export = checked_export(request, ("allocations", "requests"))
    if export == "allocations":
        holding = (
            capacity_selectors.allocation_list(user=request.user)
            .holding()
            .order_by("ends_at", "pk")
        )
        rows = _allocation_rows(list(holding), timezone.now())
        return csv_response(rows, MY_ALLOCATION_COLUMNS, "my-allocations.csv")
    if export == "requests":
        recent = capacity_selectors.capacity_request_list(
            user=request.user, decider=False
        ).order_by("-created_at", "-pk")[:MY_TEAMS_RECENT_REQUESTS]
        return csv_response(recent, MY_REQUEST_COLUMNS, "my-recent-requests.csv")
    team_page = checked_page(
        request,
        Paginator(
            tenancy_selectors.team_list(user=request.user).order_by("name", "pk"),
            MY_TEAMS_PAGE_SIZE,
        ),
        param="teams_page",
    )
    teams = list(team_page.object_list)
    now = timezone.now()
    # The selectors already keep to the user's teams (every team for a pool admin).
    holding = (
        capacity_selectors.allocation_list(user=request.user, names_only=True)
        .holding()
        .order_by("ends_at", "pk")
    )
    page = checked_page(request, Paginator(holding, MY_TEAMS_PAGE_SIZE))
    recent = capacity_selectors.capacity_request_list(user=request.user, decider=False).order_by(
        "-created_at", "-pk"
    )
    requests = recent[:MY_TEAMS_RECENT_REQUESTS]
    held = team_usage(team_ids=[t.pk for t in teams], at=now)
    borrowed = borrowed_cards_by_team(team_ids=[t.pk for t in teams], now=now)
    for team_id, cards in borrowed.items():  # the floors are in ``held`` already
        held[team_id] += cards
    rows = _allocation_rows(list(page.object_list), now)
    # Team links written once here, not by {% url %} per team.
    marker = "team-slug-placeholder"
    team_href = reverse("team-dashboard", args=[marker])
    for team in teams:
        team.dashboard_url = team_href.replace(marker, team.slug)
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


def _allocation_rows(allocations: list, now) -> list[dict]:
    """The allocations table's rows: each allocation with the cards it holds now (an elastic
    one's ``cards_held``, between its floor ``card_count`` and its ``ceiling``; others their
    ``card_count``), time left, card-hours held so far and in its whole window, both with the
    cards held at each moment (a reclamation's shrink or undo:
    :mod:`pools.reclamation.card_timeline`, as the reservation import charges them; the latest
    ``card_count`` from then on), progress (%), link and window text."""
    changes = card_changes(a.pk for a in allocations)
    elastic = elastic_cards_by_allocation(allocation_ids=[a.pk for a in allocations])
    detail_url = UrlOfId("pools:request-detail")
    rows = []
    for allocation in allocations:
        elapsed = max(timedelta(0), min(now, allocation.ends_at) - allocation.starts_at)
        total = allocation.ends_at - allocation.starts_at
        pieces = card_pieces(allocation, changes.get(allocation.pk, ()))
        held_so_far = sum(
            (card_hours(piece.cards, piece.start, min(piece.end, now)) for piece in pieces),
            Decimal(0),
        )
        window = sum(
            (card_hours(piece.cards, piece.start, piece.end) for piece in pieces), Decimal(0)
        )
        cards, ceiling = elastic.get(allocation.pk, (allocation.card_count, None))
        rows.append(
            {
                "allocation": allocation,
                "cards": cards,
                "elastic": allocation.pk in elastic,
                "ceiling": ceiling,
                "time_left": allocation.ends_at - now if allocation.ends_at > now else None,
                "held_card_hours": held_so_far,
                "window_card_hours": window,
                "progress": round(100 * elapsed / total) if total else 0,
                "url": detail_url(allocation.request_id),
                "window": f"{minute_text(allocation.starts_at)} → "
                f"{minute_text(allocation.ends_at)}",
            }
        )
    return rows


def _costs_so_far(team_ids: list[int], now) -> dict:
    """Team id -> this month's cost so far and forecast, from the function
    ``settings.TEAM_COSTS_SO_FAR`` names (billing's, through the statements' own pricing path;
    pools do not import billing); ``{}`` without one."""
    provider = getattr(settings, "TEAM_COSTS_SO_FAR", "")
    return import_string(provider)(team_ids=team_ids, now=now) if provider and team_ids else {}
