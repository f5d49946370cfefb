"""Shared-card uses from Prometheus (issue 36 item 4): which pod holds how many replicas of which
time-sliced or MPS card, when — written as :class:`~billing.models.SharedCardUse` rows that
:mod:`billing.shared_cards` splits to the cent.

Sources (all through Prometheus):

- **which cards are shared, into how many replicas**: GPU feature discovery's node labels
  ``nvidia.com/gpu.replicas`` and ``nvidia.com/gpu.sharing-strategy`` (``time-slicing`` or
  ``mps``), read from ``kube_node_labels{label_nvidia_com_gpu_replicas!=""}`` as the product
  label is (kube-state-metrics ``--metric-labels-allowlist``); a node with 1 replica is not
  shared. The last value in the window wins (a re-configured node: the newest).
- **which pod holds which replica of which card**: dcgm-exporter with
  ``KUBERNETES_VIRTUAL_GPUS=true`` (NVIDIA/dcgm-exporter PR #432) writes one copy of each
  metric per replica handed to a pod, labelled ``vgpu`` (the replica), ``UUID`` (the physical
  card), ``Hostname`` and the pod's ``namespace``/``pod``. Read
  ``DCGM_FI_DEV_GPU_UTIL{vgpu!=""}`` with a range query at ``step_s`` aligned to local
  midnight: at each step a pod holds as many replicas of the card as it has distinct ``vgpu``
  series there. The value itself is the whole card's utilisation copied to every pod
  (dcgm-exporter #582), so it is not used as a share.
- **card**: ``UUID`` → :class:`pools.inventory.models.Gpu` by its stored ``uuid``; **team**:
  namespace ``team-<slug>`` or an allocation's binding namespace, as the Kubernetes meter.

Integration as in :mod:`billing.services.prometheus_import` (the value at step ``t`` holds for
``[t, t + step)``; a start or stop is off by at most one step; a vanished series answers for
the lookback). Consecutive steps with the same replica count make one use, cut at local
midnights. Idempotent: the window is widened to whole billing days, and the rows of this source
starting in those days are replaced by the ones read now, in one transaction.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from billing.choices import UsageSource
from billing.conf import billing_zone
from billing.locks import billing_lock, usage_source_lock_name
from billing.models import SharedCardUse, UsageImport
from billing.pricing import split_at
from billing.services.prometheus_import import (
    DEFAULT_STEP_S,
    MetricsSource,
    NamespaceTeams,
    billing_days,
    shared_nodes,
)
from billing.services.usage_import import (
    ImportReport,
    UsageCatalogue,
    usage_import_save,
    usage_window_check,
)
from billing.services.versions import shared_card_months_changed
from pools.inventory.models import Gpu
from scheduler_adapters.prometheus import dcgm_labels

POD_REPLICAS = 'DCGM_FI_DEV_GPU_UTIL{vgpu!=""}'
SOURCE_PREFIX = "k8s-shared:"


def _held(metrics: MetricsSource, days, step_s: int) -> dict[tuple, dict[float, set[str]]]:
    """``(node, UUID, namespace, pod)`` → step timestamp → the replicas (``vgpu``) it holds."""
    held: dict[tuple, dict[float, set[str]]] = defaultdict(lambda: defaultdict(set))
    for _day, a, b in days:
        last_t = b - timedelta(seconds=1)
        if last_t < a:
            continue
        for series in metrics.query_range(POD_REPLICAS, start=a, end=last_t, step_s=step_s):
            labels = dcgm_labels(series.label_map)
            key = (labels.hostname or "", labels.uuid or "", labels.namespace or "",
                   labels.pod or "")  # fmt: skip
            for sample in series.samples:
                held[key][sample.timestamp].add(series.label("vgpu") or "")
    return held


def _runs(points: dict[float, set[str]], step_s: int) -> list[tuple[datetime, datetime, int]]:
    """Consecutive steps holding the same number of replicas as ``(start, end, replicas)``."""
    runs: list[list] = []
    for timestamp in sorted(points):
        t = datetime.fromtimestamp(timestamp, tz=UTC)
        count = len(points[timestamp])
        if runs and runs[-1][1] == t and runs[-1][2] == count:
            runs[-1][1] = t + timedelta(seconds=step_s)
        else:
            runs.append([t, t + timedelta(seconds=step_s), count])
    return [(a, b, k) for a, b, k in runs]


def shared_card_usage_import(
    *,
    metrics: MetricsSource,
    start: datetime,
    end: datetime,
    now: datetime | None = None,
    step_s: int = DEFAULT_STEP_S,
) -> UsageImport:
    """Replace the shared-card uses of the billing days covering ``[start, end)`` with those
    Prometheus shows (module docstring); pods of unknown namespaces, cards not in the inventory
    and more replicas than the card has are reported, not written."""
    usage_window_check(start, end)
    if step_s <= 0 or 3600 % step_s:
        raise ValueError("step_s must divide an hour")
    now = now or timezone.now()
    report = ImportReport()
    days = billing_days(start, end, now, billing_zone())
    rows: list[SharedCardUse] = []
    if days:
        wide_start, wide_end = days[0][1], days[-1][2]
        rows = _rows(metrics, days, step_s, wide_start, wide_end, report)
    with transaction.atomic():
        # a second run of the same days waits here, then replaces the first one's rows
        billing_lock(usage_source_lock_name(UsageSource.KUBERNETES_SHARED))
        if days:
            replaced = SharedCardUse.objects.filter(
                source_id__startswith=SOURCE_PREFIX,
                period_start__gte=wide_start,
                period_start__lt=wide_end,
            )
            # the replaced uses can reach past the window: their months change too
            reach = replaced.aggregate(end=Max("period_end"))["end"] or wide_end
            shared_card_months_changed(start=wide_start, end=max(reach, wide_end))
            replaced.delete()
            SharedCardUse.objects.bulk_create(rows)
            shared_card_months_changed(
                start=wide_start, end=max([wide_end, *(r.period_end for r in rows)])
            )
        report.created = len(rows)
        return usage_import_save(UsageSource.KUBERNETES_SHARED, start, end, report)


def _rows(metrics, days, step_s, wide_start, wide_end, report) -> list[SharedCardUse]:
    nodes = shared_nodes(metrics, wide_start, wide_end)
    teams = NamespaceTeams(UsageCatalogue())
    held = _held(metrics, days, step_s)
    gpus = dict(
        Gpu.objects.filter(uuid__in={key[1] for key in held}).values_list("uuid", "pk")
    )  # fmt: skip
    day_starts = [a for _, a, _ in days[1:]]
    rows = []
    for (node, uuid, namespace, pod), points in sorted(held.items()):
        report.jobs_seen += 1
        issue = None
        if node not in nodes:
            issue = ("not_shared", f"node {node!r} has no nvidia.com/gpu.replicas label > 1")
        elif uuid not in gpus:
            issue = ("unknown_card", f"card {uuid!r} on {node!r} is not in the inventory")
        elif teams.get(namespace) is None:
            issue = ("unknown_namespace", f"namespace {namespace!r} is no team's")
        if issue:
            report.issues.append({"code": issue[0], "pod": f"{namespace}/{pod}",
                                  "detail": f"{issue[1]}: not charged"})  # fmt: skip
            continue
        replicas, basis = nodes[node]
        for a, b, k in _runs(points, step_s):
            if k > replicas:
                report.issues.append({"code": "over_replicas", "pod": f"{namespace}/{pod}",
                                      "detail": f"{k} of {replicas} replicas at {a.isoformat()}"
                                                ": not charged"})  # fmt: skip
                continue
            for piece_a, piece_b in split_at(max(a, wide_start), min(b, wide_end), day_starts):
                rows.append(SharedCardUse(
                    gpu_id=gpus[uuid], team_id=teams.get(namespace), basis=basis,
                    period_start=piece_a, period_end=piece_b, parts_held=k,
                    parts_per_card=replicas,
                    source_id=f"{SOURCE_PREFIX}{uuid}:{namespace}:{pod}:"
                              f"{piece_a:%Y-%m-%dT%H:%M:%SZ}",
                ))  # fmt: skip
    return rows
