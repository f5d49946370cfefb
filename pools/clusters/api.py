"""API of clusters (``/api/v1/clusters/``): read by every signed-in user (pool admins the whole
cluster, everyone else name, kind, site, provider and ok / degraded:
:func:`pools.tenancy.permissions.may_see_cluster_details`), changed by pool admins through the
cluster services (audited; 409 for a taken ClusterName / API URL or a cluster that holds pools);
``POST …/{slug}/check/`` queues a connection check (202; ``GET`` the cluster until
``check_pending`` is false). No request here calls the scheduler: a create, and an update that
changes the connection, queue the check too and answer 201 / 200 with ``check_pending`` true."""

from __future__ import annotations

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema, extend_schema_view
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from pools.clusters import selectors
from pools.clusters.filtersets import ClusterFilterSet
from pools.clusters.serializers import ClusterMemberSerializer, ClusterSerializer, cluster_render
from pools.clusters.services import (
    cluster_check_request,
    cluster_create,
    cluster_delete,
    cluster_update,
)
from pools.tenancy.permissions import may_see_cluster_details
from pools.web.api import IsPoolAdmin, IsPoolAdminOrReadOnly


def _read_schema(many: bool) -> PolymorphicProxySerializer:
    """A read's answer: the whole cluster for a pool admin, the member's fields otherwise."""
    return PolymorphicProxySerializer(
        component_name="ClusterRead",
        serializers=[ClusterSerializer, ClusterMemberSerializer],
        resource_type_field_name=None,
        many=many,
    )


_SAVE_CHECKS = (
    "Answers with the cluster saved; its connection is checked by a worker, never in the "
    "request: after a create, or an update that changes a connection field, "
    "check_pending is true and status / checked_at are still the last check's (never "
    "checked: unknown). GET status_url until check_pending is false; check_started_at stays "
    "null until a worker begins the check (null a minute on: no worker takes the queue). "
    "Fields that do not fit are a 400 at once, nothing saved or queued."
)


@extend_schema_view(
    create=extend_schema(description=f"201. {_SAVE_CHECKS}"),
    update=extend_schema(description=f"200. {_SAVE_CHECKS}"),
    partial_update=extend_schema(description=f"200. {_SAVE_CHECKS}"),
    list=extend_schema(
        responses=_read_schema(True),
        description="Pool admins: every field of the cluster. Everyone else: slug, name, kind, "
        "site, provider and status ok / degraded (ClusterMember).",
    ),
    retrieve=extend_schema(
        responses=_read_schema(False),
        description="Pool admins: every field of the cluster. Everyone else: slug, name, kind, "
        "site, provider and status ok / degraded (ClusterMember).",
    ),
)
class ClusterViewSet(viewsets.ModelViewSet):
    """Slurm and Kubernetes clusters, with the last connection check's status."""

    serializer_class = ClusterSerializer
    permission_classes = [IsPoolAdminOrReadOnly]
    filterset_class = ClusterFilterSet  # the page's and its CSV's: kind, status, retiring
    lookup_field = "slug"

    def get_queryset(self):
        return selectors.cluster_list()

    def get_serializer_class(self):
        # Writes are pool admins' only (the permission refuses the rest first).
        if self.action in ("list", "retrieve") and not may_see_cluster_details(self.request.user):
            return ClusterMemberSerializer
        return ClusterSerializer

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

    @extend_schema(request=None, responses={202: ClusterSerializer})
    @action(detail=True, methods=["post"], permission_classes=[IsPoolAdmin])
    def check(self, request, slug=None):
        """Queue a check of the cluster's connection (a worker lists its nodes): 202 with the
        cluster, ``check_pending`` true and ``check_requested_at`` set, and its ``status_url``
        (``Location`` too). ``GET`` that until ``check_pending`` is false: ``status``,
        ``status_reason`` and ``checked_at`` are then the new check's. Until then they are the
        last check's, which still decides whether the cluster's pools are read-only. Where the
        portal runs without a broker the check has already run and the 202 carries its result.
        """
        cluster = cluster_check_request(cluster=self.get_object())
        body = ClusterSerializer(self.get_queryset().get(pk=cluster.pk)).data
        return Response(
            body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["status_url"]}
        )
