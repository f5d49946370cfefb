"""Beat runs :func:`pending_work_refresh_task` every minute; it reads only while someone
looks (:data:`pools.waiting.services.WATCH_WINDOW`) and queues one
:func:`pending_work_refresh_cluster_task` per cluster kept as data."""

from __future__ import annotations

from celery import shared_task

from pools.waiting.services import pending_work_refresh, pending_work_refresh_cluster


@shared_task(acks_late=True)
def pending_work_refresh_task() -> dict:
    """One read of the environment's clusters' waiting work and one task queued per cluster
    kept as data; returns what it did (safe to run twice: each read replaces rows whole)."""
    report = pending_work_refresh()
    return {
        "skipped": report.skipped,
        "rows": report.rows,
        "errors": report.errors,
        "queued": report.queued,
    }


@shared_task(acks_late=True)
def pending_work_refresh_cluster_task(cluster_id: int) -> int | None:
    """Read one cluster's waiting work; returns its rows (``None``: gone or failed — the
    previous rows stay, the error is in its health). Safe twice: rows are replaced whole."""
    return pending_work_refresh_cluster(cluster_id=cluster_id)
