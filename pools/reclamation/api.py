"""API of reclamation (issue 7, ``/api/v1/``): idle findings and what admins do about them,
each pool's reclamation policy with its what-if (queued: ``POST …/{pool}/what-if/`` answers 202,
``reclamation-whatifs`` gives its progress, then its report), and exemptions.

Members see their teams' findings and exemptions (another team's finding is 404) and read every
policy; the writes are pool admins' and go through the services, whose domain errors become
400 / 403 / 409 bodies in :func:`portal.api.exception_handler`.
"""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.validators import UniqueValidator

from pools.capacity.models import Allocation
from pools.inventory.models import Pool
from pools.reclamation import selectors
from pools.reclamation.filtersets import IdleFindingFilterSet
from pools.reclamation.models import (
    POLICY_FIELDS,
    WHATIF_FIELDS,
    Exemption,
    IdleFinding,
    ReclamationPolicy,
    ReclamationWhatIf,
)
from pools.reclamation.services import actions as reclamation_actions
from pools.reclamation.services import scan as reclamation_services
from pools.reclamation.services.whatif import MAX_DAYS, reclamation_whatif_queue
from pools.tenancy.models import Team
from pools.tenancy.permissions import require_pool_admin
from pools.web.api import (
    AwareDateTimeField,
    IsPoolAdmin,
    QueuedRunSerializer,
    WhatIfDaysField,
)

MAX_REASON_CHARS = reclamation_actions.MAX_REASON_CHARS


class IdleFindingSerializer(serializers.ModelSerializer):
    allocation = serializers.PrimaryKeyRelatedField(read_only=True)
    team = serializers.SlugRelatedField(source="allocation.team", slug_field="slug", read_only=True)
    pool = serializers.SlugRelatedField(source="allocation.pool", slug_field="slug", read_only=True)
    gpu_model = serializers.SlugRelatedField(
        source="allocation.gpu_model", slug_field="slug", read_only=True
    )
    reclaim_due_at = serializers.SerializerMethodField(
        help_text="When the scan reclaims (under dry run: would reclaim) the open finding's "
        "cards: the end of its grace, as the idle page counts down to it; null when not open, "
        "without a policy or not warned yet. would_reclaim_at is what a dry run recorded."
    )

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_reclaim_due_at(self, finding):
        due = reclamation_services.reclaim_due_at(
            finding, reclamation_services.finding_policy(finding)
        )
        return serializers.DateTimeField().to_representation(due) if due else None

    class Meta:
        model = IdleFinding
        fields = [
            "id",
            "allocation",
            "team",
            "pool",
            "gpu_model",
            "state",
            "dry_run",
            "certainly_idle",
            "card_count",
            "cards_in_use",
            "cards_reclaimed",
            "mean_util_pct",
            "peak_util_pct",
            "first_seen_at",
            "last_seen_at",
            "warned_at",
            "would_reclaim_at",
            "reclaim_due_at",
            "reclaimed_at",
            "closed_at",
            "note",
            "detail",
        ]
        read_only_fields = fields


class ExemptionSerializer(serializers.ModelSerializer):
    """An exemption of a team (by slug) or of one allocation (by id), never both."""

    team = serializers.SlugRelatedField(
        slug_field="slug", queryset=Team.objects.all(), required=False, allow_null=True
    )
    allocation = serializers.PrimaryKeyRelatedField(
        queryset=Allocation.objects.all(), required=False, allow_null=True
    )
    reason = serializers.CharField(max_length=MAX_REASON_CHARS)
    expires_at = AwareDateTimeField()
    created_by = serializers.StringRelatedField(allow_null=True)

    class Meta:
        model = Exemption
        fields = ["id", "team", "allocation", "reason", "expires_at", "created_by", "created_at"]
        read_only_fields = ["created_at"]


class FindingExemptSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=MAX_REASON_CHARS)
    expires_at = AwareDateTimeField()


class DismissSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=MAX_REASON_CHARS)


class ReclamationPolicySerializer(serializers.ModelSerializer):
    """The model's validators give the field errors; its check constraints (one threshold
    under the other, ranges) are checked by the service."""

    pool = serializers.SlugRelatedField(
        slug_field="slug",
        queryset=Pool.objects.all(),
        validators=[UniqueValidator(ReclamationPolicy.objects.all(), "The pool has a policy.")],
    )

    class Meta:
        model = ReclamationPolicy
        fields = ["pool", *POLICY_FIELDS, "updated_at"]
        read_only_fields = ["updated_at"]

    def get_fields(self):
        fields = super().get_fields()
        if self.instance is not None:  # the pool is the lookup: not moved by an update
            fields["pool"].read_only = True
        return fields


class ReclamationWhatIfRequestSerializer(serializers.ModelSerializer):
    """``days`` (1-30, default 7) and any of the policy's thresholds to try instead of the
    saved ones (the model's validators give the field errors)."""

    days = WhatIfDaysField(max_value=MAX_DAYS, default=7)

    class Meta:
        model = ReclamationPolicy
        fields = ["days", *WHATIF_FIELDS]
        extra_kwargs = {name: {"required": False} for name in WHATIF_FIELDS}


class ReclamationWhatIfSerializer(QueuedRunSerializer):
    """A queued what-if: ``status`` (``pending``, ``running``, ``done``, ``failed``),
    ``progress`` (per cent), the ``days`` and ``overrides`` asked; once done ``result``
    (``start``/``end``, ``step_minutes``, the ``policy`` replayed, the totals and ``rows`` per
    allocation); once failed ``error`` and ``error_code`` (``unavailable``: no Prometheus
    configured; ``prometheus_unavailable``; ``internal``)."""

    pool = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    days = serializers.IntegerField(source="params.days", read_only=True)
    overrides = serializers.JSONField(source="params.overrides", read_only=True)
    status_path = "/api/v1/reclamation-whatifs/"

    class Meta:
        model = ReclamationWhatIf
        fields = ["id", "pool", "days", "overrides", *QueuedRunSerializer.RUN_FIELDS]
        read_only_fields = fields


class ReclamationWhatIfViewSet(mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """A queued reclamation what-if's progress and, once done, its report (pool admins)."""

    queryset = ReclamationWhatIf.objects.none()
    serializer_class = ReclamationWhatIfSerializer
    permission_classes = [IsPoolAdmin]

    def get_queryset(self):
        return selectors.reclamation_whatif_list()


class IdleFindingViewSet(viewsets.ReadOnlyModelViewSet):
    """Idle findings of the caller's teams (all for pool admins), newest first; admins dismiss,
    undo (within a day), exempt the allocation or reclaim now."""

    queryset = IdleFinding.objects.none()  # for the schema; get_queryset scopes by user
    serializer_class = IdleFindingSerializer
    filterset_class = IdleFindingFilterSet

    def get_queryset(self):
        return selectors.idle_finding_list(user=self.request.user)

    def _answer(self, finding):
        return Response(self.get_serializer(self.get_queryset().get(pk=finding.pk)).data)

    @extend_schema(request=DismissSerializer, responses=IdleFindingSerializer)
    @action(detail=True, methods=["post"])
    def dismiss(self, request, pk=None):
        """Close an open finding without reclaiming; not flagged again for a week."""
        finding = self.get_object()
        ReclamationPolicyViewSet._require_admin(request, "dismiss a finding")
        form = DismissSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        finding = reclamation_services.idle_finding_dismiss(
            finding=finding, actor=request.user, reason=form.validated_data["reason"]
        )
        return self._answer(finding)

    @extend_schema(request=None, responses=IdleFindingSerializer)
    @action(detail=True, methods=["post"])
    def undo(self, request, pk=None):
        """Give a reclaimed allocation its cards back, within a day, if they are still free."""
        finding = reclamation_services.reclamation_undo(
            finding=self.get_object(), actor=request.user
        )
        return self._answer(finding)

    @extend_schema(request=FindingExemptSerializer, responses={201: ExemptionSerializer})
    @action(detail=True, methods=["post"])
    def exempt(self, request, pk=None):
        """Exempt the finding's allocation from reclamation until ``expires_at``."""
        finding = self.get_object()
        ReclamationPolicyViewSet._require_admin(request, "grant an exemption")
        form = FindingExemptSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        exemption = reclamation_actions.exemption_grant(
            actor=request.user, allocation=finding.allocation, **form.validated_data
        )
        return Response(ExemptionSerializer(exemption).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=IdleFindingSerializer)
    @action(detail=True, methods=["post"], url_path="reclaim-now")
    def reclaim_now(self, request, pk=None):
        """Reclaim at once, skipping the grace period and cooldown (not while exempt, not under
        a dry-run policy)."""
        finding = reclamation_actions.idle_finding_reclaim_now(
            finding=self.get_object(), actor=request.user
        )
        return self._answer(finding)


class ReclamationPolicyViewSet(
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.ReadOnlyModelViewSet,
):
    """Each pool's reclamation policy, by pool slug: everyone reads, pool admins create and
    change (audited as ``reclamation_policy.saved``)."""

    queryset = ReclamationPolicy.objects.none()  # for the schema
    serializer_class = ReclamationPolicySerializer
    lookup_field = "pool__slug"
    lookup_url_kwarg = "pool"
    lookup_value_regex = "[-a-zA-Z0-9_]+"

    def get_queryset(self):
        return ReclamationPolicy.objects.select_related("pool").order_by("pool__name")

    def create(self, request, *args, **kwargs):
        self._require_admin(request, "change a reclamation policy")
        form = self.get_serializer(data=request.data)
        form.is_valid(raise_exception=True)
        values = dict(form.validated_data)
        policy = reclamation_actions.reclamation_policy_save(
            actor=request.user, pool=values.pop("pool"), **values
        )
        return Response(self.get_serializer(policy).data, status=status.HTTP_201_CREATED)

    def update(self, request, *args, **kwargs):
        self._require_admin(request, "change a reclamation policy")
        policy = self.get_object()
        form = self.get_serializer(policy, data=request.data, partial=kwargs.get("partial", False))
        form.is_valid(raise_exception=True)
        policy = reclamation_actions.reclamation_policy_save(
            actor=request.user, pool=policy.pool, **form.validated_data
        )
        return Response(self.get_serializer(policy).data)

    @extend_schema(
        request=ReclamationWhatIfRequestSerializer,
        responses={202: ReclamationWhatIfSerializer, 400: OpenApiTypes.OBJECT},
    )
    @action(detail=True, methods=["post"], url_path="what-if")
    def what_if(self, request, pool=None):
        """Queue a replay of the pool's policy (the defaults until one is saved), with any
        thresholds in the body tried instead, over the last ``days`` of metrics (pool admins):
        202 with the what-if's state and its ``status_url`` (``Location`` too); ``GET`` it for
        the progress, then the report. Bad values: 400 with field errors, nothing queued."""
        self._require_admin(request, "run a reclamation what-if")
        target = Pool.objects.filter(slug=pool).first()
        if target is None:
            raise Http404("No such pool.")
        form = ReclamationWhatIfRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        values = dict(form.validated_data)
        days = values.pop("days")
        whatif = reclamation_whatif_queue(
            pool=target, actor=request.user, overrides=values, days=days
        )
        body = ReclamationWhatIfSerializer(whatif).data
        return Response(
            body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["status_url"]}
        )

    @staticmethod
    def _require_admin(request, what: str) -> None:
        # before validation: a member learns nothing from a 400 about a body they may not send
        require_pool_admin(request.user, f"Only pool admins can {what}.")


@extend_schema_view(
    list=extend_schema(
        parameters=[
            OpenApiParameter(
                "all", OpenApiTypes.BOOL, description="Include expired ones (default: in force)"
            )
        ]
    )
)
class ExemptionViewSet(
    mixins.CreateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Exemptions from reclamation of the caller's teams (all for pool admins), in force unless
    ``?all=1``; pool admins grant them (create) and revoke them (delete: it expires now)."""

    queryset = Exemption.objects.none()  # for the schema; get_queryset scopes by user
    serializer_class = ExemptionSerializer

    def get_queryset(self):
        everything = self.action != "list" or self.request.query_params.get("all") in (
            "1",
            "true",
        )
        return selectors.exemption_list(user=self.request.user, include_expired=everything)

    def create(self, request, *args, **kwargs):
        ReclamationPolicyViewSet._require_admin(request, "grant an exemption")
        form = self.get_serializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        exemption = reclamation_actions.exemption_grant(
            actor=request.user,
            reason=data["reason"],
            expires_at=data["expires_at"],
            team=data.get("team"),
            allocation=data.get("allocation"),
        )
        return Response(self.get_serializer(exemption).data, status=status.HTTP_201_CREATED)

    def destroy(self, request, *args, **kwargs):
        """Revoke: the exemption expires now (kept for the record); 204."""
        reclamation_actions.exemption_revoke(exemption=self.get_object(), actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
