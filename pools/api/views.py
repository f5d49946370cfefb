"""Viewsets of the inventory API; each list is paginated and filtered by its FilterSet."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from pools import selectors
from pools.api import serializers as s
from pools.audit import audit_event_record
from pools.filtersets import (
    DriverGroupFilterSet,
    GpuFilterSet,
    GpuModelFilterSet,
    NodeFilterSet,
    PoolFilterSet,
)
from pools.services.gpu_models import gpu_model_alias_map
from pools.services.inventory_import import inventory_import_file
from pools.services.pools import pool_delete, pool_update


class IsPoolAdminOrReadOnly(permissions.BasePermission):
    """Any signed-in user reads; only pool admins (staff) write."""

    def has_permission(self, request, view):
        if not (request.user and request.user.is_authenticated):
            return False
        return request.method in permissions.SAFE_METHODS or request.user.is_staff


class IsPoolAdmin(permissions.BasePermission):
    def has_permission(self, request, view):
        return bool(request.user and request.user.is_authenticated and request.user.is_staff)


class GpuModelViewSet(viewsets.ReadOnlyModelViewSet):
    """The GPU model catalogue with published specs and the aliases each source uses."""

    serializer_class = s.GpuModelSerializer
    filterset_class = GpuModelFilterSet
    lookup_field = "slug"

    def get_queryset(self):
        return selectors.gpu_model_list().order_by("name")


class DriverGroupViewSet(viewsets.ReadOnlyModelViewSet):
    """Driver branches with the highest CUDA version every node of the branch supports."""

    serializer_class = s.DriverGroupSerializer
    filterset_class = DriverGroupFilterSet
    lookup_field = "branch"

    def get_queryset(self):
        return selectors.driver_group_list().order_by("branch")


class PoolViewSet(viewsets.ModelViewSet):
    """Pools (Slurm partitions / Kubernetes node groups); pool admins create and edit them."""

    serializer_class = s.PoolSerializer
    filterset_class = PoolFilterSet
    permission_classes = [IsPoolAdminOrReadOnly]
    lookup_field = "slug"

    def get_queryset(self):
        return selectors.pool_list().order_by("name")

    def perform_create(self, serializer):
        pool = serializer.save()
        # Answer as reads do: with node_count and gpu_count (annotations, 0 for a new pool).
        serializer.instance = self.get_queryset().get(pk=pool.pk)
        audit_event_record(
            actor=self.request.user, action="pool.created", obj=pool, after=serializer.data
        )

    def perform_update(self, serializer):
        serializer.instance = pool_update(
            pool=serializer.instance,
            changes=serializer.validated_data,
            actor=self.request.user,
            before=dict(s.PoolSerializer(serializer.instance).data),
            render=lambda pool: dict(s.PoolSerializer(pool).data),
        )

    def perform_destroy(self, instance):
        pool_delete(
            pool=instance, actor=self.request.user, before=dict(s.PoolSerializer(instance).data)
        )

    @extend_schema(
        parameters=[OpenApiParameter("cuda", str, required=True, description="e.g. 12.4")],
        responses={200: dict},
    )
    @action(detail=False, methods=["get"], url_path="cuda-support")
    def cuda_support(self, request):
        """Which pools can run a CUDA version: cards on nodes whose driver supports it."""
        cuda = request.query_params.get("cuda", "")
        try:
            rows = selectors.pools_supporting_cuda(cuda=cuda)
        except ValueError:
            return Response(
                {
                    "code": "invalid_input",
                    "detail": f"Not a CUDA version: {cuda!r} (use e.g. 12.4).",
                    "errors": {"cuda": ["Not a CUDA version."]},
                },
                status=status.HTTP_400_BAD_REQUEST,
            )
        return Response({"cuda": cuda, "pools": rows})


class NodeViewSet(viewsets.ReadOnlyModelViewSet):
    """Nodes with their state, driver and card counts; detail includes GPUs and MIG devices."""

    filterset_class = NodeFilterSet
    lookup_field = "hostname"
    lookup_value_regex = "[^/]+"

    def get_queryset(self):
        qs = selectors.node_list()
        if self.action == "retrieve":
            qs = qs.prefetch_related("gpus__gpu_model", "gpus__mig_devices")
        return qs.order_by("hostname")

    def get_serializer_class(self):
        return s.NodeDetailSerializer if self.action == "retrieve" else s.NodeSerializer


class GpuViewSet(viewsets.ReadOnlyModelViewSet):
    """Every physical card with its node, pool, model (or raw reported name) and health."""

    serializer_class = s.GpuSerializer
    filterset_class = GpuFilterSet

    def get_queryset(self):
        return selectors.gpu_list().order_by("node__hostname", "index")


class InventoryImportViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Import runs and their reports; POST a file to import (pool admins)."""

    serializer_class = s.InventoryImportSerializer
    permission_classes = [IsPoolAdmin]
    parser_classes = [MultiPartParser, FormParser]

    def get_queryset(self):
        return selectors.inventory_import_list()

    @extend_schema(request=s.InventoryImportRequestSerializer, responses={201: dict, 400: dict})
    def create(self, request):
        """Import nvidia-smi output, slurmrestd nodes JSON or Kubernetes Nodes.

        Answers 201 with the report when everything was imported, 400 with the same report
        when anything was rejected (the rest is kept).
        """
        form = s.InventoryImportRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        upload = form.validated_data["file"]
        report = inventory_import_file(
            data=upload.read(),
            source=form.validated_data["source"],
            node=form.validated_data.get("node") or None,
            pool=form.validated_data.get("pool"),
            actor=request.user,
            filename=upload.name,
        )
        body = report.as_dict()
        if not report.ok:
            body = {"code": "import_incomplete", "detail": "Some input was not imported.", **body}
        return Response(body, status=status.HTTP_201_CREATED if report.ok else 400)


class UnrecognisedModelView(APIView):
    """Reported model names that match no catalogue alias; POST maps one (pool admins)."""

    def get_permissions(self):
        return [IsPoolAdmin()] if self.request.method == "POST" else [permissions.IsAuthenticated()]

    @extend_schema(responses=s.UnrecognisedModelSerializer(many=True))
    def get(self, request):
        rows = selectors.unrecognised_model_list()
        return Response(s.UnrecognisedModelSerializer(rows, many=True).data)

    @extend_schema(request=s.AliasMapRequestSerializer, responses={200: dict})
    def post(self, request):
        form = s.AliasMapRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        count = gpu_model_alias_map(
            raw_name=form.validated_data["raw_model_name"],
            gpu_model=form.validated_data["gpu_model"],
            actor=request.user,
        )
        return Response({"mapped_gpus": count, "gpu_model": form.validated_data["gpu_model"].slug})
