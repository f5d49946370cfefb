"""Which Prometheus bills which cluster's series, hour by hour (issue 29).

Each cluster may name its own Prometheus (``Cluster.prometheus_url``; blank, the environment's
cluster and the pools without one: ``settings.PROMETHEUS_URL``). The Prometheus usage imports
(Kubernetes GPU requests, vLLM tokens: :mod:`billing.services.prometheus_import`) read each
distinct URL **once** — a :class:`Meter`: the URL and the clusters naming it now — and bill
what it holds under keys that name the **cluster**, never the URL.

Decision (the README's *Costs* says the same):

- **Spans.** :class:`~billing.models.MetricsUrlSpan` rows say from when each cluster (``None``:
  the environment's) is read from which URL. Every import first compares each cluster's URL
  with its latest span (:func:`metrics_spans_sync`) and opens a new span at that moment when it
  changed. A series step (or a counter's increase, given to its later sample) at time ``t`` of
  cluster ``c`` is billed only by the meter whose URL is ``c``'s span URL at ``t``: if a
  cluster moves from the shared Prometheus to its own mid-month, the hours before the switch
  stay as the shared one billed them (their records are not read again), the hours after come
  from the new one, and no hour is billed twice, even when both Prometheus servers hold the
  same series. The switch is seen at the next import (hourly): series between the admin's edit
  and that import are read from the old URL, as before the edit.
- **Attribution.** A Kubernetes series is its node's cluster (``Node.cluster_id``, the host name
  in exactly one cluster's inventory, or in exactly one of the meter's clusters); a token series
  is its namespace's cluster (a namespace an allocation's scheduler binding names, in a pool of
  one cluster). Otherwise (a node not in the inventory, ``team-<slug>`` namespaces, which every
  cluster has) the meter's default: the environment when the URL is ``PROMETHEUS_URL``, else
  the lowest-id cluster naming the URL. A series of a cluster that another meter reads at that
  time is skipped here (billed there). Known limit: a shared Prometheus that still scrapes a
  cluster with its own Prometheus bills that cluster's *unplaced* series (nodes missing from
  the inventory, ``team-<slug>`` namespaces) under the shared default as well — place them
  (import the inventory, name namespaces in bindings) or stop the shared scrape.
- **Keys.** The environment's records keep the keys they had (``k8s:<namespace>:…``,
  ``vllm:<namespace>:…``); another cluster's carry ``@<cluster id>`` after the prefix
  (``k8s@7:team-nlp:…``), so two clusters with the same namespace names never share a key. A
  record covers one billing day *within one span*: when a span starts inside a day, the piece
  from it on is keyed ``<day>@<span start, epoch s>``, so the two sides of a switch never
  overwrite each other.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import F

from billing.locks import billing_lock
from billing.models import MetricsUrlSpan
from pools.capacity.models import Allocation
from pools.clusters.adapters import metrics_adapter, metrics_url
from pools.clusters.models import Cluster
from pools.clusters.services import cluster_of, cluster_operation_record
from pools.common.choices import ClusterOperation, CredentialKind, Scheduler
from pools.inventory.models import Node
from scheduler_adapters.errors import SchedulerError

SPANS_LOCK = "usage-import:metrics-spans"
ClusterKey = int | None  # a cluster kept as data, or None: the environment's


@dataclass(frozen=True)
class Meter:
    """One Prometheus the imports read: ``url`` (its identity, as the clusters name it, trailing
    ``/`` dropped; ``""``: none configured), the ``clusters`` naming it now, the ``default``
    cluster of series nothing places, and ``read_url``: where to send the queries when not
    ``url`` (``import_usage --prometheus-url``)."""

    url: str
    clusters: frozenset[ClusterKey]
    default: ClusterKey
    read_url: str = ""

    @property
    def address(self) -> str:
        return self.read_url or self.url


LEGACY = Meter(url="", clusters=frozenset({None}), default=None)


def cluster_key_prefix(prefix: str, cluster: ClusterKey) -> str:
    """``k8s`` → ``k8s`` for the environment, ``k8s@7`` for cluster 7."""
    return prefix if cluster is None else f"{prefix}@{cluster}"


def day_key(day, piece_start: datetime | None, day_start: datetime) -> str:
    """``2026-12-05``, or ``2026-12-05@<epoch s>`` for the piece of the day from a span that
    starts inside it."""
    if piece_start is None or piece_start <= day_start:
        return f"{day:%Y-%m-%d}"
    return f"{day:%Y-%m-%d}@{int(piece_start.timestamp())}"


@dataclass
class MeterMap:
    """What every meter of one import reads: the spans per cluster (``[(since, url)]``,
    ``since`` ascending, ``None`` first: from the beginning), host name → clusters, and
    namespace → clusters. A cluster with no span is read by any meter (the legacy single
    Prometheus)."""

    spans: dict[ClusterKey, list[tuple[datetime | None, str]]] = field(default_factory=dict)
    node_clusters: dict[str, set[ClusterKey]] = field(default_factory=dict)
    namespace_clusters: dict[str, set[ClusterKey]] = field(default_factory=dict)

    def _span_index(self, cluster: ClusterKey, t: datetime) -> int | None:
        spans = self.spans.get(cluster)
        if not spans:
            return None
        if len(spans) == 1:
            return 0
        starts = self._starts.get(cluster)
        if starts is None:
            starts = [s.timestamp() if s is not None else float("-inf") for s, _ in spans]
            self._starts[cluster] = starts
        return max(0, bisect.bisect_right(starts, t.timestamp()) - 1)

    def __post_init__(self) -> None:
        self._starts: dict[ClusterKey, list[float]] = {}

    def always(self, cluster: ClusterKey, meter: Meter) -> bool | None:
        """``True`` / ``False`` when ``meter`` bills all / none of ``cluster``'s series whatever
        their time (one span, or none); ``None`` when it depends on the time."""
        spans = self.spans.get(cluster)
        if not spans:
            return True
        if len(spans) == 1:
            return spans[0][1] == meter.url
        return None

    def reads(self, cluster: ClusterKey, meter: Meter, t: datetime) -> bool:
        """Whether ``meter`` bills ``cluster``'s series at ``t``."""
        index = self._span_index(cluster, t)
        return index is None or self.spans[cluster][index][1] == meter.url

    def span_bounds(
        self, cluster: ClusterKey, t: datetime
    ) -> tuple[datetime | None, datetime | None]:
        """``(since, until)`` of ``cluster``'s span at ``t`` (``None``: unbounded)."""
        index = self._span_index(cluster, t)
        if index is None:
            return None, None
        spans = self.spans[cluster]
        until = spans[index + 1][0] if index + 1 < len(spans) else None
        return spans[index][0], until

    def _placed(self, found: set[ClusterKey], meter: Meter) -> ClusterKey:
        if len(found) == 1:
            return next(iter(found))
        mine = found & meter.clusters
        return next(iter(mine)) if len(mine) == 1 else meter.default

    def cluster_of_node(self, node: str | None, meter: Meter) -> ClusterKey:
        return self._placed(self.node_clusters.get(node or "", set()), meter)

    def cluster_of_namespace(self, namespace: str | None, meter: Meter) -> ClusterKey:
        return self._placed(self.namespace_clusters.get(namespace or "", set()), meter)


def _cluster_key(cluster: Cluster | None) -> ClusterKey:
    if cluster is None or cluster.credential_kind == CredentialKind.ENVIRONMENT:
        return None
    return cluster.pk


def _current_urls() -> dict[ClusterKey, str]:
    """Each Kubernetes cluster kept as data, and the environment (``None``), → its Prometheus
    URL now (Slurm clusters' Prometheus hold dcgm-exporter series, not the billed ones)."""
    urls: dict[ClusterKey, str] = {None: (settings.PROMETHEUS_URL or "").rstrip("/")}
    for cluster in (
        Cluster.objects.filter(kind=Scheduler.KUBERNETES)
        .exclude(credential_kind=CredentialKind.ENVIRONMENT)
        .order_by("pk")
    ):
        urls[cluster.pk] = metrics_url(cluster).rstrip("/")
    return urls


def metrics_spans_sync(*, now: datetime) -> dict[ClusterKey, list[tuple[datetime | None, str]]]:
    """Open a span at ``now`` for each cluster whose URL differs from its latest span's (a
    first span, from the beginning, for one that has none); returns every cluster's spans.
    Under a lock, so two imports at the same time open one span, not two."""
    urls = _current_urls()
    with transaction.atomic():
        billing_lock(SPANS_LOCK)
        spans: dict[ClusterKey, list[tuple[datetime | None, str]]] = defaultdict(list)
        for cluster_id, since, url in MetricsUrlSpan.objects.order_by(
            "cluster_id", F("since").asc(nulls_first=True), "id"
        ).values_list("cluster_id", "since", "url"):
            spans[cluster_id].append((since, url))
        for key, url in urls.items():
            history = spans[key]
            if history and history[-1][1] == url:
                continue
            # never before the span it follows (an import given an earlier "now": a replay)
            since = max(now, history[-1][0] or now) if history else None
            MetricsUrlSpan.objects.create(cluster_id=key, url=url, since=since)
            history.append((since, url))
    return {key: spans[key] for key in urls}


def _meter_map(spans: dict[ClusterKey, list[tuple[datetime | None, str]]]) -> MeterMap:
    node_clusters: dict[str, set[ClusterKey]] = defaultdict(set)
    for hostname, cluster_id in Node.objects.values_list("hostname", "cluster_id"):
        if cluster_id in spans:  # Kubernetes clusters and the environment's
            node_clusters[hostname].add(cluster_id)
    environment_rows = set(
        Cluster.objects.filter(credential_kind=CredentialKind.ENVIRONMENT).values_list(
            "pk", flat=True
        )
    )
    namespace_clusters: dict[str, set[ClusterKey]] = defaultdict(set)
    for binding, cluster_id in Allocation.objects.values_list(
        "scheduler_binding", "pool__cluster_id"
    ):
        namespace = (binding or {}).get("namespace")
        if isinstance(namespace, str):
            key = None if cluster_id in environment_rows else cluster_id
            if key in spans:
                namespace_clusters[namespace].add(key)
    return MeterMap(spans=spans, node_clusters=node_clusters, namespace_clusters=namespace_clusters)


def meters_load(
    *, now: datetime, cluster: Cluster | None = None, read_url: str | None = None
) -> tuple[list[Meter], MeterMap]:
    """The meters to read now (one per distinct URL, environment's first, then by cluster id;
    a URL of ``""`` only with ``read_url``) and the map they are billed with, after
    :func:`metrics_spans_sync`. ``cluster``: only the meter that cluster reads (with every
    cluster sharing its URL); ``read_url``: read that meter (default: the environment's) there."""
    spans = metrics_spans_sync(now=now)
    groups: dict[str, list[ClusterKey]] = {}
    for key, history in spans.items():
        groups.setdefault(history[-1][1], []).append(key)
    environment_url = spans[None][-1][1]
    meters = []
    for url, keys in groups.items():
        default = None if url == environment_url else min(k for k in keys if k is not None)
        meters.append(Meter(url=url, clusters=frozenset(keys), default=default))
    wanted = _cluster_key(cluster) if cluster is not None else None
    if cluster is not None or read_url:
        meters = [m for m in meters if wanted in m.clusters]
        if read_url:
            meters = [Meter(m.url, m.clusters, m.default, read_url.rstrip("/")) for m in meters]
    return [m for m in meters if m.address], _meter_map(spans)


@dataclass
class MetersImport:
    """What :func:`usage_import_meters` did: records created per importer name (empty when no
    meter was read), every :class:`~billing.models.UsageImport` written, and each meter that
    could not be read (``{"url", "clusters", "error", "transient"}``)."""

    created: dict[str, int] = field(default_factory=dict)
    imports: list = field(default_factory=list)
    failed: list[dict] = field(default_factory=list)


Importer = Callable[..., object]


def usage_import_meters(
    *,
    importers: dict[str, Importer],
    start: datetime,
    end: datetime,
    now: datetime,
    cluster: Cluster | None = None,
    read_url: str | None = None,
    adapter_for: Callable[[str], object] | None = None,
) -> MetersImport:
    """Run each of ``importers`` (``name → usage_import_*``, called with ``metrics``, ``start``,
    ``end``, ``now``, ``meter``, ``meters``) on every meter of :func:`meters_load`, one after
    the other, each meter's adapter (``adapter_for(url)``, default
    :func:`~pools.clusters.adapters.metrics_adapter`) closed after it. A meter whose Prometheus
    fails (:class:`SchedulerError`) is listed in ``failed`` and kept as a usage-import error of
    each of its clusters; the others are imported all the same. Each importer writes its
    records in one transaction, so a failure leaves no half of one importer's records."""
    meters, meter_map = meters_load(now=now, cluster=cluster, read_url=read_url)
    adapter_for = adapter_for or (lambda url: metrics_adapter(url=url))
    result = MetersImport()
    for meter in meters:
        adapter = adapter_for(meter.address)
        try:
            for name, importer in importers.items():
                imported = importer(
                    metrics=adapter, start=start, end=end, now=now, meter=meter, meters=meter_map
                )
                result.created[name] = result.created.get(name, 0) + imported.records_created
                result.imports.append(imported)
        except SchedulerError as error:
            result.failed.append(
                {"url": meter.address, "clusters": sorted(meter.clusters, key=str),
                 "error": f"{error.code}: {error}", "transient": error.transient}
            )  # fmt: skip
            _record(meter.clusters, [f"Prometheus {meter.address}: {error.code}: {error}"])
            continue
        finally:
            close = getattr(adapter, "close", None)
            if close is not None:
                close()
        _record(meter.clusters, [])
    return result


def _record(keys: Iterable[ClusterKey], errors: list[str]) -> None:
    """Keep a meter's outcome in the health of its Kubernetes clusters (the environment's: its
    row, when the environment defines one)."""
    for key in sorted(keys, key=lambda k: -1 if k is None else k):
        row = (
            cluster_of(kind=Scheduler.KUBERNETES, cluster=None)
            if key is None
            else Cluster.objects.filter(pk=key, kind=Scheduler.KUBERNETES).first()
        )
        cluster_operation_record(cluster=row, operation=ClusterOperation.USAGE, errors=errors)
