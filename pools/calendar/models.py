"""A team's calendar feed link."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from pools.tenancy.models import Team


class TeamCalendarFeed(models.Model):
    """A team's secret calendar feed link (``/calendar/<token>.ics``): a calendar app that
    subscribes has no session, so the link itself is the credential.

    The token is ``HMAC-SHA256(SECRET_KEY, salt)`` (:mod:`pools.calendar.feed`): the
    row keeps the random ``salt`` and the SHA-256 of the token, never the token, so the database
    alone does not open a feed, while the portal can show the link to the team's members again.
    Resetting draws a new salt: the old link then answers 404. One row per team.
    """

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="calendar_feed")
    salt = models.CharField(max_length=64)
    token_sha256 = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"calendar feed of {self.team.slug}"
