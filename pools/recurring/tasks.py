"""Celery tasks of recurring reservations: thin callers of services, safe to run twice."""

from __future__ import annotations

from celery import shared_task

from pools.recurring.services.binding import recurring_sync


@shared_task(acks_late=True)
def recurring_sync_task() -> dict[str, int]:
    """Beat: Slurm reservations of recurring reservations created and deleted, and the teams'
    quota and caps raised and lowered around each occurrence (idempotent)."""
    return recurring_sync()
