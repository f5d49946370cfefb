"""Celery task of sizing: compute a saved estimate in the background."""

from __future__ import annotations

from celery import shared_task

from pools.jobs import run_unless_gone
from pools.sizing.services import sizing_estimate_run, sizing_estimates_requeue_stranded


@shared_task(acks_late=True)
def sizing_estimate_task(estimate_id: int) -> str:
    """Compute a sizing estimate; returns its status. Safe twice: a finished one is left as is."""
    estimate = run_unless_gone(sizing_estimate_run, estimate_id=estimate_id)
    return "missing" if estimate is None else estimate.status


@shared_task
def sizing_requeue_stranded_task() -> list[int]:
    """Beat's sweep (every 5 minutes): queue again the estimates whose job was lost."""
    return sizing_estimates_requeue_stranded()
