"""Read-side queries of requests, allocations and the audit trail: who may see what, joined."""

from __future__ import annotations

from django.db.models import Prefetch, Q, QuerySet

from pools.audit.models import AuditEvent
from pools.capacity.models import Allocation, CapacityRequest


def capacity_request_list(*, user) -> QuerySet[CapacityRequest]:
    """Requests the user may see (their teams', or all for pool admins), related rows joined;
    allocations (nested by the API with their team, pool and model) in one more query, not
    joined: three more joins on every page cost more to plan than the query takes to run."""
    allocations = Allocation.objects.select_related("team", "pool", "gpu_model")
    qs = CapacityRequest.objects.select_related(
        "team", "requested_by", "pool", "gpu_model", "decided_by"
    ).prefetch_related(Prefetch("allocation", queryset=allocations))
    return qs if user.is_staff else qs.filter(team__memberships__user=user)


def allocation_list(*, user) -> QuerySet[Allocation]:
    """Allocations the user may see, with team, pool, model and request joined."""
    qs = Allocation.objects.select_related("team", "pool", "gpu_model", "request")
    return qs if user.is_staff else qs.filter(team__memberships__user=user)


def audit_event_list(*, user) -> QuerySet[AuditEvent]:
    """Audit events the user may see: all for pool admins; for others, the events of the
    requests and allocations of their teams."""
    qs = AuditEvent.objects.select_related("actor")
    if user.is_staff:
        return qs
    request_ids = [str(i) for i in capacity_request_list(user=user).values_list("pk", flat=True)]
    allocation_ids = [str(i) for i in allocation_list(user=user).values_list("pk", flat=True)]
    return qs.filter(
        Q(object_type="pools.capacityrequest", object_id__in=request_ids)
        | Q(object_type="pools.allocation", object_id__in=allocation_ids)
    )
