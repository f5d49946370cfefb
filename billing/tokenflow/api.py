"""API of token flow (``/api/v1/token-flow/tasks/``): the agent tasks of the teams the caller
may see, with their tokens, wasted calls and cost; ``summary/`` adds them up (what the page
shows) and ``{id}/calls/`` lists a task's stored calls. Filters as on the page: ``team`` (slug),
``model`` (served model), ``since`` / ``until`` (days of the first call, inclusive, billing time
zone; default the last 30 days), ``ordering`` (``-cost`` default, ``-wasted_cost``, ``-calls``,
``-retries``, ``-first_call_at``, ``first_call_at``). Money is a decimal string with
``currency``, ``null`` when the served model has no token price."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from billing.conf import billing_zone
from billing.pricing import round_money
from billing.tokenflow.forms import ORDERINGS, TokenFlowFilterForm
from billing.tokenflow.selectors import (
    cost_order_key,
    flow_totals,
    priced_tasks,
    task_days_between,
    token_prices,
)
from pools.tenancy.selectors import UNSEEN_TEAM
from pools.tokenflow import selectors
from pools.tokenflow.models import AgentCall, AgentTask
from pools.web.api import visible_teams

FILTERS = [
    OpenApiParameter("team", str, description="Team slug (one the caller may see)."),
    OpenApiParameter("model", str, description="Served model, as the gateway names it."),
    OpenApiParameter(
        "since",
        str,
        description="First day (YYYY-MM-DD) of the tasks' first call; "
        "an ISO 8601 date-time counts as the day it names. 2000-01-01 to 2100-12-31.",
    ),
    OpenApiParameter("until", str, description="Last day (YYYY-MM-DD), inclusive; as ``since``."),
    OpenApiParameter("ordering", str, enum=list(ORDERINGS), description="Default -cost."),
]


class AgentTaskSerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.slug")
    mean_latency_s = serializers.SerializerMethodField(help_text="Mean step latency, seconds.")
    first_call_input_tokens = serializers.IntegerField(source="first_input_tokens",
                                                       allow_null=True)  # fmt: skip
    last_call_input_tokens = serializers.IntegerField(source="last_input_tokens", allow_null=True)
    cost = serializers.SerializerMethodField(help_text="At the token prices, minor unit.")
    wasted_cost = serializers.SerializerMethodField(help_text="Of the retries and errors.")
    currency = serializers.SerializerMethodField()

    class Meta:
        model = AgentTask
        fields = [
            "id", "team", "served_model", "task_id", "first_call_at", "last_call_at", "calls",
            "metered_calls", "unmetered_calls", "replayed_calls", "outcomes_known", "retries",
            "errors", "input_tokens", "cached_tokens", "output_tokens", "wasted_input_tokens",
            "wasted_cached_tokens", "wasted_output_tokens", "tool_return_tokens",
            "tool_return_calls", "mean_latency_s", "first_call_input_tokens",
            "last_call_input_tokens", "cost", "wasted_cost", "currency",
        ]  # fmt: skip

    def get_mean_latency_s(self, task) -> float | None:
        return task.latency_s_total / task.latency_calls if task.latency_calls else None

    def _money(self, value) -> str | None:
        return None if value is None else str(round_money(value, self.context["currency"]))

    def get_cost(self, task) -> str | None:
        return self._money(getattr(task, "cost", None))

    def get_wasted_cost(self, task) -> str | None:
        return self._money(getattr(task, "wasted_cost", None))

    def get_currency(self, task) -> str:
        return self.context["currency"]


class AgentCallSerializer(serializers.ModelSerializer):
    class Meta:
        model = AgentCall
        fields = [
            "call_index", "called_at", "input_tokens", "cached_tokens", "output_tokens",
            "tool_return_tokens", "outcome", "latency_s", "replayed",
        ]  # fmt: skip


class FlowSummarySerializer(serializers.Serializer):
    tasks = serializers.IntegerField()
    calls = serializers.IntegerField()
    calls_per_task_mean = serializers.FloatField(allow_null=True)
    calls_per_task_p50 = serializers.IntegerField(allow_null=True)
    calls_per_task_p90 = serializers.IntegerField(allow_null=True)
    calls_per_task = serializers.DictField(child=serializers.IntegerField(),
                                           help_text="{calls in a task: tasks}")  # fmt: skip
    input_tokens_per_call = serializers.FloatField(allow_null=True)
    output_tokens_per_call = serializers.FloatField(allow_null=True)
    cached_share = serializers.FloatField(allow_null=True, help_text="0-1 of input tokens.")
    retry_share = serializers.FloatField(allow_null=True, help_text="Of calls with an outcome.")
    wasted_calls = serializers.IntegerField(help_text="Retries + errors.")
    wasted_share = serializers.FloatField(allow_null=True)
    latency_mean_s = serializers.FloatField(allow_null=True)
    tool_return_tokens_mean = serializers.FloatField(allow_null=True)
    first_call_input_mean = serializers.FloatField(allow_null=True)
    last_call_input_mean = serializers.FloatField(allow_null=True)
    sums = serializers.DictField(child=serializers.FloatField(allow_null=True))
    cost = serializers.CharField(allow_null=True)
    wasted_cost = serializers.CharField(allow_null=True)
    unpriced_tasks = serializers.IntegerField()
    currency = serializers.CharField()


@extend_schema_view(list=extend_schema(parameters=FILTERS))
class AgentTaskViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = AgentTaskSerializer

    def _filtered(self):
        """The visible tasks narrowed by the query's filters, and the filters
        ``(team_id, since, until, model, models priced, ordering)``; 400 on a bad filter."""
        request = self.request
        tasks = selectors.task_list(user=request.user).select_related("team")
        team_slug = request.query_params.get("team")
        team_id = None
        if team_slug:
            team = visible_teams(request).filter(slug=team_slug).first()
            if team is None:
                raise serializers.ValidationError({"team": [UNSEEN_TEAM]})
            team_id = team.pk
        if team_id is not None:
            models = selectors.team_models(team_id=team_id)
        else:
            models = selectors.visible_models(user=request.user)
        today = timezone.now().astimezone(billing_zone()).date()
        form = TokenFlowFilterForm(request.query_params or None, models=models, today=today)
        if form.is_bound and not form.is_valid():
            raise serializers.ValidationError(form.errors)
        since, until, model, ordering = form.window()
        tasks = selectors.tasks_in(tasks, team_id=team_id, model=model, since=since, until=until)
        return tasks, (team_id, since, until, model, [model] if model else models, ordering)

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return AgentTask.objects.none()
        if self.action in ("retrieve", "calls"):
            return selectors.task_list(user=self.request.user).select_related("team")
        tasks, (team_id, since, until, model, models, ordering) = self._filtered()
        prices = token_prices(since=since, until=until)
        priced, self.currency = priced_tasks(tasks, prices=prices, models=models), prices.currency
        days = task_days_between(user=self.request.user, team_id=team_id, model=model,
                                 since=since, until=until)  # fmt: skip
        name = ordering.removeprefix("-")
        field = cost_order_key(name, prices=prices, models=models, days=days)
        key = field.desc(nulls_last=True) if ordering.startswith("-") else field.asc()
        return priced.order_by(key, "-first_call_at", "pk")

    def paginate_queryset(self, queryset):
        """The list's page as the page does it (``billing.tokenflow.views._page_rows``): the
        page's ids sorted as narrow rows, then those tasks priced, in that order."""
        if self.action != "list":
            return super().paginate_queryset(queryset)
        ids = super().paginate_queryset(queryset.values_list("pk", flat=True))
        if ids is None:
            return None
        rows = queryset.in_bulk(ids)
        return [rows[pk] for pk in ids if pk in rows]

    def get_serializer_context(self):
        context = super().get_serializer_context()
        if not hasattr(self, "currency"):
            self.currency = settings.BILLING_CURRENCY
        return {**context, "currency": self.currency}

    def retrieve(self, request, *args, **kwargs):
        task = self.get_object()
        _, priced, currency, _ = self._priced_one(task)
        self.currency = currency
        return Response(self.get_serializer(priced).data)

    def _priced_one(self, task):
        qs = AgentTask.objects.filter(pk=task.pk).select_related("team")
        since = task.first_call_at
        prices = token_prices(since=since, until=since + timedelta(seconds=1))
        priced = priced_tasks(qs, prices=prices, models=[task.served_model])
        return qs, priced.get(), prices.currency, None

    @extend_schema(responses=AgentCallSerializer(many=True))
    @action(detail=True, methods=["get"])
    def calls(self, request, pk=None):
        """The task's calls still stored (``TOKENFLOW_CALL_RETENTION_DAYS``), in call order."""
        task = self.get_object()
        page = self.paginate_queryset(selectors.task_calls(task=task))
        return self.get_paginated_response(AgentCallSerializer(page, many=True).data)

    @extend_schema(parameters=FILTERS, responses=FlowSummarySerializer)
    @action(detail=False, methods=["get"])
    def summary(self, request):
        """The filtered tasks added up: what the token-flow page shows."""
        team_id, since, until, model, models, _ = self._filtered()[1]
        days = task_days_between(user=request.user, team_id=team_id, model=model,
                                 since=since, until=until)  # fmt: skip
        prices = token_prices(since=since, until=until)
        summary, money = flow_totals(days, prices=prices, models=models)
        fields = FlowSummarySerializer().fields
        body = {name: getattr(summary, name) for name in fields if hasattr(summary, name)}
        body |= {
            "calls_per_task": {str(k): v for k, v in sorted(summary.calls_per_task.items())},
            "sums": summary.sums,
            "cost": None if money.cost is None else str(money.cost),
            "wasted_cost": None if money.wasted_cost is None else str(money.wasted_cost),
            "unpriced_tasks": money.unpriced_tasks,
            "currency": money.currency,
        }
        return Response(body)
