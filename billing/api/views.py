"""Billing API: statements (read-only, scoped), their lines, and token usage ingest."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from billing import selectors
from billing.api.filtersets import StatementFilterSet
from billing.errors import UsageRejected
from billing.focus import focus_csv
from billing.models import Statement, StatementLine
from billing.pricing import round_money
from billing.services.tokens import usage_tokens_ingest
from pools.tenancy.permissions import may_record_usage


@extend_schema_field(
    {"type": "string", "pattern": r"^\d{4}-(0[1-9]|1[0-2])$", "example": "2026-10"}
)
class MonthOutputField(serializers.DateField):
    """A billing month as sent: ``"2026-10"`` (the first of the month is stored)."""

    def __init__(self, **kwargs):
        super().__init__(format="%Y-%m", read_only=True, **kwargs)


class MinorUnitMoneyField(serializers.DecimalField):
    """An amount in the currency ``currency_path`` names on the object (dotted), sent as a string
    to that currency's minor unit like every other amount the API sends (``"1384.49"`` EUR,
    ``"1384"`` JPY, ``"1.234"`` KWD; :func:`billing.pricing.round_money`). Statements store
    amounts with 4 places, each already rounded half-up to the minor unit when built, so this
    only drops the stored trailing zeros ("1384.4900") and lines still add up to the totals."""

    def __init__(self, *, currency_path: str = "currency", **kwargs):
        self.currency_path = currency_path.split(".")
        kwargs.setdefault("max_digits", 18)
        kwargs.setdefault("decimal_places", 4)
        kwargs.setdefault("read_only", True)
        super().__init__(**kwargs)

    def get_attribute(self, instance):
        currency = instance
        for name in self.currency_path:
            currency = getattr(currency, name)
        return super().get_attribute(instance), currency

    def to_representation(self, value):
        amount, currency = value
        return None if amount is None else str(round_money(amount, currency))


MINOR_UNIT_HELP = "To the currency's minor unit (ISO 4217), as a string: `1384.49` EUR, `1384` JPY."


class StatementSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    month = MonthOutputField()
    line_count = serializers.IntegerField(read_only=True)
    usage_amount = MinorUnitMoneyField(help_text=MINOR_UNIT_HELP)
    adjustment_amount = MinorUnitMoneyField(help_text=MINOR_UNIT_HELP)
    total_amount = MinorUnitMoneyField(help_text=MINOR_UNIT_HELP)

    class Meta:
        model = Statement
        fields = ["id", "team", "cost_centre", "month", "status", "currency", "usage_amount",
                  "adjustment_amount", "total_amount", "rounding", "warnings", "line_count",
                  "built_at", "finalized_at"]  # fmt: skip


class StatementLineSerializer(serializers.ModelSerializer):
    """One statement line. ``amount`` was rounded once, half-up, to ``currency``'s minor unit
    when the statement was built and is sent to that unit (``"0.04"`` EUR; stored with 4
    places), as the statement's totals are, so the lines add up to its ``usage_amount``;
    ``unit_price`` keeps the rate card's 6 places (per card-hour, or per million tokens).
    ``currency`` (ISO 4217) is the statement's, the one every amount and unit price of the
    line is in."""

    # None: token lines (served_model) and adjustments not tied to one GPU model.
    gpu_model = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    # None unless a burst-pool, storage or egress line (issue 35): the pool it is for.
    pool = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    period = MonthOutputField()
    # Shared-card lines (basis "shared"): the card as <node>:<index>, the share of its
    # card-seconds in the rate period and what the share is read from; null / "" otherwise.
    card = serializers.CharField(source="gpu", read_only=True, allow_null=True)
    currency = serializers.CharField(source="statement.currency", read_only=True)
    amount = MinorUnitMoneyField(currency_path="statement.currency", help_text=MINOR_UNIT_HELP)

    class Meta:
        model = StatementLine
        fields = ["position", "kind", "period", "gpu_model", "served_model", "basis", "quantity",
                  "unit", "unit_price", "amount", "currency", "rate_from", "rate_to", "card",
                  "card_share", "share_basis", "pool"]  # fmt: skip


class StatementViewSet(viewsets.ReadOnlyModelViewSet):
    """Statements the caller may see (their teams'; all for staff). Others answer 404."""

    serializer_class = StatementSerializer
    filterset_class = StatementFilterSet
    queryset = Statement.objects.none()  # the schema's model; requests use get_queryset

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Statement.objects.none()
        return selectors.statement_list(user=self.request.user).order_by("-month", "team__slug")

    @extend_schema(
        responses={(200, "text/csv"): OpenApiTypes.STR},
        description="The statements the filters select (all pages) as a FOCUS 1.2 cost and "
        "usage CSV, one row per statement line (billing/focus.py lists the columns).",
    )
    @action(detail=False, methods=["get"], url_path="focus")
    def focus(self, request):
        statements = self.filter_queryset(self.get_queryset()).select_related("team")
        response = HttpResponse(focus_csv(statements), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="focus.csv"'
        return response

    @extend_schema(responses=StatementLineSerializer(many=True))
    @action(detail=True, methods=["get"])
    def lines(self, request, pk=None):
        statement = self.get_object()
        page = self.paginate_queryset(selectors.statement_lines(statement=statement))
        return self.get_paginated_response(StatementLineSerializer(page, many=True).data)


class CanPostUsage(permissions.BasePermission):
    """Staff, or an account granted ``billing.add_usagerecord`` (the inference gateway)."""

    def has_permission(self, request, view):
        return may_record_usage(request.user)


class TokenUsageView(APIView):
    """``POST {"records": [{idempotency_key, team, served_model, prompt_tokens,
    completion_tokens, cached_tokens?, timestamp}, ...]}`` → accepted / duplicates / rejected.
    Instead of the token fields a record may carry an OpenAI ``usage`` object or the streamed
    ``chunks``, and ``cache_hit`` (see :mod:`billing.services.tokens`): no usage is one
    unmetered request, never 0 tokens.

    A record of an agent task names it where gateways do — ``metadata.task_id``, LiteLLM's
    ``trace_id`` / ``session_id`` (or ``metadata.litellm_trace_id``), the paths of
    ``TOKENFLOW_TASK_ID_PATHS`` or the logged request header ``TOKENFLOW_TASK_ID_HEADER`` — and
    may give ``outcome`` (``ok`` / ``retry`` / ``error``, or LiteLLM's ``status``),
    ``latency_s`` (or ``request_duration_ms``, or ``startTime`` / ``endTime``), ``call_index``
    and ``tool_return_tokens``; such records are also kept per call for
    ``/api/v1/token-flow/tasks/`` (:mod:`pools.tokenflow.extract`).

    ``prompt_tokens`` includes ``cached_tokens`` (OpenAI usage semantics). 200 when every record
    was stored or already known; 400 with ``code: usage_rejected`` when any was rejected (the
    others are kept).
    """

    permission_classes = [permissions.IsAuthenticated, CanPostUsage]

    @extend_schema(request=OpenApiTypes.OBJECT, responses=OpenApiTypes.OBJECT)
    def post(self, request):
        records = request.data.get("records") if isinstance(request.data, dict) else None
        if not isinstance(records, list):
            raise UsageRejected('Send {"records": [...]}.', errors={"records": "a list"})
        result = usage_tokens_ingest(records=records)
        body = {"accepted": result.accepted, "duplicates": result.duplicates,
                "rejected": result.rejected}  # fmt: skip
        if result.rejected:
            return Response({"code": "usage_rejected", "detail": "Some records were rejected.",
                             **body}, status=status.HTTP_400_BAD_REQUEST)  # fmt: skip
        return Response(body, status=status.HTTP_200_OK)
