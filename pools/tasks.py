"""Celery tasks of the pools app: thin callers of services, safe to run twice."""

from __future__ import annotations

from celery import shared_task

from pools.errors import NotFound
from pools.services.allocations import (
    allocation_lifecycle_sweep,
    allocation_provision,
    allocation_unbind,
)
from pools.services.reclamation import allocation_rebind
from pools.services.reclamation_runs import idle_scan_recorded
from pools.services.reconcile import reconcile_all
from pools.services.sizing import sizing_estimate_run
from scheduler_adapters.errors import SchedulerError

MAX_RETRIES = 8


def _backoff(retries: int) -> int:
    """Seconds before retry ``retries`` + 1: 5, 10, 20 … capped at 10 minutes."""
    return min(600, 5 * 2**retries)


@shared_task(bind=True, acks_late=True, max_retries=MAX_RETRIES)
def allocation_provision_task(self, allocation_id: int) -> str:
    """Apply an approved allocation in its scheduler; returns the allocation's status.

    A transient scheduler error is retried with exponential back-off; after the last retry the
    allocation is ``failed`` with the scheduler's message.
    """
    final = self.request.retries >= MAX_RETRIES and not self.request.is_eager
    try:
        return allocation_provision(allocation_id=allocation_id, final_attempt=final).status
    except SchedulerError as exc:
        if self.request.is_eager:
            # No worker to retry later (the demo): the lifecycle sweep picks it up again.
            return "provisioning"
        raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from exc


@shared_task(bind=True, acks_late=True, max_retries=MAX_RETRIES)
def allocation_unbind_task(self, allocation_id: int) -> dict | None:
    """Lower the team's scheduler cap after an allocation stopped holding cards."""
    try:
        return allocation_unbind(allocation_id=allocation_id)
    except SchedulerError as exc:
        if not exc.transient or self.request.is_eager:
            return None  # reconcile repairs the cap (and records the drift)
        raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from exc


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


@shared_task(acks_late=True)
def reconcile_task() -> dict:
    """Beat: repair scheduler drift and refresh node inventory; returns counts."""
    report = reconcile_all()
    return {
        "checked": report.checked,
        "drifts": len(report.drifts),
        "errors": report.errors,
        "nodes": report.nodes_refreshed,
    }


@shared_task(bind=True, acks_late=True, max_retries=MAX_RETRIES)
def allocation_rebind_task(self, allocation_id: int) -> dict | None:
    """Set the team's scheduler cap after reclamation shrank (or undo restored) an allocation."""
    try:
        return allocation_rebind(allocation_id=allocation_id)
    except SchedulerError as exc:
        if not exc.transient or self.request.is_eager:
            return None  # reconcile repairs the cap (and records the drift)
        raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from exc


@shared_task(acks_late=True)
def idle_scan_task() -> dict:
    """Beat: find idle allocations, warn, reclaim after grace (see pools.services.reclamation);
    the run is recorded for the idle page. Returns the run's counts."""
    run = idle_scan_recorded()
    return {"run": run.pk, "error": run.error, "idle": run.idle, "reclaimed": run.reclaimed}
