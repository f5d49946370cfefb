"""Stranded capacity in the API: what the admin dashboard's *Stranded capacity* table and its CSV
show, as JSON (pool admins only, like the dashboard).

``GET /api/v1/stranded-capacity/?pool=<slug>&gpu_model=<slug>&driver_branch=<branch>`` reads
the same snapshot the dashboard reads (:func:`pools.dashboards.stranded.stranded_for_dashboard`:
stored in the cache by a beat task every 10 minutes, computed when there is none; ``computed_at``
says when) and prices it as the dashboard does (:func:`billing.dashboards.costs.stranded_costs`).
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.dashboards import costs
from pools.dashboards.capacity import DashboardFilters
from pools.dashboards.stranded import HORIZON, stranded_for_dashboard
from pools.inventory.models import DriverGroup, GpuModel, Pool
from pools.web.api import IsPoolAdmin
from pools.web.numbers import CARD_HOUR_PLACES


def _card_hours(**kwargs) -> serializers.DecimalField:
    """Card-hours as a string with :data:`~pools.web.numbers.CARD_HOUR_PLACES` (3) decimals,
    rounded half-up, as every other card-hours figure of the API (``"2.025"``, ``"287.970"``)."""
    return serializers.DecimalField(
        max_digits=None,
        decimal_places=CARD_HOUR_PLACES,
        rounding=ROUND_HALF_UP,
        read_only=True,
        **kwargs,
    )


class StrandedQuerySerializer(serializers.Serializer):
    """Filters, each optional: a pool and a GPU model by slug, a driver group by branch. An
    unknown one is a 400 with the field named (the dashboard page shows everything instead)."""

    pool = serializers.SlugRelatedField(
        slug_field="slug", queryset=Pool.objects.all(), required=False, help_text="Pool slug."
    )
    gpu_model = serializers.SlugRelatedField(
        slug_field="slug",
        queryset=GpuModel.objects.all(),
        required=False,
        help_text="GPU model slug, e.g. a100_80g_sxm.",
    )
    driver_branch = serializers.SlugRelatedField(
        slug_field="branch",
        queryset=DriverGroup.objects.all(),
        required=False,
        help_text="Driver branch, e.g. 550 (computed for it now, not read from the snapshot).",
    )


class WinBackSerializer(serializers.Serializer):
    node = serializers.CharField(help_text="Node hostname.")
    stranded = serializers.IntegerField(help_text="Its free cards outside whole groups now.")
    target_cards = serializers.IntegerField(help_text="The whole group won back (cards).")
    cards_to_free = serializers.IntegerField(help_text="Held cards to move or let end.")


class WorstNodeSerializer(serializers.Serializer):
    node = serializers.CharField(help_text="Node hostname.")
    stranded_card_hours = _card_hours()


class StrandedRowSerializer(serializers.Serializer):
    """One pool × GPU model over the horizon; card-hours of schedulable cards."""

    pool = serializers.CharField(help_text="Pool slug.")
    pool_name = serializers.CharField()
    gpu_model = serializers.CharField(help_text="GPU model slug.")
    gpu_model_name = serializers.CharField()
    cards = serializers.IntegerField(help_text="Schedulable cards.")
    free_card_hours = _card_hours()
    stranded_card_hours = _card_hours(
        help_text="Free card-hours outside whole groups of the largest shape a domain allows.",
    )
    stranded_percent = serializers.DecimalField(
        max_digits=None,
        decimal_places=1,
        allow_null=True,
        read_only=True,
        help_text="Stranded of free card-hours, %; null when nothing is free.",
    )
    stranded_for_2_card_hours = _card_hours()
    stranded_for_4_card_hours = _card_hours()
    stranded_for_8_card_hours = _card_hours()
    unknown_topology_card_hours = _card_hours(
        help_text="Free card-hours on nodes whose NVLink domains are unknown: neither stranded "
        "nor usable.",
    )
    price_per_card_hour = serializers.DecimalField(
        max_digits=None,
        decimal_places=4,
        allow_null=True,
        read_only=True,
        help_text="Reserved card-hour rate in force now; null when the rate card has none.",
    )
    amount = serializers.DecimalField(
        max_digits=None,
        decimal_places=2,
        allow_null=True,
        read_only=True,
        help_text="stranded_card_hours × price_per_card_hour, half-up to the minor unit; null "
        "when unpriced (unknown, not 0).",
    )
    currency = serializers.CharField(allow_null=True, help_text="ISO 4217; null when unpriced.")
    worst_nodes = WorstNodeSerializer(many=True)
    win_back = WinBackSerializer(many=True)


class StrandedCapacitySerializer(serializers.Serializer):
    computed_at = serializers.DateTimeField(help_text="When the snapshot was computed.")
    horizon_end = serializers.DateTimeField(help_text="computed_at + 4 weeks.")
    results = StrandedRowSerializer(many=True)


def _row(cost: costs.StrandedCost) -> dict:
    """One priced row as :class:`StrandedRowSerializer` reads it."""
    row = cost.row
    return {
        "pool": row.pool_slug,
        "pool_name": row.pool,
        "gpu_model": row.gpu_model_slug,
        "gpu_model_name": row.gpu_model,
        "cards": row.cards,
        "free_card_hours": row.free_card_hours,
        "stranded_card_hours": row.stranded_card_hours,
        "stranded_percent": row.stranded_share,
        **{f"stranded_for_{n}_card_hours": row.card_hours_for.get(n) for n in (2, 4, 8)},
        "unknown_topology_card_hours": row.unknown_topology_card_hours,
        "price_per_card_hour": cost.price_per_card_hour,
        "amount": cost.amount,
        "currency": cost.currency,
        "worst_nodes": [{"node": n, "stranded_card_hours": h} for n, h in row.worst_nodes],
        "win_back": row.win_back,
    }


class StrandedCapacityView(APIView):
    """Stranded capacity per pool × GPU model over the next 4 weeks (pool admins)."""

    permission_classes = [IsPoolAdmin]

    @extend_schema(
        parameters=[StrandedQuerySerializer],
        responses={200: StrandedCapacitySerializer},
        summary="Stranded capacity, next 4 weeks",
    )
    def get(self, request):
        """Free card-hours no common shape (1, 2, 4 or 8 cards on one node in one NVLink
        domain) can use, per pool × GPU model, priced at the reserved rate in force now: the
        dashboard's table. Read from the snapshot the dashboard reads (every 10 minutes)."""
        query = StrandedQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        found = query.validated_data
        filters = DashboardFilters(
            pool=found["pool"].slug if "pool" in found else None,
            gpu_model=found["gpu_model"].slug if "gpu_model" in found else None,
            driver_branch=found["driver_branch"].branch if "driver_branch" in found else None,
        )
        now = timezone.now()
        snapshot = stranded_for_dashboard(filters=filters, now=now)
        body = {
            "computed_at": snapshot.computed_at,
            "horizon_end": snapshot.computed_at + HORIZON,
            "results": [_row(c) for c in costs.stranded_costs(snapshot.rows, now=now)],
        }
        return Response(StrandedCapacitySerializer(body).data)
