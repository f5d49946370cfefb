"""API of clusters (``/api/v1/clusters/``): read by every signed-in user, changed by pool admins
through the cluster services (audited; 409 for a taken ClusterName / API URL or a cluster that
holds pools); ``POST …/{slug}/check/`` checks the connection again."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from pools.clusters import selectors
from pools.clusters.serializers import ClusterSerializer, cluster_render
from pools.clusters.services import cluster_check, cluster_create, cluster_delete, cluster_update
from pools.web.api import IsPoolAdmin, IsPoolAdminOrReadOnly


class ClusterViewSet(viewsets.ModelViewSet):
    """Slurm and Kubernetes clusters, with the last connection check's status."""

    serializer_class = ClusterSerializer
    permission_classes = [IsPoolAdminOrReadOnly]
    lookup_field = "slug"

    def get_queryset(self):
        return selectors.cluster_list()

    def perform_create(self, serializer):
        cluster = cluster_create(
            fields=serializer.validated_data, actor=self.request.user, render=cluster_render
        )
        serializer.instance = self.get_queryset().get(pk=cluster.pk)

    def perform_update(self, serializer):
        cluster = cluster_update(
            cluster=serializer.instance,
            changes=serializer.validated_data,
            actor=self.request.user,
            before=dict(ClusterSerializer(serializer.instance).data),
            render=cluster_render,
        )
        serializer.instance = self.get_queryset().get(pk=cluster.pk)

    def perform_destroy(self, instance):
        cluster_delete(
            cluster=instance, actor=self.request.user, before=dict(ClusterSerializer(instance).data)
        )

    @extend_schema(request=None, responses={200: ClusterSerializer})
    @action(detail=True, methods=["post"], permission_classes=[IsPoolAdmin])
    def check(self, request, slug=None):
        """Connect to the cluster now and record whether it answered (and why not)."""
        cluster = cluster_check(cluster=self.get_object())
        return Response(ClusterSerializer(self.get_queryset().get(pk=cluster.pk)).data)
