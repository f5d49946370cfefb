"""Read-side queries of teams: which teams a user may see, and who is in a team (for mail and
the schedulers' user associations)."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from pools.common.choices import TeamRole
from pools.common.errors import InvalidInput
from pools.tenancy.models import Membership, Team

UNSEEN_TEAM = "No team you can see has this slug."
"""The one answer to a team slug the user may not name, on a page's form field, under
``errors.team`` in the API (filters and bodies alike): the same words for a slug no team has
and for another team's, so the answer never tells whether a team exists. It names no slug: the
field beside it (or the request the caller sent) already shows it."""


def team_list(*, user) -> QuerySet[Team]:
    """Teams the user can see: all for pool admins, their own for everyone else."""
    return Team.objects.visible_to(user)


def team_named(*, user, slug: object, field: str = "team") -> Team | None:
    """The team ``slug`` names among those ``user`` may see (:func:`team_list`); ``None`` when
    ``slug`` is empty or absent (nothing named). One query.

    Raises :class:`InvalidInput` (400) with ``errors[field]`` when ``slug`` names no team the
    user may see: another team's slug answers exactly as a slug no team has, so the answer never
    tells whether that team exists, and the caller writes nothing (a slug dropped silently would
    save a row the user meant to share as a private one)."""
    if slug in (None, ""):
        return None
    team = team_list(user=user).filter(slug=str(slug)).first()
    if team is None:
        raise InvalidInput(f"No team {str(slug)!r} among your teams.", errors={field: UNSEEN_TEAM})
    return team


def member_team_list(*, user) -> QuerySet[Team]:
    """The teams the user is a member or manager of (a pool admin's own too, not all)."""
    return Team.objects.filter(pk__in=Membership.objects.filter(user=user).values("team"))


def pool_admin_users() -> QuerySet:
    """The pool admins (staff users), in the order they were made."""
    return get_user_model().objects.filter(is_staff=True).order_by("pk")


def team_member_emails(*, team_id: int) -> list[str]:
    """The e-mail addresses of the team's members and managers that have one; one query."""
    return list(
        Membership.objects.filter(team_id=team_id)
        .exclude(user__email="")
        .values_list("user__email", flat=True)
    )


def team_manager_emails(*, team_id: int) -> list[str]:
    """The team's managers' e-mail addresses, sorted, each once, blanks left out; one query."""
    return sorted(
        set(
            Membership.objects.filter(team_id=team_id, role=TeamRole.MANAGER)
            .exclude(user__email="")
            .values_list("user__email", flat=True)
        )
    )


def team_manager_count(*, team_id: int) -> int:
    """How many managers the team has; one query."""
    return Membership.objects.filter(team_id=team_id, role=TeamRole.MANAGER).count()


def teams_with_manager_email(*, team_ids: Iterable[int]) -> set[int]:
    """Those of ``team_ids`` with at least one manager who has an e-mail address; one query."""
    return set(
        Membership.objects.filter(team_id__in=team_ids, role=TeamRole.MANAGER)
        .exclude(user__email="")
        .values_list("team_id", flat=True)
    )


def team_usernames(*, team_id: int) -> list[str]:
    """The user names of the team's members and managers (their scheduler accounts); one query."""
    return list(Membership.objects.filter(team_id=team_id).values_list("user__username", flat=True))


def team_member_users(*, team_id: int) -> QuerySet:
    """The users who are members or managers of the team and not pool admins, in the order
    they were made (the demo's requester)."""
    return (
        get_user_model()
        .objects.filter(pk__in=Membership.objects.filter(team_id=team_id).values("user"))
        .exclude(is_staff=True)
        .order_by("pk")
    )


def managed_team_list(*, user) -> QuerySet[Team]:
    """The teams ``user`` manages (role manager; a pool admin's own managed teams, not all)."""
    return Team.objects.filter(
        pk__in=Membership.objects.filter(user=user, role=TeamRole.MANAGER).values("team")
    )
