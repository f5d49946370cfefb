"""The outbox's drain: run by beat every minute and by every worker as it starts."""

from __future__ import annotations

from celery import shared_task
from celery.signals import worker_ready

from pools.jobs.outbox import outbox_drain


@shared_task
def outbox_drain_task() -> dict[str, int]:
    """Send what the outbox holds (jobs the broker could not take when they were queued)."""
    return outbox_drain()


@worker_ready.connect
def _drain_when_a_worker_starts(sender=None, **kwargs) -> None:
    # A worker that starts after an outage finds the broker up: send what waited for it.
    outbox_drain_task.delay()
