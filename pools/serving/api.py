"""API of serving signals (``/api/v1/serving/``): per allocation the caller may see, the newest
stored values (``GET /serving/``, ``GET /serving/{allocation}/``) and the series over 24 h or 7 d
(``GET /serving/{allocation}/series/?span=``). Read from the rollups, never from Prometheus;
``null`` is unknown, and ``missing`` names the metrics no series answered for."""

from __future__ import annotations

from django.db.models import Exists, OuterRef
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from pools.capacity.selectors import allocation_list
from pools.serving import selectors
from pools.serving.fold import SIGNAL_FIELDS
from pools.serving.models import ServingRollup

SPAN_NAMES = tuple(selectors.SPANS)


class ServingValuesSerializer(serializers.Serializer):
    """The signals of one bucket (units in the names: ``_pct`` %, ``_s`` seconds, ``_mib`` MiB,
    ``_c`` °C; tokens, requests and preemptions are counts over the bucket)."""

    def get_fields(self):
        return {name: serializers.FloatField(allow_null=True) for name in SIGNAL_FIELDS}


class ServingCurrentSerializer(serializers.Serializer):
    allocation = serializers.IntegerField(source="allocation.pk")
    team = serializers.CharField(source="allocation.team.slug")
    pool = serializers.CharField(source="allocation.pool.slug")
    gpu_model = serializers.CharField(source="allocation.gpu_model.slug")
    card_count = serializers.IntegerField(source="allocation.card_count")
    bucket_start = serializers.DateTimeField(allow_null=True)
    bucket_seconds = serializers.IntegerField(allow_null=True)
    stale = serializers.BooleanField(help_text="The newest rollup is older than 15 minutes.")
    age_s = serializers.IntegerField(allow_null=True, help_text="Seconds since it ended.")
    engine = serializers.CharField(help_text="vllm, sglang, or both joined by '+'.")
    values = serializers.SerializerMethodField()
    missing = serializers.ListField(child=serializers.CharField())
    notes = serializers.ListField(child=serializers.CharField())

    @extend_schema_field(ServingValuesSerializer(allow_null=True))
    def get_values(self, row) -> dict | None:
        """The dict as stored: no serializer per row (a page of 50 would build 1,500 fields)."""
        return row["values"]


class ServingPointSerializer(ServingValuesSerializer):
    def get_fields(self):
        return {"at": serializers.DateTimeField(), **super().get_fields()}


class ServingSeriesSerializer(serializers.Serializer):
    allocation = serializers.IntegerField()
    span = serializers.ChoiceField(choices=SPAN_NAMES)
    step_s = serializers.IntegerField()
    points = ServingPointSerializer(many=True)


class SpanSerializer(serializers.Serializer):
    span = serializers.ChoiceField(choices=SPAN_NAMES, default="24h")


class ServingViewSet(viewsets.GenericViewSet):
    """Serving signals of the caller's teams' allocations (all, for pool admins): those with
    any stored rollup."""

    queryset = ServingRollup.objects.none()  # for the schema; get_queryset scopes by user
    serializer_class = ServingCurrentSerializer
    lookup_field = "pk"
    lookup_value_regex = r"\d+"

    def get_queryset(self):
        rolled_up = ServingRollup.objects.filter(allocation_id=OuterRef("pk"))
        return (
            allocation_list(user=self.request.user)
            .filter(Exists(rolled_up))
            .order_by("starts_at", "id")
        )

    def _current(self, allocations):
        now = timezone.now()
        state = selectors.serving_state(now=now)
        rows = selectors.serving_current(allocation_ids=[a.pk for a in allocations], state=state)
        age = None if state.age is None else int(state.age.total_seconds())
        out = []
        for allocation in allocations:
            row = rows.get(allocation.pk)
            out.append(
                {
                    "allocation": allocation,
                    "bucket_start": row["bucket_start"] if row else None,
                    "bucket_seconds": row["bucket_seconds"] if row else None,
                    "stale": state.stale,
                    "age_s": age,
                    "engine": row["engine"] if row else "",
                    "values": {name: row[name] for name in SIGNAL_FIELDS} if row else None,
                    "missing": row["missing"] if row else [],
                    "notes": row["notes"] if row else [],
                }
            )
        return out

    def list(self, request):
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(self.get_serializer(self._current(page), many=True).data)

    def retrieve(self, request, pk=None):
        return Response(self.get_serializer(self._current([self.get_object()])[0]).data)

    @extend_schema(
        parameters=[OpenApiParameter("span", str, enum=SPAN_NAMES, default="24h")],
        responses=ServingSeriesSerializer,
    )
    @action(detail=True, methods=["get"])
    def series(self, request, pk=None):
        """Points oldest first: 5-minute buckets over 24 h, hours over 7 d."""
        allocation = self.get_object()
        form = SpanSerializer(data=request.query_params)
        form.is_valid(raise_exception=True)
        span = form.validated_data["span"]
        points = selectors.serving_series(
            allocation_id=allocation.pk, span=span, now=timezone.now()
        )
        body = {
            "allocation": allocation.pk,
            "span": span,
            "step_s": selectors.SPANS[span][1],
            "points": points,
        }
        return Response(ServingSeriesSerializer(body).data)
