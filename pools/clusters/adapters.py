"""The one place that builds adapters from settings: scheduler adapters (``SCHEDULERS``, and
the clusters kept as data: :func:`cluster_adapter`, :func:`pool_adapter`) and Prometheus
(``PROMETHEUS_URL``, or a cluster's own ``prometheus_url``: :func:`metrics_adapter`), so no
module repeats a setting's default.

Scheduler adapters are built once per distinct configuration and kept (they hold HTTP
connection pools); :func:`reset` closes and forgets them (tests that change ``SCHEDULERS``).
Prometheus adapters are cheap and built per use; the caller closes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from django.conf import settings

from scheduler_adapters.base import SchedulerAdapter
from scheduler_adapters.kubernetes import KubernetesAdapter
from scheduler_adapters.prometheus import PrometheusAdapter
from scheduler_adapters.registry import build_scheduler_adapter

T = TypeVar("T")

_SCHEDULERS: dict[str, SchedulerAdapter] = {}
_CARD_CLASS_SOURCE: list[Callable[[], Mapping[str, str]]] = [dict]  # no classes until set


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
    return _built(config)


def cluster_settings(cluster: Any) -> dict[str, Any] | None:
    """The :func:`~scheduler_adapters.registry.build_scheduler_adapter` settings of ``cluster``
    (a :class:`pools.clusters.models.Cluster`), or ``None`` for an environment cluster whose
    scheduler is not configured.

    An environment cluster is ``settings.SCHEDULERS[kind]`` as it stands; any other is built
    from its fields, its credentials read from the file it names at each call (a token file is
    read here, a JWT key by the registry), so a rotated file is picked up. Raises ``OSError``
    when the file cannot be read.
    """
    if cluster.credential_kind == "environment":
        return scheduler_config(cluster.kind)
    if cluster.kind == "slurm":
        config: dict[str, Any] = {
            "BACKEND": "slurm",
            "URL": cluster.api_url,
            "USER": cluster.slurm_user,
            "CLUSTER": cluster.slurm_cluster_name,
            "TIME_ZONE": cluster.time_zone,
        }
        if cluster.api_version:
            config["API_VERSION"] = cluster.api_version
        if cluster.credential_kind == "jwt-key":
            config["JWT_KEY_PATH"] = cluster.credential_path
        else:
            config["TOKEN"] = _read_token(cluster.credential_path)
        return config
    config = {"BACKEND": "kubernetes", "KUEUE": bool(cluster.kueue)}
    if cluster.credential_kind == "kubeconfig":
        config["KUBECONFIG"] = cluster.credential_path
        if cluster.kube_context:
            config["CONTEXT"] = cluster.kube_context
    else:
        config["HOST"] = cluster.api_url
        config["TOKEN"] = _read_token(cluster.credential_path)
        if cluster.ca_path:
            config["CA"] = cluster.ca_path
    return config


def _read_token(path: str) -> str:
    token = Path(path).read_text(encoding="utf-8").strip()
    if not token:
        raise OSError(f"the token file {path} is empty")
    return token


def cluster_adapter(cluster: Any) -> SchedulerAdapter | None:
    """The adapter of ``cluster`` (built once per distinct configuration, as
    :func:`scheduler_adapter`), or ``None`` for an environment cluster whose scheduler is not
    configured. Raises ``OSError`` (credentials unreadable) and what
    :func:`~scheduler_adapters.registry.build_scheduler_adapter` raises."""
    config = cluster_settings(cluster)
    if not config:
        return None
    return _built(config)


def _built(config: dict) -> SchedulerAdapter:
    key = repr(sorted(config.items()))
    if key not in _SCHEDULERS:
        _SCHEDULERS[key] = _with_card_classes(build_scheduler_adapter(config))
    return _SCHEDULERS[key]


def _with_card_classes(adapter: Any) -> Any:
    """A Kubernetes adapter that taints nodes by card class (``CARD_CLASS_TAINTS``) reads the
    product -> card class map at each use from the source :func:`set_card_class_source`
    registered (the catalogue, :func:`pools.classes.selectors.catalogue_card_classes`, set by
    ``PoolsConfig.ready``), so its ResourceFlavors tolerate their class's taint whoever
    writes them."""
    if isinstance(adapter, KubernetesAdapter) and adapter.card_class_taints:
        adapter.product_card_classes = lambda: _CARD_CLASS_SOURCE[0]()
    return adapter


def set_card_class_source(source: Callable[[], Mapping[str, str]]) -> None:
    """Where adapters read GPU product -> card class (a sub-domain above this module)."""
    _CARD_CLASS_SOURCE[0] = source


def cluster_adapter_unshared(cluster: Any) -> SchedulerAdapter | None:
    """A new adapter of ``cluster``, not kept (the caller closes it): for a connection check,
    which must not reuse a kept adapter's discovered API version or connections. Raises as
    :func:`cluster_adapter`."""
    config = cluster_settings(cluster)
    return _with_card_classes(build_scheduler_adapter(config)) if config else None


def pool_adapter(pool: Any) -> SchedulerAdapter | None:
    """The adapter of ``pool``'s cluster; a pool without one is in the cluster the environment
    defines for its scheduler (:func:`scheduler_adapter`)."""
    if pool.cluster_id is None:
        return scheduler_adapter(pool.scheduler)
    return cluster_adapter(pool.cluster)


def metrics_url(cluster: Any = None) -> str:
    """The Prometheus URL of ``cluster`` (a :class:`pools.clusters.models.Cluster`): its
    ``prometheus_url``, or ``settings.PROMETHEUS_URL`` when that is blank or there is no
    cluster (pools without one). ``""`` when neither is set."""
    return (getattr(cluster, "prometheus_url", "") or "") or settings.PROMETHEUS_URL


def by_metrics_url(items: Iterable[T], cluster_of: Callable[[T], Any]) -> dict[str, list[T]]:
    """``items`` grouped by the Prometheus URL of their cluster (:func:`metrics_url` of
    ``cluster_of(item)``, ``None`` for no cluster), URLs in first-seen order, each group in
    ``items`` order; ``""`` groups the items when neither the cluster nor ``PROMETHEUS_URL``
    names one. A fleet-wide reader asks each URL once for its group. URLs differing only by a
    trailing ``/`` are one group (keyed without it)."""
    groups: dict[str, list[T]] = {}
    for item in items:
        groups.setdefault(metrics_url(cluster_of(item)).rstrip("/"), []).append(item)
    return groups


def metrics_adapter(
    *, url: str | None = None, timeout_s: float | None = None, cluster: Any = None
) -> PrometheusAdapter | None:
    """The Prometheus of ``url``, else of ``cluster`` (:func:`metrics_url`: its
    ``prometheus_url``, blank = ``settings.PROMETHEUS_URL``), else ``settings.PROMETHEUS_URL``,
    with ``timeout_s`` seconds per query (default ``PROMETHEUS_TIMEOUT_S``, 30 s), answers
    gzip-compressed when ``PROMETHEUS_COMPRESS`` is on (default off: plain JSON), or ``None``
    when no URL is configured. The caller closes it."""
    url = url or metrics_url(cluster)
    if not url:
        return None
    return PrometheusAdapter(
        url,
        timeout_s=float(timeout_s or settings.PROMETHEUS_TIMEOUT_S),
        compress=settings.PROMETHEUS_COMPRESS,
    )


def dashboard_metrics(url: str | None = None) -> PrometheusAdapter | None:
    """The Prometheus of ``url`` (default ``settings.PROMETHEUS_URL``) with the short timeouts
    a page can wait on: ``PROMETHEUS_DASHBOARD_TIMEOUT_S`` seconds per query (default 5 s), at
    most 2 s to connect; ``None`` without a URL."""
    url = url or settings.PROMETHEUS_URL
    if not url:
        return None
    timeout_s = float(settings.PROMETHEUS_DASHBOARD_TIMEOUT_S)
    return PrometheusAdapter(
        url,
        timeout_s=timeout_s,
        connect_timeout_s=min(2.0, timeout_s),
        compress=settings.PROMETHEUS_COMPRESS,
    )


def reset() -> None:
    """Close and forget every scheduler adapter built so far (the next call builds anew)."""
    for adapter in _SCHEDULERS.values():
        close = getattr(adapter, "close", None)
        if close is not None:
            close()
    _SCHEDULERS.clear()
