"""Celery tasks of temporary overrides: thin callers of services, safe to run twice."""

from __future__ import annotations

from celery import shared_task

from pools.jobs import MAX_RETRIES, retry_countdown, run_unless_gone
from pools.overrides.services import override_apply, override_expire_due
from scheduler_adapters.errors import SchedulerError


@shared_task(bind=True, acks_late=True, max_retries=MAX_RETRIES)
def override_sync_task(self, override_id: int) -> dict | None:
    """Write the team's figures an override touches, after it was made or cancelled; ``None``
    when it was deleted before the task ran."""
    try:
        return run_unless_gone(override_apply, override_id=override_id)
    except SchedulerError as exc:
        if not exc.transient or self.request.is_eager:
            return None  # the expiry beat and reconcile write the same again
        raise self.retry(exc=exc, countdown=retry_countdown(self.request.retries)) from exc


@shared_task(acks_late=True)
def override_expire_task() -> dict[str, int]:
    """Beat: expire overrides whose date has passed and put the scheduler objects back."""
    return override_expire_due()
