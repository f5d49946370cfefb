"""Dashboard tasks: the stranded-capacity snapshot (beat, and the dashboard's *Recompute*) and
the utilisation readings (beat, and a page that finds none fresh)."""

from __future__ import annotations

from celery import shared_task

from pools.dashboards.stranded import stranded_snapshot_refresh
from pools.dashboards.utilisation_store import utilisation_refresh


@shared_task(acks_late=True)
def stranded_snapshot_task() -> str:
    """Beat: store the stranded-capacity report for the dashboard; returns when it was
    computed (ISO 8601). Safe to run twice: the newer snapshot replaces the older."""
    return stranded_snapshot_refresh().computed_at.isoformat()


@shared_task(acks_late=True)
def utilisation_refresh_task(part: str | None = None) -> dict[str, str]:
    """Beat (no ``part``): read the dashboard's watched utilisation parts from Prometheus; a
    page (``part``: ``cards``, ``24h``, ``7d``, ``30d``): that part, if still due. Returns
    part -> ``"read"`` or the read's error (:func:`utilisation_refresh`). Safe to run twice."""
    return utilisation_refresh(part=part)
