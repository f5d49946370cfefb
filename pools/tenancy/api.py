"""API of teams (``/api/v1/teams/``): a member sees their teams, pool admins all."""

from __future__ import annotations

from rest_framework import serializers, viewsets

from pools.tenancy import selectors
from pools.tenancy.models import Team


class TeamSerializer(serializers.ModelSerializer):
    class Meta:
        model = Team
        fields = ["slug", "name", "cost_centre"]


class TeamViewSet(viewsets.ReadOnlyModelViewSet):
    """Teams the caller belongs to (all teams for pool admins)."""

    queryset = Team.objects.none()  # for the schema; get_queryset scopes by user
    serializer_class = TeamSerializer
    lookup_field = "slug"

    def get_queryset(self):
        return selectors.team_list(user=self.request.user).order_by("name")
