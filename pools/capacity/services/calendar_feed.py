"""A team's secret calendar feed link (issue 32 item 2): made by any member (the first link),
reset by a manager or a pool admin (a new link; the old one answers 404 from then on), each in
one transaction with its audit event. The token itself is never written anywhere, the audit
trail included (:mod:`pools.capacity.calendar_feed`).

Both take the feed row's lock, ``SELECT … FOR UPDATE`` on the team's row first when there is
no feed yet, so two members making the first link at once make one.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from pools.audit.services import audit_event_record
from pools.capacity.calendar_feed import feed_token, new_salt, token_sha256
from pools.capacity.models import TeamCalendarFeed
from pools.common.errors import PermissionDenied
from pools.tenancy.models import Team
from pools.tenancy.permissions import may_reset_calendar_feed, require_member


def _snapshot(feed: TeamCalendarFeed) -> dict[str, Any]:
    return {
        "team": feed.team.slug,
        "created_at": feed.created_at.isoformat(),
        "created_by": feed.created_by.get_username() if feed.created_by else None,
    }


def _fill(feed: TeamCalendarFeed, actor: Any) -> None:
    feed.salt = new_salt()
    feed.token_sha256 = token_sha256(feed_token(feed.salt))
    feed.created_by = actor if getattr(actor, "is_authenticated", False) else None
    feed.created_at = timezone.now()


def _locked_feed(team: Team) -> TeamCalendarFeed | None:
    Team.objects.select_for_update().filter(pk=team.pk).exists()
    return TeamCalendarFeed.objects.select_for_update().filter(team=team).first()


def team_calendar_feed_create(*, actor: Any, team: Team) -> TeamCalendarFeed:
    """The team's feed link, made now if it has none (audited ``team_calendar_feed.created``);
    an existing one is returned as it is. Members, managers, pool admins; anyone else gets
    :class:`pools.common.errors.PermissionDenied`."""
    require_member(actor, team)
    with transaction.atomic():
        feed = _locked_feed(team)
        if feed is not None:
            return feed
        feed = TeamCalendarFeed(team=team)
        _fill(feed, actor)
        feed.save()
        audit_event_record(
            actor=actor, action="team_calendar_feed.created", obj=feed, after=_snapshot(feed)
        )
    return feed


def team_calendar_feed_reset(*, actor: Any, team: Team) -> TeamCalendarFeed:
    """A new link for the team, the old one dead from the commit (audited
    ``team_calendar_feed.reset``, before and after say when and by whom each was made).
    Managers and pool admins; anyone else gets :class:`pools.common.errors.PermissionDenied`,
    nothing written."""
    if not may_reset_calendar_feed(actor, team):
        raise PermissionDenied(
            f"Only a manager of team {team.name} or a pool admin may reset its calendar link.",
            team=team.slug,
        )
    with transaction.atomic():
        feed = _locked_feed(team)
        before = _snapshot(feed) if feed is not None else None
        feed = feed or TeamCalendarFeed(team=team)
        _fill(feed, actor)
        feed.save()
        audit_event_record(
            actor=actor,
            action="team_calendar_feed.reset",
            obj=feed,
            before=before,
            after=_snapshot(feed),
        )
    return feed
