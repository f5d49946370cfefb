"""Dashboard tasks: the stranded-capacity snapshot (beat, and the dashboard's *Recompute*)."""

from __future__ import annotations

from celery import shared_task

from pools.dashboards.stranded import stranded_snapshot_refresh


@shared_task(acks_late=True)
def stranded_snapshot_task() -> str:
    """Beat: store the stranded-capacity report for the dashboard; returns when it was
    computed (ISO 8601). Safe to run twice: the newer snapshot replaces the older."""
    return stranded_snapshot_refresh().computed_at.isoformat()
