"""Celery task of token flow: the daily prune of agent calls past their retention (beat)."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from pools.tokenflow.services import tokenflow_prune


@shared_task(acks_late=True)
def tokenflow_prune_task() -> dict:
    """Beat, daily: delete calls past ``TOKENFLOW_CALL_RETENTION_DAYS``; tasks keep totals."""
    return {"deleted": tokenflow_prune(now=timezone.now())}
