"""Celery tasks of reclamation: the idle scan (beat: one task per cluster), re-applying a
shrunk allocation's cap, the e-mail of a reclamation, and a queued what-if (its range query
kept out of the web request)."""

from __future__ import annotations

from celery import shared_task

from pools.jobs import MAX_RETRIES, retry_countdown, run_unless_gone
from pools.reclamation.services.runs import idle_scan_cluster, idle_scan_fan_out
from pools.reclamation.services.scan import allocation_rebind, idle_finding_reclaimed_email
from pools.reclamation.services.whatif import reclamation_whatif_run, reclamation_whatifs_sweep
from scheduler_adapters.errors import SchedulerError


@shared_task(bind=True, acks_late=True, max_retries=MAX_RETRIES)
def allocation_rebind_task(self, allocation_id: int) -> dict | None:
    """Set the team's scheduler cap after reclamation shrank (or undo restored) an allocation;
    ``None`` when it was deleted before the task ran."""
    try:
        return run_unless_gone(allocation_rebind, allocation_id=allocation_id)
    except SchedulerError as exc:
        if not exc.transient or self.request.is_eager:
            return None  # reconcile repairs the cap (and records the drift)
        raise self.retry(exc=exc, countdown=retry_countdown(self.request.retries)) from exc


@shared_task
def idle_reclaimed_email_task(finding_id: int) -> int:
    """E-mail the team of a reclaimed finding (after *Reclaim now* or the scan); returns how
    many it was sent to. Acknowledged on receipt: a lost message sends none rather than two."""
    return idle_finding_reclaimed_email(finding_id=finding_id)


@shared_task(acks_late=True)
def idle_scan_task() -> dict:
    """Beat: queue one idle scan per cluster whose pools have a policy
    (:func:`~pools.reclamation.services.runs.idle_scan_fan_out`), then sweep the queued what-ifs
    (lost ones queued again, old ones deleted); returns ``{"queued": n, "whatifs": ...}`` (and
    ``"run"`` when no pool has a policy: that run is recorded here)."""
    return {**idle_scan_fan_out(), "whatifs": reclamation_whatifs_sweep()}


@shared_task(acks_late=True)
def idle_scan_cluster_task(cluster_id: int | None) -> dict:
    """Find idle allocations in one cluster's pools, warn, reclaim after grace (see
    pools.reclamation.services.scan); the run is recorded for the idle page and what could
    not be reached in the cluster's health. Returns the run's counts. Safe to run twice."""
    run = idle_scan_cluster(cluster_id=cluster_id)
    return {"run": run.pk, "error": run.error, "idle": run.idle, "reclaimed": run.reclaimed}


@shared_task(acks_late=True)
def reclamation_whatif_task(whatif_id: int) -> str:
    """Run a queued what-if; returns its status. Safe twice: a finished one is left as is."""
    run = run_unless_gone(reclamation_whatif_run, whatif_id=whatif_id)
    return "missing" if run is None else run.status  # missing: its pool was deleted
