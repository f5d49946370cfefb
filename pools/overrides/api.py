"""API of temporary overrides (issue 32 item 2, ``/api/v1/overrides/``): read by the team's
members and pool admins, made and cancelled (ended now) by pool admins through
:mod:`pools.overrides.services`. Domain errors become 400 / 403 / 409 bodies in
:func:`portal.api.exception_handler` (field errors under ``errors``)."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_view
from rest_framework import serializers, viewsets

from pools.classes.models import WorkloadClass
from pools.inventory.models import GpuModel, Pool
from pools.overrides import selectors
from pools.overrides.filtersets import OverrideFilterSet
from pools.overrides.models import OVERRIDE_REASON_MAX_LENGTH, OverrideKind, TemporaryOverride
from pools.overrides.services import override_cancel, override_create
from pools.tenancy.models import Team
from pools.web.api import CancelActionMixin, PoolAdminCreateMixin

MAX_CARDS = 100_000  # a bound for the integer field; the pool's usable cards refuse sooner


class OverrideSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", queryset=Team.objects.all())
    pool = serializers.SlugRelatedField(slug_field="slug", queryset=Pool.objects.all())
    kind = serializers.ChoiceField(choices=OverrideKind.choices)
    gpu_model = serializers.SlugRelatedField(
        slug_field="slug", queryset=GpuModel.objects.all(), required=False, allow_null=True
    )
    cards = serializers.IntegerField(
        min_value=1, max_value=MAX_CARDS, required=False, allow_null=True
    )
    workload_class = serializers.SlugRelatedField(
        slug_field="slug", queryset=WorkloadClass.objects.all(), required=False, allow_null=True
    )
    class_before = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    reason = serializers.CharField(max_length=OVERRIDE_REASON_MAX_LENGTH)
    created_by = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    in_force = serializers.SerializerMethodField()

    class Meta:
        model = TemporaryOverride
        fields = [
            "id", "team", "pool", "kind", "gpu_model", "cards", "cards_before",
            "workload_class", "class_before", "reason", "until", "status", "in_force",
            "created_by", "created_at", "ended_at", "restored_at", "scheduler_binding",
        ]  # fmt: skip
        # cards_before / class_before: the figure when it was made ("from");
        # scheduler_binding: what the last scheduler write after a change said
        read_only_fields = [
            "cards_before", "status", "created_at", "ended_at", "restored_at",
            "scheduler_binding",
        ]  # fmt: skip

    def get_in_force(self, override) -> bool:
        """Whether it raises its figure now (active and ``until`` not passed)."""
        return override.status == "active" and override.until > timezone.now()


class OverrideCancelSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=500)


@extend_schema_view(
    create=extend_schema(
        examples=[
            OpenApiExample(
                "Lift nlp's A100 cap to 12 cards until Friday",
                value={
                    "team": "nlp",
                    "pool": "train-slurm",
                    "kind": "ceiling",
                    "gpu_model": "a100_80g_sxm",
                    "cards": 12,
                    "until": "2027-01-15T18:00:00Z",
                    "reason": "paper deadline",
                },
                request_only=True,
            )
        ]
    ),
    cancel=extend_schema(
        request=OverrideCancelSerializer,
        responses=OverrideSerializer,
        description="End the override now; the team's figures go back to normal.",
    ),
)
class OverrideViewSet(PoolAdminCreateMixin, CancelActionMixin, viewsets.ReadOnlyModelViewSet):
    """Temporary overrides: a team's ceiling, Kueue borrowing limit or priority raised in one
    pool until a date."""

    queryset = TemporaryOverride.objects.none()  # for the schema; get_queryset scopes by user
    serializer_class = OverrideSerializer
    filterset_class = OverrideFilterSet
    create_refusal = "Only pool admins may override a team's limits."
    create_service = staticmethod(override_create)
    cancel_serializer_class = OverrideCancelSerializer
    cancel_service = staticmethod(override_cancel)
    cancel_keyword = "override"

    def get_queryset(self):
        return selectors.override_list(user=self.request.user)
