"""The *Waiting work* page of a team: its pending Slurm jobs and not-admitted Kueue workloads
with why, as last read by the refresh task (never fetched here); the table refreshes itself
every minute through htmx, and each view keeps the task reading (the watch)."""

from __future__ import annotations

from django.http import Http404

from pools.tenancy.models import Team
from pools.waiting import selectors
from pools.waiting.filtersets import TeamPendingWorkFilterSet
from pools.waiting.services import WATCH_WINDOW, waiting_watch_touch
from pools.web.pages import Column, filtered_list


def _iso(value):
    return value.isoformat() if value else None


PENDING_WORK_COLUMNS = [
    Column("scheduler", lambda w: w.scheduler),
    Column("cluster", lambda w: w.cluster.slug if w.cluster else ""),
    Column("ref", lambda w: w.ref),
    Column("name", lambda w: w.name),
    Column("user", lambda w: w.user),
    Column("queue", lambda w: w.queue),
    Column("gres_type", lambda w: w.gres_type),
    Column("cards_requested", lambda w: w.cards_requested),
    Column("kind", lambda w: w.kind),
    Column("translated", lambda w: w.translated),
    Column("explanation", lambda w: w.explanation),
    Column("reason_code", lambda w: w.reason_code),
    Column("reason_message", lambda w: w.reason_message),
    Column("submitted_at", lambda w: _iso(w.submitted_at)),
    Column("expected_start_at", lambda w: _iso(w.expected_start_at)),
    Column("read_at", lambda w: _iso(w.read_at)),
]


def waiting_work(request, slug: str):
    """``/teams/<slug>/waiting/``: a team the user cannot see is a 404 like the team itself."""
    team = Team.objects.visible_to(request.user).filter(slug=slug).first()
    if team is None:
        raise Http404("No such team.")
    waiting_watch_touch(team=team)
    return filtered_list(
        request,
        queryset=selectors.pending_work_list(user=request.user).filter(team=team),
        filterset_class=TeamPendingWorkFilterSet,
        template="pools/waiting/list.html",
        columns=PENDING_WORK_COLUMNS,
        filename=f"waiting-{team.slug}.csv",
        default_ordering=("submitted_at", "ref"),
        extra={
            "team": team,
            "reads": selectors.pending_work_reads(),
            "watch_minutes": int(WATCH_WINDOW.total_seconds() // 60),
        },
    )
