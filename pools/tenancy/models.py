"""Tenancy: teams (with their cost centre) and their members' roles, and the queryset every
team-owned model's rows are seen through (:class:`TeamOwnedQuerySet`)."""

from __future__ import annotations

from functools import reduce
from operator import or_
from typing import Any, ClassVar, Self

from django.conf import settings
from django.db import models
from django.db.models import Q

from pools.common.choices import (
    TeamRole,
)
from pools.common.validators import single_line_text_validator, slug_validator
from pools.tenancy.roles import sees_every_team


class TeamOwnedQuerySet(models.QuerySet):
    """Rows owned by a team through ``team_paths`` (lookups from the model to its Team, OR-ed
    when several: an exemption names a team or an allocation); make one with :func:`team_owned`.

    ``visible_to(user)``: a pool admin sees every row (:func:`~pools.tenancy.roles.
    sees_every_team`); anyone else the rows of the teams they belong to, as a subquery on their
    memberships (``team_id IN (SELECT team_id FROM membership WHERE user_id = …)``), never a
    list of ids, so the database plans it with the rest of the query. Anonymous users see none.
    """

    team_paths: ClassVar[tuple[str, ...]] = ("team",)

    def visible_to(self, user: Any) -> Self:
        """The rows ``user`` may see."""
        if sees_every_team(user):
            return self
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(self.member_q(user))

    def member_q(self, user: Any) -> Q:
        """The rows of the teams of ``user`` (signed in), as a condition on this model."""
        teams = Membership.objects.filter(user=user).values("team")
        return reduce(or_, (Q(**{f"{path}__in": teams}) for path in self.team_paths))


def team_owned(*paths: str) -> type[TeamOwnedQuerySet]:
    """A :class:`TeamOwnedQuerySet` class whose rows belong to the team at ``paths``."""
    return type("TeamOwnedQuerySet", (TeamOwnedQuerySet,), {"team_paths": paths})


class Team(models.Model):
    """A tenant that holds allocations and is charged; ``cost_centre`` is finance's code."""

    slug = models.SlugField(max_length=50, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=100, validators=[single_line_text_validator])
    cost_centre = models.CharField(
        max_length=40, blank=True, validators=[single_line_text_validator]
    )
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams"
    )
    # The class its requests state unless they say otherwise (issue 36); empty: unclassed,
    # no class rule applies to its requests.
    default_class = models.ForeignKey(
        "pools.WorkloadClass", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    objects = team_owned("pk").as_manager()

    class Meta:
        ordering = ["name"]
        # Read in name order everywhere (the default ordering): the finance month's lines, by
        # team name, walk it and stop at the page's 100 instead of sorting the month's every
        # line (20,160 at 100,800 GPUs: 53 -> 0.3 ms for the first page, issue #29 item 7).
        indexes = [models.Index(fields=["name"], name="team_name_idx")]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """A user's role in a team (member or manager)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=8, choices=TeamRole.choices, default=TeamRole.MEMBER)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="membership_unique_team_user")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"
