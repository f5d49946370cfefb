"""Celery tasks of maintenance windows: thin callers of services, safe to run twice."""

from __future__ import annotations

from celery import shared_task

from pools.maintenance.services.binding import maintenance_sync


@shared_task(acks_late=True)
def maintenance_sync_task() -> dict[str, int]:
    """Beat and after each maintenance write: Slurm MAINT reservations of planned windows
    created, those of cancelled windows deleted (idempotent)."""
    return maintenance_sync()
