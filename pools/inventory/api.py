"""Viewsets of the inventory API (GPU models, driver groups, nodes, GPUs, imports, pools); each
list is paginated and filtered by its FilterSet. Pools are read by everyone and changed by pool
admins through the pool services, which hold the pool's lock and refuse changes that strand
allocations."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, mixins, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response

from pools.common.errors import NodeNameShared
from pools.inventory import selectors
from pools.inventory import serializers as s
from pools.inventory.filtersets import (
    DriverGroupFilterSet,
    GpuFilterSet,
    GpuModelFilterSet,
    NodeFilterSet,
    PoolFilterSet,
)
from pools.inventory.models import DriverGroup, Gpu, GpuModel, Pool
from pools.inventory.services.catalogue import gpu_model_create, gpu_model_update
from pools.inventory.services.gpu_models import gpu_model_alias_map
from pools.inventory.services.import_files import inventory_import_file
from pools.inventory.services.pools import pool_create, pool_delete, pool_update
from pools.inventory.services.uploads import inventory_import_in_background, inventory_upload_queue
from pools.web.api import IsPoolAdmin, IsPoolAdminOrReadOnly


class GpuModelViewSet(
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """The GPU model catalogue with published specs and the aliases and PCI device ids imports
    match; pool admins create and edit models (audited; no delete: cards and rate cards refer
    to them)."""

    serializer_class = s.GpuModelSerializer
    filterset_class = GpuModelFilterSet
    permission_classes = [IsPoolAdminOrReadOnly]
    lookup_field = "slug"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # the schema: no database to read
            return GpuModel.objects.none()
        return selectors.gpu_model_list().order_by("name")

    def perform_create(self, serializer):
        data = dict(serializer.validated_data)
        model = gpu_model_create(
            slug=data.pop("slug"),
            aliases=data.pop("aliases", []),
            fields=data,
            actor=self.request.user,
        )
        serializer.instance = self.get_queryset().get(pk=model.pk)

    def perform_update(self, serializer):
        data = dict(serializer.validated_data)
        data.pop("slug", None)
        model = gpu_model_update(
            gpu_model=serializer.instance,
            aliases=data.pop("aliases", None),
            changes=data,
            actor=self.request.user,
        )
        serializer.instance = self.get_queryset().get(pk=model.pk)


class DriverGroupViewSet(viewsets.ReadOnlyModelViewSet):
    """Driver branches with the highest CUDA version every node of the branch supports."""

    serializer_class = s.DriverGroupSerializer
    filterset_class = DriverGroupFilterSet
    lookup_field = "branch"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # the schema: no database to read
            return DriverGroup.objects.none()
        return selectors.driver_group_list().order_by("branch")


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

    def get_object(self):
        """The node named in the URL — of ``?cluster=<slug>`` when given: host names are
        unique per cluster only, so a name several clusters have is a 409
        (``node_name_shared``, naming them) until one is named; 404 when none has it."""
        hostname = self.kwargs[self.lookup_field]
        named = list(self.filter_queryset(self.get_queryset()).filter(hostname=hostname))
        if not named:
            raise Http404(f"No node named {hostname!r}.")
        if len(named) > 1:
            clusters = sorted(n.cluster.slug if n.cluster else "" for n in named)
            raise NodeNameShared(
                f"{len(named)} clusters have a node named {hostname}: add ?cluster=<slug>.",
                hostname=hostname,
                clusters=clusters,
            )
        self.check_object_permissions(self.request, named[0])
        return named[0]


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

    @extend_schema(
        request=s.InventoryImportRequestSerializer,
        responses={201: dict, 202: s.InventoryUploadSerializer, 400: dict},
    )
    def create(self, request):
        """Import nvidia-smi output, slurmrestd nodes JSON or Kubernetes Nodes.

        Answers 201 with the report when everything was imported, 400 with the same report
        when anything was rejected (the rest is kept). A file over
        ``INVENTORY_ASYNC_IMPORT_BYTES`` is imported in the background: 202 with the upload's
        state and its ``status_url`` (``GET`` it for the progress, then the report).
        """
        form = s.InventoryImportRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        upload = form.validated_data["file"]
        if inventory_import_in_background(upload.size):
            queued = inventory_upload_queue(
                data=upload.read(),
                source=form.validated_data["source"],
                node=form.validated_data.get("node") or None,
                pool=form.validated_data.get("pool"),
                actor=request.user,
                filename=upload.name,
            )
            body = s.InventoryUploadSerializer(queued).data
            return Response(body, status=202, headers={"Location": body["status_url"]})
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


class InventoryUploadViewSet(mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """A background import's progress and, once done, its report (pool admins)."""

    serializer_class = s.InventoryUploadSerializer
    permission_classes = [IsPoolAdmin]

    def get_queryset(self):
        return selectors.inventory_upload_list()


class UnrecognisedModelView(generics.GenericAPIView):
    """Reported model names that match no catalogue alias, largest first, paginated as every
    list (``{"count", "next", "previous", "results"}``, ``page`` / ``page_size``); POST maps
    one (pool admins)."""

    queryset = Gpu.objects.none()  # for the schema; the rows are the selector's, by name
    serializer_class = s.UnrecognisedModelSerializer

    def get_permissions(self):
        return [IsPoolAdmin()] if self.request.method == "POST" else [permissions.IsAuthenticated()]

    @extend_schema(responses=s.UnrecognisedModelSerializer(many=True))
    def get(self, request):
        page = self.paginate_queryset(selectors.unrecognised_model_list())
        return self.get_paginated_response(s.UnrecognisedModelSerializer(page, many=True).data)

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


class PoolViewSet(viewsets.ModelViewSet):
    """Pools (Slurm partitions / Kubernetes node groups); pool admins create and edit them."""

    serializer_class = s.PoolSerializer
    filterset_class = PoolFilterSet
    permission_classes = [IsPoolAdminOrReadOnly]
    lookup_field = "slug"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # the schema: no database to read
            return Pool.objects.none()
        return selectors.pool_list().order_by("name")

    def perform_create(self, serializer):
        # Answer as reads do: with node_count and gpu_count (annotations, 0 for a new pool).
        pool = pool_create(
            fields=serializer.validated_data,
            actor=self.request.user,
            render=lambda pool: dict(s.PoolSerializer(self.get_queryset().get(pk=pool.pk)).data),
        )
        serializer.instance = self.get_queryset().get(pk=pool.pk)

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

    @extend_schema(responses={200: s.PoolModelCapacitySerializer(many=True)})
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def capacity(self, request, slug=None):
        """The pool's cards per GPU model: whole cards and MIG slices (per profile) apart."""
        rows = selectors.pool_capacity(pool=self.get_object())
        return Response(s.PoolModelCapacitySerializer(rows, many=True).data)

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
