"""Celery tasks of the advisor: the 5-minute pass and the weekly digest (beat)."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from pools.advisor.services import advisor_digest_send, advisor_pass


@shared_task(acks_late=True)
def advisor_pass_task() -> dict:
    """Beat, every 5 minutes (after each serving rollup): judge every running allocation."""
    run = advisor_pass(now=timezone.now())
    return {
        "run": run.pk,
        "allocations": run.allocations,
        "opened": run.opened,
        "updated": run.updated,
        "closed": run.closed,
        "undecided": run.undecided,
    }


@shared_task(acks_late=True)
def advisor_digest_task() -> dict:
    """Beat, daily: the weekly digest to each opted-in manager whose last is 6+ days old."""
    return advisor_digest_send(now=timezone.now())
