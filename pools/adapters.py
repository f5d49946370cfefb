"""The one place that builds adapters from settings: scheduler adapters (``SCHEDULERS``) and
Prometheus (``PROMETHEUS_URL``), so no module repeats a setting's default.

Scheduler adapters are built once per distinct configuration and kept (they hold HTTP
connection pools); :func:`reset` closes and forgets them (tests that change ``SCHEDULERS``).
Prometheus adapters are cheap and built per use; the caller closes them.
"""

from __future__ import annotations

from django.conf import settings

from scheduler_adapters.base import SchedulerAdapter
from scheduler_adapters.prometheus import PrometheusAdapter
from scheduler_adapters.registry import build_scheduler_adapter

_SCHEDULERS: dict[str, SchedulerAdapter] = {}


def scheduler_config(scheduler: str) -> dict | None:
    """``settings.SCHEDULERS[scheduler]`` (``"slurm"`` / ``"kubernetes"``), or ``None`` when that
    scheduler is not configured (the demo)."""
    return settings.SCHEDULERS.get(scheduler) or None


def scheduler_adapter(scheduler: str) -> SchedulerAdapter | None:
    """The adapter ``settings.SCHEDULERS[scheduler]`` describes (built once per distinct
    configuration), or ``None`` when the scheduler is not configured.

    Raises what :func:`scheduler_adapters.registry.build_scheduler_adapter` raises for a
    configuration it cannot build (``ValueError`` naming the bad key).
    """
    config = scheduler_config(scheduler)
    if not config:
        return None
    key = repr(sorted(config.items()))
    if key not in _SCHEDULERS:
        _SCHEDULERS[key] = build_scheduler_adapter(config)
    return _SCHEDULERS[key]


def metrics_adapter(
    *, url: str | None = None, timeout_s: float | None = None
) -> PrometheusAdapter | None:
    """The Prometheus of ``url`` (default ``settings.PROMETHEUS_URL``) with
    ``timeout_s`` seconds per query (default ``PROMETHEUS_TIMEOUT_S``, 30 s), or ``None`` when
    no URL is configured."""
    url = url or settings.PROMETHEUS_URL
    if not url:
        return None
    return PrometheusAdapter(url, timeout_s=float(timeout_s or settings.PROMETHEUS_TIMEOUT_S))


def dashboard_metrics() -> PrometheusAdapter | None:
    """Prometheus with the short timeouts a page can wait on: ``PROMETHEUS_DASHBOARD_TIMEOUT_S``
    seconds per query (default 5 s), at most 2 s to connect; ``None`` without a URL."""
    if not settings.PROMETHEUS_URL:
        return None
    timeout_s = float(settings.PROMETHEUS_DASHBOARD_TIMEOUT_S)
    return PrometheusAdapter(
        settings.PROMETHEUS_URL, timeout_s=timeout_s, connect_timeout_s=min(2.0, timeout_s)
    )


def reset() -> None:
    """Close and forget every scheduler adapter built so far (the next call builds anew)."""
    for adapter in _SCHEDULERS.values():
        close = getattr(adapter, "close", None)
        if close is not None:
            close()
    _SCHEDULERS.clear()
