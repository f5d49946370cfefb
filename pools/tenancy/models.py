"""Tenancy: teams (with their cost centre) and their members' roles."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from pools.choices import (
    TeamRole,
)
from pools.validators import single_line_text_validator, slug_validator


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

    class Meta:
        ordering = ["name"]

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
