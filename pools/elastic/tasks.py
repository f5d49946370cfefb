"""Celery tasks of elastic capacity: the scaling loop (beat, every minute) and applying one
allocation's decision in Kubernetes (retried on transient scheduler errors)."""

from __future__ import annotations

from celery import shared_task

from pools.elastic.services import elastic_apply, elastic_scan
from pools.jobs import MAX_RETRIES, _backoff
from scheduler_adapters.errors import SchedulerError


@shared_task(acks_late=True)
def elastic_scan_task() -> dict:
    """Beat: one pass of the loop; returns its counts."""
    report = elastic_scan()
    return {
        "policies": report.policies,
        "ups": report.ups,
        "downs": report.downs,
        "holds": report.holds,
        "unknown": report.unknown,
        "events": report.events,
        "error": report.error,
    }


@shared_task(bind=True, acks_late=True, max_retries=MAX_RETRIES)
def elastic_apply_task(self, policy_id: int) -> dict | None:
    """Make the cluster hold what the loop decided for ``policy_id``; idempotent (the adapter
    reads, compares and writes only what differs)."""
    try:
        return elastic_apply(policy_id=policy_id)
    except SchedulerError as exc:
        if not exc.transient or self.request.is_eager:
            return None  # reconcile repairs the quota (and records the drift)
        raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from exc
