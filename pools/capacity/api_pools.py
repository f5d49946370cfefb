"""API of pools (``/api/v1/pools/``): read by everyone, changed by pool admins through the pool
services, which hold the pool's lock and refuse changes that strand allocations."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from pools.capacity.services.pools import pool_create, pool_delete, pool_update
from pools.inventory import selectors
from pools.inventory import serializers as s
from pools.inventory.filtersets import (
    PoolFilterSet,
)
from pools.inventory.models import Pool
from pools.web.api import IsPoolAdminOrReadOnly


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
