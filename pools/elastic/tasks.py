"""Celery tasks of elastic capacity: the scaling loop (beat, every minute), applying one
allocation's decision in Kubernetes (retried on transient scheduler errors), the hand-back
after a guaranteed approval, and a queued what-if (its range queries kept out of the web
request)."""

from __future__ import annotations

from datetime import datetime

from celery import shared_task

from pools.elastic.services import (
    elastic_apply,
    elastic_forecast,
    elastic_hand_back_run,
    elastic_readings_prune,
    elastic_scan,
    elastic_whatif_run,
    elastic_whatifs_sweep,
)
from pools.jobs import MAX_RETRIES, retry_countdown, run_unless_gone
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
    reads, compares and writes only what differs); ``None`` when the policy was deleted before
    the task ran."""
    try:
        return run_unless_gone(elastic_apply, policy_id=policy_id)
    except SchedulerError as exc:
        if not exc.transient or self.request.is_eager:
            return None  # reconcile repairs the quota (and records the drift)
        raise self.retry(exc=exc, countdown=retry_countdown(self.request.retries)) from exc


@shared_task(acks_late=True)
def elastic_hand_back_task(
    pool_id: int, gpu_model_id: int, starts_at: str, ends_at: str
) -> list[int]:
    """After a guaranteed approval in a Kubernetes pool commits: take burst cards back, with
    notice, where floors plus burst no longer fit. Returns the scale events' ids (none when the
    pool or the GPU model was deleted before the task ran)."""
    events = run_unless_gone(
        elastic_hand_back_run,
        gone=[],
        pool_id=pool_id,
        gpu_model_id=gpu_model_id,
        starts_at=datetime.fromisoformat(starts_at),
        ends_at=datetime.fromisoformat(ends_at),
    )
    return [event.pk for event in events]


@shared_task(acks_late=True)
def elastic_forecast_task() -> dict:
    """Beat, hourly: refresh every elastic allocation's pre-scale plan (two range queries),
    drop recorded readings past their retention, and sweep the queued what-ifs (lost ones
    queued again, old ones deleted)."""
    return {
        "plans": elastic_forecast(),
        "readings_pruned": elastic_readings_prune(),
        "whatifs": elastic_whatifs_sweep(),
    }


@shared_task(acks_late=True)
def elastic_whatif_task(whatif_id: int) -> str:
    """Run a queued what-if; returns its status. Safe twice: a finished one is left as is."""
    run = run_unless_gone(elastic_whatif_run, whatif_id=whatif_id)
    return "missing" if run is None else run.status  # missing: its policy was deleted
