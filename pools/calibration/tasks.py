"""Celery task of calibration: the hourly pass (beat)."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from pools.calibration.services import calibration_refresh


@shared_task(acks_late=True)
def calibration_refresh_task() -> dict:
    """Beat, hourly: measured against sized for every serving allocation; returns counts."""
    return calibration_refresh(now=timezone.now())
