"""Row locks, in the one order every service takes them: Pool, then CapacityRequest, then
Allocation. The pool row owns the capacity invariant, so approvals, extensions and releases in
one pool serialise on it; different pools never wait for each other.
"""

from __future__ import annotations

from pools.capacity.models import Allocation, CapacityRequest
from pools.inventory.models import Pool


def pool_lock(pool_id: int) -> Pool:
    """Lock and return the pool row (``SELECT … FOR UPDATE``); call inside ``atomic()``."""
    return Pool.objects.select_for_update().get(pk=pool_id)


def request_lock(request_id: int) -> CapacityRequest:
    return (
        CapacityRequest.objects.select_for_update(of=("self",))
        .select_related("team", "pool", "gpu_model")
        .get(pk=request_id)
    )


def allocation_lock(allocation_id: int) -> Allocation:
    return (
        Allocation.objects.select_for_update(of=("self",))
        .select_related("team", "pool", "gpu_model")
        .get(pk=allocation_id)
    )
