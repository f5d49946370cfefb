"""Idle scans that leave a record (:class:`pools.models.IdleScanRun`): the beat task and the
admins' "Scan now" run through here, so the idle page can say when the scan last ran and what
it could not read."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from pools.reclamation.models import IdleScanRun
from pools.reclamation.services.scan import ScanReport, idle_scan

# Runs older than this are deleted when a new one is recorded (the beat scans every 5 minutes).
KEEP_RUNS = timedelta(days=30)
_COUNTS = (
    "allocations",
    "busy",
    "idle",
    "unknown",
    "warned",
    "reclaimed",
    "would_reclaim",
    "resolved",
    "exempt",
    "dismissed",
    "devices",
)


def idle_scan_recorded(*, now: datetime | None = None, **kwargs: Any) -> IdleScanRun:
    """Run :func:`~pools.reclamation.services.scan.idle_scan` (``kwargs`` passed on) and store what
    it reported; returns the stored run."""
    report: ScanReport = idle_scan(now=now, **kwargs)
    run = IdleScanRun.objects.create(
        started_at=report.now,
        seconds=round(report.seconds, 3),
        error=report.error or "",
        notes=list(report.notes),
        no_data=list(report.no_data),
        **{name: getattr(report, name) for name in _COUNTS},
    )
    IdleScanRun.objects.filter(started_at__lt=(now or timezone.now()) - KEEP_RUNS).delete()
    return run


def last_scan_run() -> IdleScanRun | None:
    """The newest recorded scan, or ``None`` when none ran yet."""
    return IdleScanRun.objects.first()
