"""API of the advisor (``/api/v1/advisor/findings/``): findings with their evidence, and
acknowledge / mute / unmute with a reason.

Members see their teams' findings (another team's is 404); pool admins see all. Triage is for
the team's managers and pool admins, through the service (domain errors become 400 / 403 /
409 bodies in :func:`portal.api.exception_handler`).
"""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from pools.advisor import selectors
from pools.advisor.choices import LIVE_STATUSES
from pools.advisor.filtersets import AdvisorFindingFilterSet
from pools.advisor.models import AdvisorFinding
from pools.advisor.rules import RULE_TITLES
from pools.advisor.services import MAX_REASON_CHARS, advisor_finding_triage
from pools.tenancy.permissions import require_manager

EXAMPLE = {
    "id": 41,
    "rule": "memory_pressure",
    "title": "Preemptions, KV cache or framebuffer full",
    "severity": "critical",
    "status": "open",
    "team": "nlp",
    "pool": "infer-k8s",
    "allocation": 2,
    "since": "2026-12-04T09:05:00Z",
    "opened_at": "2026-12-04T09:20:00Z",
    "last_seen_at": "2026-12-04T22:15:00Z",
    "closed_at": None,
    "summary": "Memory ran out in 61 five-minute buckets: 2874 preemptions, KV cache full in 61.",
    "fix": "Lower the concurrency per replica (max running requests), revisit the KV cache "
    "reservation (gpu-memory-utilization, FP8 KV cache), or move to a card with more memory.",
    "evidence": {
        "buckets": 61,
        "preemptions": 2874.0,
        "kv_full_buckets": 61,
        "fb_used_pct_max": 80.1,
    },
    "reason": "",
    "chart_url": "/allocations/2/serving/",
}


class AdvisorFindingSerializer(serializers.ModelSerializer):
    """A finding: its rule (code and title), severity, status, whose, when, what was seen,
    the fix, the triggering numbers (``evidence``: names as the rule gives them, units in the
    names) and the link to the allocation's serving charts."""

    title = serializers.SerializerMethodField()
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    pool = serializers.SerializerMethodField()
    allocation = serializers.PrimaryKeyRelatedField(read_only=True)
    chart_url = serializers.SerializerMethodField()

    class Meta:
        model = AdvisorFinding
        fields = [
            "id",
            "rule",
            "title",
            "severity",
            "status",
            "team",
            "pool",
            "allocation",
            "since",
            "opened_at",
            "last_seen_at",
            "closed_at",
            "summary",
            "fix",
            "evidence",
            "reason",
            "chart_url",
        ]
        read_only_fields = fields

    def get_title(self, obj) -> str:
        return RULE_TITLES[obj.rule]

    def get_pool(self, obj) -> str | None:
        return obj.allocation.pool.slug if obj.allocation_id else None

    def get_chart_url(self, obj) -> str | None:
        if not obj.allocation_id:
            return None
        return reverse("pools:allocation-serving", args=[obj.allocation_id])


class TriageSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=MAX_REASON_CHARS)


@extend_schema_view(
    list=extend_schema(
        summary="Advisor findings",
        description=(
            "Live findings (open, acknowledged, muted) unless `status` says `closed` or "
            "`all`; most urgent first. Filters: pool, team (slugs), severity, rule, status; "
            "`ordering` by severity (by how severe: `-severity` critical, warning, info), rule, "
            "team, allocation, since, last_seen."
        ),
        examples=[OpenApiExample("A memory-pressure finding", value=[EXAMPLE])],
    ),
    retrieve=extend_schema(examples=[OpenApiExample("A finding", value=EXAMPLE)]),
)
class AdvisorFindingViewSet(viewsets.ReadOnlyModelViewSet):
    """The advisor's findings of the caller's teams (all for pool admins)."""

    queryset = AdvisorFinding.objects.none()  # for the schema; get_queryset scopes by user
    serializer_class = AdvisorFindingSerializer
    filterset_class = AdvisorFindingFilterSet

    def get_queryset(self):
        rows = selectors.finding_list(user=self.request.user).order_by(
            "severity_rank", "-last_seen_at", "-id"
        )
        if self.action == "list" and not self.request.query_params.get("status"):
            rows = rows.filter(status__in=LIVE_STATUSES)
        return rows

    def _triage(self, request, action_name: str):
        # who may act is decided before the body is read: a member gets 403 whatever it says
        finding = self.get_object()
        require_manager(request.user, finding.team)
        form = TriageSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        finding = advisor_finding_triage(
            finding=finding,
            action=action_name,
            actor=request.user,
            reason=form.validated_data["reason"],
        )
        return Response(self.get_serializer(self.get_queryset().get(pk=finding.pk)).data)

    @extend_schema(request=TriageSerializer, responses=AdvisorFindingSerializer)
    @action(detail=True, methods=["post"])
    def acknowledge(self, request, pk=None):
        """Acknowledge an open finding (seen, being worked on); it still closes by itself."""
        return self._triage(request, "acknowledge")

    @extend_schema(request=TriageSerializer, responses=AdvisorFindingSerializer)
    @action(detail=True, methods=["post"])
    def mute(self, request, pk=None):
        """Mute an open or acknowledged finding: left out of digests and panels' counts."""
        return self._triage(request, "mute")

    @extend_schema(request=TriageSerializer, responses=AdvisorFindingSerializer)
    @action(detail=True, methods=["post"])
    def unmute(self, request, pk=None):
        """Open a muted or acknowledged finding again."""
        return self._triage(request, "unmute")
