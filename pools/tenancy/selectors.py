"""Read-side queries of teams: which teams a user may see."""

from __future__ import annotations

from django.db.models import QuerySet

from pools.tenancy.models import Team


def team_list(*, user) -> QuerySet[Team]:
    """Teams the user can see: all for pool admins, their own for everyone else."""
    teams = Team.objects.all()
    return teams if user.is_staff else teams.filter(memberships__user=user).distinct()
