"""API of waiting work (``/api/v1/pending-work/``): the rows the caller may see, filtered by
the page's FilterSet plus ``team``; an unknown or invisible team is a 400 field error. Reading
a team's rows keeps the refresh task reading like the page does."""

from __future__ import annotations

from rest_framework import serializers, viewsets

from pools.tenancy.models import Team
from pools.waiting import selectors
from pools.waiting.filtersets import PendingWorkFilterSet
from pools.waiting.models import PendingWork
from pools.waiting.services import waiting_watch_touch


class PendingWorkSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    cluster = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)

    class Meta:
        model = PendingWork
        fields = [
            "id", "team", "cluster", "scheduler", "ref", "name", "user", "queue", "gres_type",
            "cards_requested", "kind", "translated", "explanation", "reason_code",
            "reason_message", "submitted_at", "expected_start_at", "read_at",
        ]  # fmt: skip
        read_only_fields = fields


class PendingWorkViewSet(viewsets.ReadOnlyModelViewSet):
    """Pending Slurm jobs and not-admitted Kueue workloads with the portal's explanation."""

    serializer_class = PendingWorkSerializer
    filterset_class = PendingWorkFilterSet

    def get_queryset(self):
        return selectors.pending_work_list(user=self.request.user).order_by("submitted_at", "id")

    def list(self, request, *args, **kwargs):
        response = super().list(request, *args, **kwargs)  # a bad filter raised 400 already
        slug = request.query_params.get("team")
        team = Team.objects.visible_to(request.user).filter(slug=slug).first() if slug else None
        if team is not None:
            waiting_watch_touch(team=team)
        return response
