"""Celery tasks of the pools app: thin callers of services, safe to run twice."""

from __future__ import annotations

from celery import shared_task

from pools.services.allocations import allocation_lifecycle_sweep, allocation_provision


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
