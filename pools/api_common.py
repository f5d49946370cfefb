"""Pieces the sub-domains' APIs share: timezone-aware datetime fields, the pool-admin
permissions and the team field that only offers the caller's teams."""

from __future__ import annotations

from django.db.models import QuerySet
from rest_framework import permissions, serializers

from pools.tenancy import selectors
from pools.tenancy.models import Team
from pools.tenancy.permissions import may_administer_pools
from pools.validators import DATE_RANGE_MESSAGE, date_in_range


class IsPoolAdminOrReadOnly(permissions.BasePermission):
    """Any signed-in user reads; only pool admins (staff) write."""

    def has_permission(self, request, view):
        if not (request.user and request.user.is_authenticated):
            return False
        return request.method in permissions.SAFE_METHODS or may_administer_pools(request.user)


class IsPoolAdmin(permissions.BasePermission):
    def has_permission(self, request, view):
        return may_administer_pools(request.user)


class AwareDateTimeField(serializers.DateTimeField):
    """ISO 8601 with an offset (``2026-12-07T09:00:00+01:00`` or ``…Z``); naive is refused, and
    so is a date outside 2000–2100 (:data:`pools.validators.EARLIEST_DATE`)."""

    default_error_messages = {"date_range": DATE_RANGE_MESSAGE}

    def to_internal_value(self, value):
        parsed = super().to_internal_value(value)
        text = str(value)
        if not (text.endswith(("Z", "z")) or "+" in text[10:] or "-" in text[10:]):
            self.fail("invalid", format="ISO 8601 with a UTC offset, e.g. 2026-12-07T09:00:00Z")
        if not date_in_range(parsed):
            self.fail("date_range")
        return parsed


class SlugLookupField(serializers.SlugRelatedField):
    """A slug lookup that answers "does not exist" for a value PostgreSQL could not even compare
    (a NUL byte: text columns cannot hold one, and the query would fail with a 500)."""

    def to_internal_value(self, data):
        if isinstance(data, str) and "\x00" in data:
            self.fail("does_not_exist", slug_name=self.slug_field, value=data)
        return super().to_internal_value(data)


class VisibleTeamField(SlugLookupField):
    """A team by slug, among the teams the caller may act for (all for pool admins): another
    team's slug gets the same "does not exist" as a missing one, so existence does not leak."""

    def __init__(self, **kwargs):
        super().__init__(slug_field="slug", queryset=Team.objects.all(), **kwargs)

    def get_queryset(self):
        request = self.context.get("request")
        return visible_teams(request)


def visible_teams(request) -> QuerySet[Team]:
    """The teams a filter may name: the caller's (all for pool admins)."""
    if request is None:
        return Team.objects.none()
    return selectors.team_list(user=request.user).order_by("name")
