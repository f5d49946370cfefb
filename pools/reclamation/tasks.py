"""Celery tasks of reclamation: the idle scan (beat) and re-applying a shrunk allocation's cap."""

from __future__ import annotations

from celery import shared_task

from pools.jobs import MAX_RETRIES, retry_countdown
from pools.reclamation.services.runs import idle_scan_recorded
from pools.reclamation.services.scan import allocation_rebind
from scheduler_adapters.errors import SchedulerError


@shared_task(bind=True, acks_late=True, max_retries=MAX_RETRIES)
def allocation_rebind_task(self, allocation_id: int) -> dict | None:
    """Set the team's scheduler cap after reclamation shrank (or undo restored) an allocation."""
    try:
        return allocation_rebind(allocation_id=allocation_id)
    except SchedulerError as exc:
        if not exc.transient or self.request.is_eager:
            return None  # reconcile repairs the cap (and records the drift)
        raise self.retry(exc=exc, countdown=retry_countdown(self.request.retries)) from exc


@shared_task(acks_late=True)
def idle_scan_task() -> dict:
    """Beat: find idle allocations, warn, reclaim after grace (see pools.reclamation.services.scan);
    the run is recorded for the idle page. Returns the run's counts."""
    run = idle_scan_recorded()
    return {"run": run.pk, "error": run.error, "idle": run.idle, "reclaimed": run.reclaimed}
