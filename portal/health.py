"""Liveness (``/healthz``) and readiness (``/readyz``) probes."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET


@require_GET
@never_cache
@login_not_required
def healthz(request):
    """The process is alive and serving requests; checks nothing else."""
    return JsonResponse({"status": "ok"})


def _check_database() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any driver error means "not ready"
        return f"{type(exc).__name__}: {exc}"
    return None


def _check_broker() -> str | None:
    if not settings.CELERY_BROKER_URL:
        return None  # eager mode: tasks run in-process, no broker to wait for
    from portal.celery import app

    try:
        with app.connection_for_write() as conn:
            # One immediate retry: kombu's default 2 s pause before it would make a refused
            # connection take longer than a probe's timeout.
            conn.ensure_connection(max_retries=1, interval_start=0, timeout=2)
    except Exception as exc:  # kombu raises several types for an unreachable broker
        return f"{type(exc).__name__}: {exc}"
    return None


@require_GET
@never_cache
@login_not_required
def readyz(request):
    """200 when the database and the Celery broker really answer, 503 naming what failed."""
    checks = {"database": _check_database(), "broker": _check_broker()}
    failed = {name: error for name, error in checks.items() if error}
    body = {
        "status": "ok" if not failed else "unavailable",
        "checks": {name: (error or "ok") for name, error in checks.items()},
    }
    if not settings.CELERY_BROKER_URL:
        body["checks"]["broker"] = "eager (no broker configured)"
    return JsonResponse(body, status=503 if failed else 200)
