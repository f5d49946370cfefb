"""API of elastic capacity (issue #19, ``/api/v1/``): ``elastic-policies`` (read by the team
and pool admins; created and changed by team managers and pool admins through the services,
with a ``what-if`` over Prometheus history, queued: ``POST`` answers 202 and ``elastic-whatifs``
gives its progress, then its result) and ``scale-events`` (what the loop decided and why).
Domain errors become 400 / 403 / 409 bodies in :func:`portal.api.exception_handler`."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from pools.capacity.models import Allocation
from pools.capacity.selectors import allocation_list
from pools.elastic import selectors
from pools.elastic.filtersets import ScaleEventFilterSet
from pools.elastic.models import BurstOptIn, ElasticPolicy, ElasticWhatIf, ScaleEvent
from pools.elastic.services import (
    EDITABLE_FIELDS,
    WHATIF_MAX_DAYS,
    WhatIfSource,
    burst_opt_in_set,
    elastic_policy_create,
    elastic_policy_update,
    elastic_whatif_queue,
)
from pools.inventory.models import Pool
from pools.tenancy.models import Team
from pools.tenancy.selectors import team_list
from pools.web.api import QueuedRunSerializer, WhatIfDaysField
from pools.web.csv_numbers import plain_number
from pools.web.numbers import CARD_HOUR_PLACES


class VisibleAllocationField(serializers.PrimaryKeyRelatedField):
    """An allocation by id among those the caller may see: another team's answers "does not
    exist" like a missing one, so its existence does not leak."""

    def get_queryset(self):
        request = self.context.get("request")
        return Allocation.objects.visible_to(getattr(request, "user", None))


class ElasticPolicySerializer(serializers.ModelSerializer):
    allocation = VisibleAllocationField(queryset=Allocation.objects.none())
    team = serializers.SlugRelatedField(source="allocation.team", slug_field="slug", read_only=True)
    pool = serializers.SlugRelatedField(source="allocation.pool", slug_field="slug", read_only=True)
    gpu_model = serializers.SlugRelatedField(
        source="allocation.gpu_model", slug_field="slug", read_only=True
    )
    floor_cards = serializers.IntegerField(source="allocation.card_count", read_only=True)
    quota_backend = serializers.CharField(source="allocation.pool.quota_backend", read_only=True)
    scaling_last_7_days = serializers.SerializerMethodField()

    class Meta:
        model = ElasticPolicy
        fields = [
            "id", "allocation", "team", "pool", "gpu_model", "quota_backend", "floor_cards",
            *EDITABLE_FIELDS, "cards_held", "last_scaled_at", "last_decision", "updated_at",
            "scaling_last_7_days",
        ]  # fmt: skip
        read_only_fields = ["cards_held", "last_scaled_at", "last_decision", "updated_at"]

    def get_scaling_last_7_days(self, obj) -> dict | None:
        """``since``/``until``, ``burst_card_hours`` held above the floor and
        ``released_card_hours`` by down decisions (3 decimals, half-up), their ``burst_amount`` /
        ``released_amount`` (minor unit, strings) in ``currency`` at ``price_per_card_hour``
        (the rate card's burst price today; 0 for an allocation priced on use or by tokens,
        whose usage or tokens on those cards are its statement's lines) — ``null`` when
        unpriced, with ``reason``; of the burst card-hours, those placed in each burst pool
        (``burst_pools``: ``pool`` slug, ``card_hours``, that pool's ``price_per_card_hour``,
        issue 35), priced at it in the amounts; ``null`` when no pricing hook is configured."""
        money = _scale_money(self.context, [obj])
        m = money.get(obj.pk) if money else None
        if m is None:
            return None
        return {
            "since": m.start.isoformat(),
            "until": m.end.isoformat(),
            "burst_card_hours": plain_number(m.burst_card_hours, CARD_HOUR_PLACES),
            "burst_amount": _plain(m.burst_amount),
            "released_card_hours": plain_number(m.released_card_hours, CARD_HOUR_PLACES),
            "released_amount": _plain(m.released_amount),
            "currency": m.currency,
            "price_per_card_hour": _plain(m.price_per_card_hour, normalize=True),
            "burst_pools": [
                {
                    "pool": b.pool_slug,
                    "card_hours": plain_number(b.card_hours, CARD_HOUR_PLACES),
                    "price_per_card_hour": _plain(b.price_per_card_hour, normalize=True),
                }
                for b in m.burst_pools
            ],
            "reason": m.reason or None,
        }

    def get_fields(self):
        fields = super().get_fields()
        if self.instance is not None:  # the allocation is the policy's: not moved by an update
            fields["allocation"].read_only = True
        else:
            # Another team's allocation "does not exist", as a missing one does: the answer
            # must not tell a caller which ids are taken.
            user = getattr(self.context.get("request"), "user", None)
            fields["allocation"].queryset = (
                allocation_list(user=user)
                if user is not None and user.is_authenticated
                else Allocation.objects.none()  # the OpenAPI schema is drawn with no one
            )
        return fields


def _plain(value, *, normalize: bool = False) -> str | None:
    if value is None:
        return None
    return format(value.normalize(), "f") if normalize else str(value)


def _scale_money(context: dict, policies, events=()):
    """The scaling money of the last 7 days for ``policies`` (and the decisions of ``events``),
    computed once per response (the view puts it in the context for a whole page) or here for
    one object."""
    if "scale_money" not in context:
        now = timezone.now()
        start = now - timedelta(days=selectors.SCALE_COST_SPAN_DAYS)
        since = min((e.effective_at for e in events), default=None)
        context["scale_money"] = selectors.scale_costs(policies, start=start, now=now, since=since)
    return context["scale_money"]


class ScaleEventSerializer(serializers.ModelSerializer):
    allocation = serializers.IntegerField(source="policy.allocation_id", read_only=True)
    team = serializers.CharField(source="policy.allocation.team.slug", read_only=True)
    money = serializers.SerializerMethodField()

    class Meta:
        model = ScaleEvent
        fields = [
            "id", "policy", "allocation", "team", "decided_at", "source", "action", "reason",
            "cards_from", "cards_to", "effective_at", "message", "numbers", "applied",
            "apply_note", "money",
        ]  # fmt: skip
        read_only_fields = fields

    def get_money(self, obj) -> dict | None:
        """``cards`` the decision changed (+ added, - released), ``card_hours`` they were held
        (or not) until the next change or now (3 decimals, half-up), ``amount`` at the rate
        card's burst price today (minor unit, string) and ``currency``, both ``null`` when
        unpriced; ``null`` for a hold or without a pricing hook."""
        money = _scale_money(self.context, [obj.policy], [obj])
        m = money.get(obj.policy_id) if money else None
        d = m.decisions.get(obj.pk) if m else None
        if d is None:
            return None
        return {
            "cards": d.cards,
            "card_hours": plain_number(d.card_hours, CARD_HOUR_PLACES),
            "amount": _plain(d.amount),
            "currency": d.currency,
        }


class WhatIfRequestSerializer(serializers.Serializer):
    """``days`` (1-30, default 30) and ``source`` of a what-if to queue."""

    days = WhatIfDaysField(max_value=WHATIF_MAX_DAYS, default=WHATIF_MAX_DAYS)
    source = serializers.ChoiceField(
        choices=[s.value for s in WhatIfSource], required=False, allow_blank=True, default="",
        help_text="prometheus or recorded (the loop's own readings); default: Prometheus when "
        "configured, else recorded",
    )  # fmt: skip


class ElasticWhatIfSerializer(QueuedRunSerializer):
    """A queued what-if: ``status`` (``pending``, ``running``, ``done``, ``failed``),
    ``progress`` (per cent), ``days`` and ``source`` asked; once done ``result`` (``source``
    used, ``samples``, ``start``/``end``, ``covered_hours``, ``short``, the totals, the
    ``timeline`` ``[[unix s, cards], ...]`` and ``burst``: the load with and without the burst
    pool, the home card-hours priced by the allocation's method, ``home_price_basis``
    ``gpu-burst``, ``gpu-used`` or ``tokens``, with ``home_price_label``); once failed ``error`` and
    ``error_code`` (``unavailable``: no history source; ``prometheus_unavailable``;
    ``internal``)."""

    days = serializers.IntegerField(source="params.days", read_only=True)
    source = serializers.CharField(source="params.source", read_only=True)
    status_path = "/api/v1/elastic-whatifs/"

    class Meta:
        model = ElasticWhatIf
        fields = ["id", "policy", "days", "source", *QueuedRunSerializer.RUN_FIELDS]
        read_only_fields = fields


class ElasticPolicyViewSet(
    mixins.CreateModelMixin, mixins.UpdateModelMixin, viewsets.ReadOnlyModelViewSet
):
    """One elastic policy per allocation (its ``card_count`` is the guaranteed floor)."""

    queryset = ElasticPolicy.objects.none()  # for the schema; get_queryset scopes by user
    serializer_class = ElasticPolicySerializer
    filterset_fields = ["enabled"]

    def get_queryset(self):
        return selectors.elastic_policy_list(user=self.request.user)

    def get_serializer(self, *args, **kwargs):
        """A page of policies is priced together (two queries, not two per policy)."""
        if args and isinstance(args[0], list):
            kwargs.setdefault("context", self.get_serializer_context())
            _scale_money(kwargs["context"], args[0])
        return super().get_serializer(*args, **kwargs)

    def create(self, request, *args, **kwargs):
        form = self.get_serializer(data=request.data)
        form.is_valid(raise_exception=True)
        values = dict(form.validated_data)
        policy = elastic_policy_create(
            allocation=values.pop("allocation"), actor=request.user, **values
        )
        return Response(
            self.get_serializer(self.get_queryset().get(pk=policy.pk)).data,
            status=status.HTTP_201_CREATED,
        )

    def update(self, request, *args, **kwargs):
        policy = self.get_object()
        form = self.get_serializer(policy, data=request.data, partial=kwargs.get("partial", False))
        form.is_valid(raise_exception=True)
        policy = elastic_policy_update(policy=policy, actor=request.user, **form.validated_data)
        return Response(self.get_serializer(self.get_queryset().get(pk=policy.pk)).data)

    @extend_schema(
        request=WhatIfRequestSerializer,
        responses={202: ElasticWhatIfSerializer, 400: OpenApiTypes.OBJECT},
    )
    @action(detail=True, methods=["post"], url_path="what-if")
    def what_if(self, request, pk=None):
        """Queue a replay of the policy over the namespace's history (Prometheus', or the
        readings the portal's loop recorded): 202 with the what-if's state and its
        ``status_url`` (``Location`` too); ``GET`` it for the progress, then the result. Bad
        ``days`` / ``source``: 400 ``invalid_input`` with field errors, nothing queued."""
        policy = self.get_object()
        form = WhatIfRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        whatif = elastic_whatif_queue(
            policy=policy,
            actor=request.user,
            days=form.validated_data["days"],
            source=form.validated_data["source"] or None,
        )
        body = ElasticWhatIfSerializer(whatif).data
        return Response(
            body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["status_url"]}
        )


class ElasticWhatIfViewSet(mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """A queued what-if's progress and, once done, its result (whoever sees the policy)."""

    queryset = ElasticWhatIf.objects.none()
    serializer_class = ElasticWhatIfSerializer

    def get_queryset(self):
        return selectors.elastic_whatif_list(user=self.request.user)


class ScaleEventViewSet(viewsets.ReadOnlyModelViewSet):
    """What the elastic loop decided, newest first; filter by policy, allocation, action."""

    queryset = ScaleEvent.objects.none()
    serializer_class = ScaleEventSerializer
    filterset_class = ScaleEventFilterSet

    def get_queryset(self):
        return selectors.scale_event_list(user=self.request.user)

    def get_serializer(self, *args, **kwargs):
        """A page of events is priced together: their policies' money in two queries."""
        if args and isinstance(args[0], list):
            kwargs.setdefault("context", self.get_serializer_context())
            policies = {e.policy_id: e.policy for e in args[0]}
            _scale_money(kwargs["context"], list(policies.values()), args[0])
        return super().get_serializer(*args, **kwargs)


class BurstOptInSerializer(serializers.ModelSerializer):
    """A team's opt-in to a burst pool (issue 35): its elastic allocations may spill there."""

    team = serializers.SlugRelatedField(slug_field="slug", queryset=Team.objects.none())
    pool = serializers.SlugRelatedField(
        slug_field="slug", queryset=Pool.objects.filter(burst=True),
        help_text="A pool marked burst (/api/v1/pools/).",
    )  # fmt: skip

    class Meta:
        model = BurstOptIn
        fields = ["id", "team", "pool", "created_at"]
        read_only_fields = ["id", "created_at"]
        validators = []  # opting in twice is no error: the view answers 200 with the opt-in

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        if request is not None:  # another team's slug answers like a missing one
            self.fields["team"].queryset = team_list(user=request.user)


class BurstOptInViewSet(
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Teams' opt-ins to burst pools: list (your teams'; all for pool admins), opt in (the
    team's managers and pool admins; 201), opt out (204: cards already placed there go back
    as the loop hands them back)."""

    queryset = BurstOptIn.objects.none()
    serializer_class = BurstOptInSerializer

    def get_queryset(self):
        return (
            BurstOptIn.objects.visible_to(self.request.user)
            .select_related("team", "pool")
            .order_by("team__slug", "pool__slug")
        )

    @extend_schema(responses={201: BurstOptInSerializer, 200: BurstOptInSerializer})
    def create(self, request, *args, **kwargs):
        """Opt in: 201 with the new opt-in, 200 with the one there already (nothing changes,
        nothing audited), as the page says "had already opted into"."""
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        team, pool = serializer.validated_data["team"], serializer.validated_data["pool"]
        changed = burst_opt_in_set(team=team, pool=pool, actor=request.user, opted=True)
        opt_in = BurstOptIn.objects.select_related("team", "pool").get(team=team, pool=pool)
        return Response(
            self.get_serializer(opt_in).data,
            status=status.HTTP_201_CREATED if changed else status.HTTP_200_OK,
        )

    def perform_destroy(self, instance):
        burst_opt_in_set(team=instance.team, pool=instance.pool, actor=self.request.user,
                         opted=False)  # fmt: skip
