"""API of what an allocation serves (``/api/v1/served-models/{allocation}/``): read it, and
link one of the team's saved sizing estimates to it (``POST .../estimate/``, managers and pool
admins; ``DELETE`` takes the link off) so calibration sizes what the team sized."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from pools.calibration.served import served_model_link_estimate, served_model_unlink_estimate
from pools.capacity.models import Allocation
from pools.capacity.selectors import allocation_list
from pools.serving.api import ServedModelSerializer
from pools.serving.models import ServedModel


class LinkEstimateSerializer(serializers.Serializer):
    estimate = serializers.IntegerField(help_text="A saved, finished sizing estimate's id.")


class ServedModelViewSet(viewsets.GenericViewSet):
    """What the caller's teams' allocations serve (all, for pool admins), by allocation id."""

    queryset = Allocation.objects.none()  # for the schema; get_queryset scopes by user
    serializer_class = ServedModelSerializer
    lookup_value_regex = r"\d+"

    def get_queryset(self):
        return allocation_list(user=self.request.user)

    @extend_schema(responses=ServedModelSerializer)
    def retrieve(self, request, pk=None):
        """404 when the allocation does not say what it serves."""
        served = ServedModel.objects.filter(allocation=self.get_object()).first()
        if served is None:
            raise NotFound("The allocation does not say what it serves.")
        return Response(ServedModelSerializer(served).data)

    @extend_schema(
        methods=["POST"],
        request=LinkEstimateSerializer,
        responses=ServedModelSerializer,
        description="Link one of the team's saved sizing estimates (managers, pool admins): "
        "the allocation then serves the estimate's model, precision, KV-cache dtype and engine "
        "at the TP it chose for the allocation's GPU model, and calibration sizes that. "
        'Body: `{"estimate": 12}`. 400 names `estimate` when it cannot be linked (another '
        "team's, not finished, no fitting size for the GPU model); audited on the allocation.",
    )
    @extend_schema(
        methods=["DELETE"],
        request=None,
        responses={204: None},
        description="Take the linked estimate off (the served fields stay); 404 without one.",
    )
    @action(detail=True, methods=["post", "delete"])
    def estimate(self, request, pk=None):
        allocation = self.get_object()
        if request.method == "DELETE":
            served_model_unlink_estimate(actor=request.user, allocation=allocation)
            return Response(status=204)
        body = LinkEstimateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        served = served_model_link_estimate(
            actor=request.user, allocation=allocation, estimate_id=body.validated_data["estimate"]
        )
        return Response(ServedModelSerializer(served).data)
