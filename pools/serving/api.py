"""API of serving signals (``/api/v1/serving/``): per allocation the caller may see, the newest
stored values (``GET /serving/``, ``GET /serving/{allocation}/``) and the series over 24 h or 7 d
(``GET /serving/{allocation}/series/?span=``). Read from the rollups, never from Prometheus;
``null`` is unknown, and ``missing`` names the metrics no series answered for."""

from __future__ import annotations

from datetime import UTC, datetime

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from pools.capacity.models import Allocation
from pools.common.validators import DATE_RANGE_MESSAGE, EARLIEST_DATE, LATEST_DATE
from pools.serving import selectors
from pools.serving.filtersets import ServingAllocationFilterSet
from pools.serving.fold import SIGNAL_FIELDS
from pools.serving.precision import CALIBRATION_PLACES

SPAN_NAMES = tuple(selectors.SPANS)
USAGE_FIELDS = (
    "held_card_hours", "busy_card_hours", "busy_share", "gpu_coverage", "input_tokens",
    "output_tokens", "input_tokens_per_card_hour", "output_tokens_per_card_hour",
)  # fmt: skip


def _usage(usage) -> dict:
    return {name: getattr(usage, name) for name in USAGE_FIELDS}


class ServingValuesSerializer(serializers.Serializer):
    """The signals of one bucket (units in the names: ``_pct`` %, ``_s`` seconds, ``_mib`` MiB,
    ``_c`` °C; tokens, requests and preemptions are counts over the bucket), rounded to the
    precision their unit deserves: % 1 place, seconds 4 (0.1 ms), counts 1, averaged gauges 2,
    MiB and °C 1, XID and NVLink bytes/s 0 (``pools/serving/precision.py``)."""

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

    def to_representation(self, row) -> dict:
        """The fields above written directly: DRF's field-by-field walk cost a third of a page
        of 50 (``tests/pools/serving/test_api.py`` holds the two to the same body)."""
        allocation = row["allocation"]
        start = row["bucket_start"]
        return {
            "allocation": allocation.pk,
            "team": allocation.team.slug,
            "pool": allocation.pool.slug,
            "gpu_model": allocation.gpu_model.slug,
            "card_count": allocation.card_count,
            "bucket_start": None if start is None else _iso(start),
            "bucket_seconds": row["bucket_seconds"],
            "stale": row["stale"],
            "age_s": row["age_s"],
            "engine": row["engine"],
            "values": row["values"],
            "missing": list(row["missing"]),
            "notes": list(row["notes"]),
        }


_DATETIME = serializers.DateTimeField()


def _iso(moment) -> str:
    """A datetime as DRF's ``DateTimeField`` writes it (``settings.TIME_ZONE``, ISO 8601)."""
    return _DATETIME.to_representation(moment)


class ServingPointSerializer(ServingValuesSerializer):
    def get_fields(self):
        return {
            "at": serializers.DateTimeField(),
            "seconds": serializers.IntegerField(help_text="Time the point's rollups cover."),
            **super().get_fields(),
        }


class ServingSeriesSerializer(serializers.Serializer):
    allocation = serializers.IntegerField()
    span = serializers.ChoiceField(choices=SPAN_NAMES)
    step_s = serializers.IntegerField()
    points = ServingPointSerializer(many=True)


class UsageSerializer(serializers.Serializer):
    """Sums over rollups (:class:`pools.serving.efficiency.Usage`); ``null`` is unknown."""

    held_card_hours = serializers.DecimalField(max_digits=14, decimal_places=3)
    busy_card_hours = serializers.DecimalField(max_digits=14, decimal_places=3, allow_null=True)
    busy_share = serializers.DecimalField(max_digits=5, decimal_places=3, allow_null=True)
    gpu_coverage = serializers.DecimalField(max_digits=5, decimal_places=3, allow_null=True)
    input_tokens = serializers.IntegerField(allow_null=True)
    output_tokens = serializers.IntegerField(allow_null=True)
    input_tokens_per_card_hour = serializers.DecimalField(
        max_digits=16, decimal_places=1, allow_null=True
    )
    output_tokens_per_card_hour = serializers.DecimalField(
        max_digits=16, decimal_places=1, allow_null=True
    )


class DayUsageSerializer(UsageSerializer):
    day = serializers.DateField()


class EfficiencySerializer(serializers.Serializer):
    allocation = serializers.IntegerField()
    month = serializers.CharField(help_text="YYYY-MM; days are UTC days.")
    total = UsageSerializer(allow_null=True)
    days = DayUsageSerializer(many=True)


class MonthSerializer(serializers.Serializer):
    """``month`` as ``YYYY-MM`` in ASCII digits (``\\d`` took Arabic-Indic ones), within the
    portal's dates (:data:`pools.common.validators.DATE_RANGE_MESSAGE`): year 0 is no date and
    December 9999 has no next month to end the window, so either was a 500. DRF trims
    surrounding white space first."""

    month = serializers.RegexField(
        r"^[0-9]{4}-(0[1-9]|1[0-2])$", help_text="YYYY-MM, from 2000-01 to 2100-12"
    )

    def validate_month(self, value: str) -> str:
        year = int(value[:4])
        if not EARLIEST_DATE.year <= year <= LATEST_DATE.year:
            raise serializers.ValidationError(DATE_RANGE_MESSAGE)
        return value


class SpanSerializer(serializers.Serializer):
    span = serializers.ChoiceField(choices=SPAN_NAMES, default="24h")


class ServedModelSerializer(serializers.Serializer):
    model_id = serializers.CharField(
        help_text="Sizing catalogue id (pools/sizing/models.json); custom:<estimate id> for a "
        "linked estimate's custom architecture."
    )
    precision = serializers.CharField()
    tp = serializers.IntegerField(help_text="Cards per replica.")
    engine = serializers.CharField()
    kv_cache_dtype = serializers.CharField(help_text="Blank: the weights' precision.")
    estimate = serializers.IntegerField(
        source="estimate_id",
        allow_null=True,
        help_text="The team's saved sizing estimate these come from; null: set by a pool admin.",
    )


class RoundedFloatField(serializers.FloatField):
    """A float written rounded to its ``places`` (:data:`CALIBRATION_PLACES`), not with the
    binary noise a mean or a ratio leaves (``0.9986661743691772``)."""

    def __init__(self, *, places: int, **kwargs):
        self.places = places
        super().__init__(**kwargs)

    def to_representation(self, value):
        return round(float(value), self.places)


def _calibration(name: str, help_text: str, **kwargs) -> RoundedFloatField:
    places = CALIBRATION_PLACES[name]
    return RoundedFloatField(places=places, help_text=f"{help_text} ({places} places)", **kwargs)


class CalibrationDaySerializer(serializers.Serializer):
    day = serializers.DateField(help_text="UTC day.")
    concurrency = _calibration("concurrency", "Mean running requests per replica.")
    measured_tok_s_per_card = _calibration("measured_tok_s_per_card", "Output tok/s per card.")
    sized_tok_s_per_card = _calibration(
        "sized_tok_s_per_card",
        "The sizing engine at that concurrency; null = unknown.",
        allow_null=True,
    )
    band_low_factor = _calibration("band_low_factor", "P10 measured ÷ sized.", allow_null=True)
    band_high_factor = _calibration("band_high_factor", "P90 measured ÷ sized.", allow_null=True)
    ratio = _calibration("ratio", "measured ÷ sized", allow_null=True)
    position = serializers.CharField(help_text="inside, below or above the band; empty unknown.")
    note = serializers.CharField(help_text="Why sized is unknown, if it is.")


class CalibrationSerializer(serializers.Serializer):
    allocation = serializers.IntegerField()
    served = ServedModelSerializer(allow_null=True, help_text="null: not declared.")
    days = CalibrationDaySerializer(many=True)


class ServingViewSet(viewsets.GenericViewSet):
    """Serving signals of the caller's teams' allocations (all, for pool admins): those with
    any stored rollup."""

    queryset = (
        Allocation.objects.none()
    )  # for the schema (rows are allocations); get_queryset scopes
    serializer_class = ServingCurrentSerializer
    filterset_class = ServingAllocationFilterSet
    lookup_field = "pk"
    lookup_value_regex = r"\d+"

    def get_queryset(self):
        if self.action == "list":
            return selectors.serving_allocation_list(user=self.request.user)
        return selectors.serving_allocation_one(user=self.request.user)

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
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(self.get_serializer(self._current(page), many=True).data)

    def retrieve(self, request, pk=None):
        return Response(self.get_serializer(self._current([self.get_object()])[0]).data)

    @extend_schema(
        parameters=[OpenApiParameter("month", str, required=True, description="YYYY-MM")],
        responses=EfficiencySerializer,
    )
    @action(detail=True, methods=["get"])
    def efficiency(self, request, pk=None):
        """Output and input tokens per card-hour and the busy share of held card-hours, per
        UTC day of ``month`` and for the month (money: the team dashboard and the statement).
        The month's figures come from its own sums, so the days' rounded card-hours may add up
        to a thousandth more or less. Two queries."""
        allocation = self.get_object()
        form = MonthSerializer(data=request.query_params)
        form.is_valid(raise_exception=True)
        year, month = map(int, form.validated_data["month"].split("-"))
        start = datetime(year, month, 1, tzinfo=UTC)
        end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
        days = selectors.serving_usage(
            allocation_ids=[allocation.pk], start=start, end=end, by_day=True
        )
        ordered = [{"day": day, **_usage(u)} for (_id, day), u in sorted(days.items())]
        # the month's sums rounded once, as the Serving panel and the dashboards' CSVs give
        # them: thirty days each rounded to 0.001 card-h and added up drift from them
        total = selectors.serving_usage(allocation_ids=[allocation.pk], start=start, end=end).get(
            allocation.pk
        )
        body = {
            "allocation": allocation.pk,
            "month": form.validated_data["month"],
            "total": None if total is None else _usage(total),
            "days": ordered,
        }
        return Response(EfficiencySerializer(body).data)

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

    @extend_schema(responses=CalibrationSerializer)
    @action(detail=True, methods=["get"])
    def calibration(self, request, pk=None):
        """Measured against sized per UTC day, newest first, as the hourly calibration pass
        stored it (:mod:`pools.calibration.services`); ``served`` null when the allocation does
        not say what it serves."""
        allocation = self.get_object()
        found = selectors.serving_calibration(allocation_id=allocation.pk, all_days=True)
        body = {
            "allocation": allocation.pk,
            "served": found["served"] if found else None,
            "days": found["days_list"] if found else [],
        }
        return Response(CalibrationSerializer(body).data)
