"""Budgets API (``/api/v1/budgets/``): everyone reads their teams' budgets with what each has
used this period; pool admins create, change and delete them through the services (audited;
domain errors become 400 / 403 / 409 bodies in :func:`portal.api.exception_handler`)."""

from __future__ import annotations

from decimal import ROUND_HALF_UP

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers, status, viewsets
from rest_framework.response import Response

from billing.budgets import services
from billing.budgets.filtersets import BudgetFilterSet
from billing.budgets.models import STORAGE_ERRORS, Budget
from billing.budgets.selectors import budget_list, budget_statuses
from billing.validators import currency_validator
from pools.inventory.models import GpuModel, Pool
from pools.tenancy.models import Team
from pools.tenancy.permissions import require_pool_admin
from pools.web.numbers import CARD_HOUR_PLACES


def _amount(places: int, **kwargs) -> serializers.DecimalField:
    """A budget amount (a limit, what was used, what remains) to ``places`` decimals."""
    return serializers.DecimalField(max_digits=20, decimal_places=places, **kwargs)


class MoneyDimensionSerializer(serializers.Serializer):
    """The money limit over the period, in ``unit`` (the budget's currency), to the 4 places a
    money limit is stored with: ``limit`` = ``base_limit`` + ``rollover``; ``used`` is null
    when unknown (a rate card in another currency); ``percent`` of ``limit``, 1 decimal."""

    unit = serializers.CharField()
    base_limit = _amount(4)
    rollover = _amount(4)
    limit = _amount(4)
    used = _amount(4, allow_null=True)
    remaining = _amount(4, allow_null=True)
    percent = serializers.DecimalField(max_digits=8, decimal_places=1, allow_null=True)


class CardHoursDimensionSerializer(serializers.Serializer):
    """The card-hour limit over the period (``unit`` ``card-hours``), the same fields as the
    money limit's but every amount in card-hours to 3 decimals (CARD_HOUR_PLACES), rounded
    half-up, as the pages, the CSVs and the budget's own ``card_hours_limit`` give them
    (``959.7186`` -> ``"959.719"``)."""

    unit = serializers.CharField()
    base_limit = _amount(CARD_HOUR_PLACES, rounding=ROUND_HALF_UP)
    rollover = _amount(CARD_HOUR_PLACES, rounding=ROUND_HALF_UP)
    limit = _amount(CARD_HOUR_PLACES, rounding=ROUND_HALF_UP)
    used = _amount(CARD_HOUR_PLACES, rounding=ROUND_HALF_UP, allow_null=True)
    remaining = _amount(CARD_HOUR_PLACES, rounding=ROUND_HALF_UP, allow_null=True)
    percent = serializers.DecimalField(max_digits=8, decimal_places=1, allow_null=True)


class BudgetStatusSerializer(serializers.Serializer):
    """The period containing now: its bounds, each limit, the alert threshold reached (50 / 80
    / 100, null below 50) and the forecast run-out (null: not within the period)."""

    period = serializers.DateField()
    starts_at = serializers.DateTimeField()
    ends_at = serializers.DateTimeField()
    card_hours = CardHoursDimensionSerializer(allow_null=True)
    money = MoneyDimensionSerializer(allow_null=True)
    percent = serializers.DecimalField(max_digits=8, decimal_places=1, allow_null=True)
    alert = serializers.IntegerField(allow_null=True)
    run_out_at = serializers.DateTimeField(allow_null=True)


SLURM_FIELDS = [
    "slurm_tres", "slurm_minutes", "slurm_clusters", "slurm_synced_at", "slurm_note"
]  # fmt: skip
"""What Slurm enforces of the budget (GrpTRESMins written, or why not): read only."""


class CurrencyField(serializers.CharField):
    """An ISO 4217 code read as the budget service reads it: stripped and upper-cased before the
    three-capital-letters check (``" eur "`` is ``EUR``, as on the budget page); empty is none."""

    def to_internal_value(self, data) -> str:
        return super().to_internal_value(data).strip().upper()


class BudgetSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(
        slug_field="slug", queryset=Team.objects.all(), required=False, allow_null=True
    )
    pool = serializers.SlugRelatedField(
        slug_field="slug", queryset=Pool.objects.all(), required=False, allow_null=True
    )
    gpu_model = serializers.SlugRelatedField(
        slug_field="slug", queryset=GpuModel.objects.all(), required=False, allow_null=True
    )
    currency = CurrencyField(
        max_length=3, required=False, allow_blank=True, validators=[currency_validator]
    )
    status = serializers.SerializerMethodField()

    class Meta:
        model = Budget
        fields = ["id", *services.FIELDS, "status", *SLURM_FIELDS, "created_at", "updated_at"]
        read_only_fields = [*SLURM_FIELDS, "created_at", "updated_at"]
        validators = []  # one budget per scope and period: the service answers 409
        extra_kwargs = {name: {"error_messages": errors} for name, errors in STORAGE_ERRORS.items()}

    @extend_schema_field(BudgetStatusSerializer(allow_null=True))
    def get_status(self, budget) -> dict | None:
        status = self.context.get("statuses", {}).get(budget.pk)
        return BudgetStatusSerializer(status).data if status is not None else None


class BudgetViewSet(viewsets.ModelViewSet):
    """Budgets of the caller's teams (all for pool admins), each with its current period's
    consumption; filter by ``team``, ``pool``, ``gpu_model``, ``period``, ``enforcement``."""

    queryset = Budget.objects.none()  # for the schema; get_queryset scopes by user
    serializer_class = BudgetSerializer
    filterset_class = BudgetFilterSet

    def get_queryset(self):
        return budget_list(user=self.request.user).order_by("team__name", "period", "pk")

    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        context = {**self.get_serializer_context(), "statuses": budget_statuses(page)}
        return self.get_paginated_response(BudgetSerializer(page, many=True, context=context).data)

    def retrieve(self, request, *args, **kwargs):
        return Response(self._data(self.get_object()))

    def create(self, request, *args, **kwargs):
        # Before the body: a member's 400 would tell which team slugs exist.
        require_pool_admin(request.user, services.BUDGETS_ADMIN_ONLY)
        form = self.get_serializer(data=request.data)
        form.is_valid(raise_exception=True)
        budget = services.budget_create(actor=request.user, **form.validated_data)
        return Response(self._data(budget), status=status.HTTP_201_CREATED)

    def update(self, request, *args, **kwargs):
        require_pool_admin(request.user, services.BUDGETS_ADMIN_ONLY)
        budget = self.get_object()
        form = self.get_serializer(budget, data=request.data, partial=kwargs.get("partial", False))
        form.is_valid(raise_exception=True)
        budget = services.budget_update(budget=budget, actor=request.user, **form.validated_data)
        return Response(self._data(budget))

    def destroy(self, request, *args, **kwargs):
        require_pool_admin(request.user, services.BUDGETS_ADMIN_ONLY)
        services.budget_delete(budget=self.get_object(), actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

    def _data(self, budget: Budget) -> dict:
        budget = self.get_queryset().get(pk=budget.pk)
        context = {**self.get_serializer_context(), "statuses": budget_statuses([budget])}
        return BudgetSerializer(budget, context=context).data
