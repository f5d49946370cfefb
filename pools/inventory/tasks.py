"""Celery task of the inventory: a big uploaded file imported in the background."""

from __future__ import annotations

from celery import shared_task

from pools.inventory.services.uploads import inventory_upload_run
from pools.jobs import run_unless_gone


@shared_task(acks_late=True)
def inventory_upload_task(upload_id: int) -> str:
    """Import an upload; returns its status. Safe twice: a finished one is left as it is."""
    upload = run_unless_gone(inventory_upload_run, upload_id=upload_id)
    return "missing" if upload is None else upload.status
