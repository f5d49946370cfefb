"""API of maintenance windows (issue 32 item 2, ``/api/v1/maintenance-windows/``): read by
everyone signed in (a window is pool-wide news), planned and cancelled by pool admins through
:mod:`pools.maintenance.services.windows`.

- ``POST .../preview/``: the approved allocations the window would collide with and the cards
  and MIG slices (by profile) each team loses, nothing written;
- ``POST ...`` (create): saves the window when ``acknowledged`` names every colliding
  allocation, else ``409 maintenance_collisions`` with the same list;
- ``POST .../plan-waves/``: an upgrade of a driver group as waves; ``confirm: false`` answers
  the plan, ``true`` saves one window per wave; ``409 no_wave_plan`` says why there is none;
- ``POST .../<id>/cancel/``.
"""

from __future__ import annotations

from datetime import timedelta

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from pools.common.errors import InvalidInput
from pools.inventory.models import DriverGroup, Pool
from pools.maintenance.models import TITLE_MAX_LENGTH, MaintenanceScope, MaintenanceWindow
from pools.maintenance.selectors import (
    WaveAsk,
    maintenance_collisions,
    maintenance_wave_plan,
    maintenance_window_list,
    scope_nodes,
    team_losses,
)
from pools.maintenance.services.windows import (
    MAX_WAVES,
    maintenance_waves_create,
    maintenance_window_cancel,
    maintenance_window_create,
    wave_ask_errors,
)
from pools.tenancy.permissions import require_pool_admin
from pools.web.api import (
    AwareDateTimeField,
    CancelActionMixin,
    PoolAdminCreateMixin,
    SlugLookupField,
)

MAX_HOSTS = 2000


class MaintenanceWindowSerializer(serializers.ModelSerializer):
    pool = SlugLookupField(
        slug_field="slug", queryset=Pool.objects.all(), required=False, allow_null=True
    )
    starts_at = AwareDateTimeField()
    ends_at = AwareDateTimeField()
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000)
    driver_group = serializers.SlugRelatedField(
        slug_field="branch",
        queryset=DriverGroup.objects.all(),
        required=False,
        allow_null=True,
        help_text="The driver branch, e.g. 550.",
    )
    title = serializers.CharField(max_length=TITLE_MAX_LENGTH)
    scope = serializers.ChoiceField(choices=MaintenanceScope.choices)
    hostnames = serializers.ListField(
        child=serializers.CharField(max_length=253),
        required=False,
        max_length=MAX_HOSTS,
        help_text="The nodes, for scope nodes; the nodes taken, when read.",
    )
    acknowledged = serializers.ListField(
        child=serializers.IntegerField(min_value=1),
        required=False,
        write_only=True,
        max_length=MAX_HOSTS,
        help_text="Ids of the colliding allocations the admin has seen (from preview).",
    )

    class Meta:
        model = MaintenanceWindow
        fields = [
            "id", "title", "scope", "pool", "driver_group", "hostnames", "starts_at", "ends_at",
            "reason", "status", "wave", "wave_number", "acknowledged", "scheduler_binding",
            "created_at",
        ]  # fmt: skip
        # scheduler_binding: {"reservations": [{"pool", "reservation", "nodes"}], "notes": []}
        read_only_fields = ["status", "wave", "wave_number", "scheduler_binding", "created_at"]

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["hostnames"] = sorted(n.hostname for n in instance.nodes.all())
        return data


class MaintenanceCollisionSerializer(serializers.Serializer):
    allocation = serializers.IntegerField()
    team = serializers.CharField()
    team_name = serializers.CharField()
    pool = serializers.CharField()
    gpu_model = serializers.CharField()
    profile = serializers.CharField(
        allow_blank=True, help_text="The MIG profile of a slice allocation; blank: whole cards."
    )
    cards = serializers.IntegerField(help_text="Whole cards held; 0 for a slice allocation.")
    cards_lost = serializers.IntegerField(help_text="Exact when exact, else at most this many.")
    slices = serializers.IntegerField(help_text="MIG slices of profile held; 0 for cards.")
    slices_lost = serializers.IntegerField(help_text="Exact when exact, else at most this many.")
    exact = serializers.BooleanField()
    how = serializers.CharField()


class ProfileLossSerializer(serializers.Serializer):
    profile = serializers.CharField()
    slices_lost = serializers.IntegerField()


class TeamLossSerializer(serializers.Serializer):
    team = serializers.CharField()
    team_name = serializers.CharField()
    cards_lost = serializers.IntegerField()
    slices_lost = ProfileLossSerializer(many=True, help_text="By MIG profile, never summed.")


class MaintenancePreviewSerializer(serializers.Serializer):
    hostnames = serializers.ListField(child=serializers.CharField())
    collisions = MaintenanceCollisionSerializer(many=True)
    teams = TeamLossSerializer(many=True)


class MaintenanceCancelSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=500)


class WaveAskSerializer(serializers.Serializer):
    driver_group = serializers.SlugRelatedField(
        slug_field="branch", queryset=DriverGroup.objects.all()
    )
    pool = SlugLookupField(
        slug_field="slug", queryset=Pool.objects.all(), required=False, allow_null=True
    )
    title = serializers.CharField(max_length=TITLE_MAX_LENGTH)
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000)
    first_start = AwareDateTimeField()
    window_hours = serializers.IntegerField(min_value=1, max_value=31 * 24)
    gap_hours = serializers.IntegerField(min_value=0, max_value=31 * 24, default=0)
    nodes_per_wave = serializers.IntegerField(min_value=1, max_value=MAX_HOSTS)
    max_waves = serializers.IntegerField(min_value=1, max_value=MAX_WAVES, default=12)
    confirm = serializers.BooleanField(default=False)


class WaveSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    starts_at = serializers.DateTimeField()
    ends_at = serializers.DateTimeField()
    hostnames = serializers.ListField(child=serializers.CharField())


class WavePlanSerializer(serializers.Serializer):
    complete = serializers.BooleanField()
    waves = WaveSerializer(many=True)
    unplanned = serializers.ListField(child=serializers.CharField())
    reason = serializers.CharField(allow_null=True)
    windows = serializers.ListField(child=serializers.IntegerField(), help_text="Saved ids.")


def wave_ask(data: dict) -> WaveAsk:
    return WaveAsk(
        driver_group=data["driver_group"],
        pool=data.get("pool"),
        first_start=data["first_start"],
        length=timedelta(hours=data["window_hours"]),
        gap=timedelta(hours=data["gap_hours"]),
        per_wave=data["nodes_per_wave"],
        max_slots=data["max_waves"],
    )


@extend_schema_view(
    create=extend_schema(responses={201: MaintenanceWindowSerializer}),
    cancel=extend_schema(
        request=MaintenanceCancelSerializer, responses=MaintenanceWindowSerializer
    ),
)
class MaintenanceWindowViewSet(
    PoolAdminCreateMixin, CancelActionMixin, viewsets.ReadOnlyModelViewSet
):
    """Maintenance windows: nodes, a pool or a driver group out for a window."""

    queryset = MaintenanceWindow.objects.none()  # for the schema; get_queryset reads the user
    serializer_class = MaintenanceWindowSerializer
    filterset_fields = ["status", "scope", "wave"]
    create_refusal = "Only pool admins may plan maintenance."
    create_service = staticmethod(maintenance_window_create)
    cancel_serializer_class = MaintenanceCancelSerializer
    cancel_service = staticmethod(maintenance_window_cancel)
    cancel_keyword = "window"

    def get_queryset(self):
        return maintenance_window_list(user=self.request.user).prefetch_related("nodes")

    def _fields(self, request) -> dict:
        form = self.get_serializer(data=request.data)
        form.is_valid(raise_exception=True)
        return dict(form.validated_data)

    @extend_schema(request=MaintenanceWindowSerializer, responses=MaintenancePreviewSerializer)
    @action(detail=False, methods=["post"])
    def preview(self, request):
        """The collisions of the window asked for; nothing is written."""
        require_pool_admin(request.user, "Only pool admins may plan maintenance.")
        fields = self._fields(request)
        nodes, errors = scope_nodes(
            scope=fields["scope"],
            pool=fields.get("pool"),
            driver_group=fields.get("driver_group"),
            hostnames=fields.get("hostnames", ()),
        )
        if fields["ends_at"] <= fields["starts_at"]:
            errors["ends_at"] = "After the start."
        if errors:
            raise InvalidInput("The maintenance window has invalid fields.", errors=errors)
        found = maintenance_collisions(nodes=nodes, start=fields["starts_at"],
                                       end=fields["ends_at"])  # fmt: skip
        return Response(
            {
                "hostnames": [n.hostname for n in nodes],
                "collisions": [c.as_dict() for c in found],
                "teams": team_losses(found),
            }
        )

    @extend_schema(
        request=WaveAskSerializer,
        responses={200: WavePlanSerializer, 201: WavePlanSerializer},
    )
    @action(detail=False, methods=["post"], url_path="plan-waves")
    def plan_waves(self, request):
        """Plan a driver group's upgrade as waves (see
        :mod:`pools.maintenance.waves` for the rule); ``confirm`` saves them."""
        require_pool_admin(request.user, "Only pool admins may plan maintenance.")
        form = WaveAskSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        ask = wave_ask(data)
        errors = wave_ask_errors(ask)
        if errors:
            raise InvalidInput("The wave plan has invalid fields.", errors=errors)
        if data["confirm"]:
            windows = maintenance_waves_create(
                actor=request.user, ask=ask, title=data["title"], reason=data["reason"]
            )
            body = {
                "complete": True,
                "waves": [
                    {
                        "number": w.wave_number,
                        "starts_at": w.starts_at,
                        "ends_at": w.ends_at,
                        "hostnames": sorted(n.hostname for n in w.nodes.all()),
                    }
                    for w in windows
                ],
                "unplanned": [],
                "reason": None,
                "windows": [w.pk for w in windows],
            }
            return Response(WavePlanSerializer(body).data, status=status.HTTP_201_CREATED)
        plan, _ = maintenance_wave_plan(ask)
        body = {
            "complete": plan.complete,
            "waves": [
                {
                    "number": w.number,
                    "starts_at": w.starts_at,
                    "ends_at": w.ends_at,
                    "hostnames": list(w.hostnames),
                }
                for w in plan.waves
            ],  # fmt: skip
            "unplanned": list(plan.unplanned),
            "reason": plan.reason,
            "windows": [],
        }
        return Response(WavePlanSerializer(body).data)
