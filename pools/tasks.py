"""Celery tasks of the pools app: thin callers of services, safe to run twice."""

from __future__ import annotations

from celery import shared_task

from pools.errors import NotFound
from pools.services.allocations import allocation_lifecycle_sweep, allocation_provision
from pools.services.sizing import sizing_estimate_run


@shared_task(
    acks_late=True,
    autoretry_for=(ConnectionError, TimeoutError),
    retry_backoff=True,
    retry_backoff_max=600,
    max_retries=8,
)
def allocation_provision_task(allocation_id: int) -> str:
    """Apply an approved allocation in its scheduler; returns the allocation's status."""
    return allocation_provision(allocation_id=allocation_id).status


@shared_task(acks_late=True)
def allocation_lifecycle_task() -> dict[str, int]:
    """Beat: provision allocations whose window opens, warn before the end, end finished ones."""
    return allocation_lifecycle_sweep()


@shared_task(acks_late=True)
def sizing_estimate_task(estimate_id: int) -> str:
    """Compute a sizing estimate; returns its status. Safe twice: a finished one is left as is."""
    try:
        return sizing_estimate_run(estimate_id=estimate_id).status
    except NotFound:
        return "missing"  # deleted before the worker got to it: nothing to do
