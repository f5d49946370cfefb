"""Celery tasks of capacity: apply, unbind and sweep allocations, reconcile schedulers. Thin
callers of services, safe to run twice."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from pools.capacity.services.allocations import (
    SWEEP_RETRIES,
    allocation_lifecycle_sweep,
    allocation_provision,
    allocation_unbind,
)
from pools.capacity.services.reconcile import ReconcileReport, reconcile_all, reconcile_cluster
from pools.jobs import MAX_RETRIES, retry_countdown, retry_note, run_unless_gone
from scheduler_adapters.errors import SchedulerError


@shared_task(bind=True, acks_late=True, max_retries=MAX_RETRIES)
def allocation_provision_task(self, allocation_id: int) -> str:
    """Apply an approved allocation in its scheduler; returns the allocation's status.

    A transient scheduler error is retried with exponential back-off, the allocation saying so
    at every attempt ("Slurm answered 500; retry 3 of 8 at 14:02"); after the last retry it is
    ``failed`` with the scheduler's message. ``"missing"`` when the allocation was deleted
    before the task ran.
    """
    retries = self.request.retries
    final = retries >= MAX_RETRIES and not self.request.is_eager
    next_try = SWEEP_RETRIES if self.request.is_eager else retry_note(retries, now=timezone.now())
    try:
        allocation = run_unless_gone(
            allocation_provision,
            allocation_id=allocation_id,
            final_attempt=final,
            next_try=next_try,
        )
    except SchedulerError as exc:
        if self.request.is_eager:
            # No worker to retry later (the demo): the lifecycle sweep picks it up again.
            return "provisioning"
        raise self.retry(exc=exc, countdown=retry_countdown(self.request.retries)) from exc
    return "missing" if allocation is None else allocation.status


@shared_task(bind=True, acks_late=True, max_retries=MAX_RETRIES)
def allocation_unbind_task(self, allocation_id: int) -> dict | None:
    """Lower the team's scheduler cap and remove its reservation after an allocation stopped
    holding cards. A transient error is retried; a refusal is not: the unbind recorded it for
    admins, and reconcile repairs the cap and ends a reservation left behind. ``None`` also
    when the allocation was deleted before the task ran."""
    try:
        return run_unless_gone(allocation_unbind, allocation_id=allocation_id)
    except SchedulerError as exc:
        if not exc.transient or self.request.is_eager:
            return None
        raise self.retry(exc=exc, countdown=retry_countdown(self.request.retries)) from exc


@shared_task(acks_late=True)
def allocation_lifecycle_task() -> dict[str, int]:
    """Beat: provision allocations whose window opens, warn before the end, end finished ones."""
    return allocation_lifecycle_sweep()


@shared_task(acks_late=True)
def reconcile_task() -> dict:
    """Beat: repair scheduler drift and refresh node inventory in the environment's clusters,
    and queue one :func:`reconcile_cluster_task` per cluster kept as data; returns counts."""
    report = reconcile_all()
    return {**report_counts(report), "clusters_queued": report.clusters_queued}


@shared_task(acks_late=True)
def reconcile_cluster_task(cluster_id: int) -> dict | None:
    """Repair scheduler drift in one cluster kept as data; returns counts (``None`` when the
    cluster was deleted since). Safe twice: reconcile only writes what differs."""
    report = reconcile_cluster(cluster_id)
    return None if report is None else report_counts(report)


def report_counts(report: ReconcileReport) -> dict:
    return {
        "checked": report.checked,
        "drifts": len(report.drifts),
        "repaired": sum(d.repaired for d in report.drifts),
        "errors": report.errors,
        "nodes": report.nodes_refreshed,
    }
