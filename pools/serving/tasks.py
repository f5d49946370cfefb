"""Celery tasks of serving signals: the 5-minute rollup pass and the hourly compaction (beat)."""

from __future__ import annotations

from celery import shared_task

from pools.serving.services import serving_rollup_compact, serving_rollup_pass


@shared_task(acks_late=True)
def serving_rollup_task() -> dict:
    """Beat, every 5 minutes: one pass; returns its counts."""
    run = serving_rollup_pass()
    return {
        "ok": run.ok,
        "queries": run.queries,
        "allocations": run.allocations,
        "rollups": run.rollups,
        "unmatched": run.unmatched_count,
        "error": run.error,
    }


@shared_task(acks_late=True)
def serving_compact_task() -> dict:
    """Beat, hourly: fold old 5-minute rows into hours and drop what is past retention."""
    return serving_rollup_compact()
