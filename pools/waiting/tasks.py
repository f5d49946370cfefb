"""Beat runs :func:`pending_work_refresh_task` every minute; it reads only while someone
looks (:data:`pools.waiting.services.WATCH_WINDOW`)."""

from __future__ import annotations

from celery import shared_task

from pools.waiting.services import pending_work_refresh


@shared_task(acks_late=True)
def pending_work_refresh_task() -> dict:
    """One read of every cluster's waiting work; returns what it did (safe to run twice: each
    run replaces the rows whole)."""
    report = pending_work_refresh()
    return {"skipped": report.skipped, "rows": report.rows, "errors": report.errors}
