"""Health probes: liveness (``/healthz``), readiness (``/readyz``) and, for pool admins, the
state of every service the portal uses (``/healthz/deep``).

Readiness asks only what a web pod needs to serve a request, the database: a broker or cache
outage must not take every web pod out of the Service while reads still work (writes keep
their jobs in the outbox, and the cache falls back to each process's memory). Public bodies
name no host, port, URL or error text; what failed is logged.
"""

from __future__ import annotations

import logging

from celery import current_app
from django.contrib.auth.decorators import login_not_required
from django.core.cache import caches
from django.db import connection
from django.http import JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.jobs.models import QueuedJob
from pools.web.api import IsPoolAdmin
from portal.cache import RedisCacheWithLocalFallback

logger = logging.getLogger(__name__)


@require_GET
@never_cache
@login_not_required
def healthz(request):
    """The process is alive and serving requests; checks nothing else."""
    return JsonResponse({"status": "ok"})


def _failure(service: str, exc: Exception) -> str:
    """Log what failed (with its text, for the operator) and name only its kind."""
    logger.warning("health: %s unavailable: %s: %s", service, type(exc).__name__, exc)
    return f"unavailable ({type(exc).__name__})"


def _check_database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any driver error means "not ready"
        return _failure("database", exc)
    return "ok"


def _check_broker() -> str:
    if current_app.conf.task_always_eager:
        return "eager (no broker configured)"
    try:
        with current_app.connection_for_write() as conn:
            # One immediate retry: kombu's default 2 s pause before it would make a refused
            # connection take longer than a probe's timeout.
            conn.ensure_connection(max_retries=1, interval_start=0, timeout=2)
    except Exception as exc:  # kombu raises several types for an unreachable broker
        return _failure("broker", exc)
    return "ok"


def _check_cache() -> str:
    cache = caches["default"]
    if not isinstance(cache, RedisCacheWithLocalFallback):
        return "local (this process's memory)"
    try:
        cache.ping()
    except Exception as exc:  # redis raises ConnectionError, TimeoutError …
        return _failure("cache", exc)
    return "ok"


def _outbox() -> dict:
    """Jobs the broker has not taken yet: how many, and the oldest one's age in seconds (None
    when there is none)."""
    oldest = QueuedJob.objects.order_by("created_at").values_list("created_at", flat=True).first()
    return {
        "queued": QueuedJob.objects.count(),
        "oldest_age_s": None if oldest is None else int((timezone.now() - oldest).total_seconds()),
    }


@require_GET
@never_cache
@login_not_required
def readyz(request):
    """200 ``{"status": "ok", "checks": {"database": "ok"}}`` when the database answers, else
    503 with ``"unavailable"`` (the kind of error only; the details are logged)."""
    database = _check_database()
    ready = database == "ok"
    return JsonResponse(
        {"status": "ok" if ready else "unavailable", "checks": {"database": database}},
        status=200 if ready else 503,
    )


class DeepHealthView(APIView):
    """``GET /healthz/deep``, for pool admins (session or API token): the database, the Celery
    broker, the shared cache and the outbox.

    200 when every service answers, 503 otherwise; each check is ``"ok"``,
    ``"unavailable (<error class>)"`` or how it is configured instead (eager tasks, a local
    cache); ``outbox`` is ``{"queued": n, "oldest_age_s": s | None}``.
    """

    permission_classes = [IsPoolAdmin]
    schema = None  # not part of the API

    def get(self, request):
        checks = {
            "database": _check_database(),
            "broker": _check_broker(),
            "cache": _check_cache(),
        }
        healthy = not any(value.startswith("unavailable") for value in checks.values())
        if checks["database"] == "ok":
            checks["outbox"] = _outbox()
        response = Response(
            {"status": "ok" if healthy else "degraded", "checks": checks},
            status=200 if healthy else 503,
        )
        response["Cache-Control"] = "no-store"
        return response


deep_health = login_not_required(DeepHealthView.as_view())
