"""Kueue Workloads that are not admitted, and why (``kueue.x-k8s.io/v1beta2`` ``Workload``).

Kueue makes one Workload per job and reports its progress in ``status.conditions``
(kubernetes-sigs/kueue ``apis/kueue/v1beta2/workload_types.go``; the "Troubleshooting Jobs"
page of the Kueue site shows each state): ``QuotaReserved`` (``True`` once a ClusterQueue
reserved its quota), ``Admitted`` (``True`` once the admission checks passed too), ``Evicted``
(``True`` after a preemption or a timeout; the workload is then queued again), ``PodsReady``,
``Finished``. A Workload whose ``Admitted`` is not ``True`` and that is not ``Finished`` waits.

Why is read from the conditions, most telling first: an ``Evicted`` that is ``True`` (the
workload ran and was put back), then ``QuotaReserved`` ``False`` (its reason and message:
Kueue 0.15-0.18 say ``Pending`` for every shortfall, 0.19 on ``WaitingForQuota``,
``ExceedsMaxQuota``, ``NoMatchingFlavor``, ``TopologyPlacementFailed`` …; ``Inadmissible``
when the LocalQueue or ClusterQueue is missing or stopped), then ``Admitted`` ``False`` with
quota reserved (admission checks pending). No condition at all means Kueue has not tried yet
(the head of a ``StrictFIFO`` queue blocks the rest).

The flavour assigner's messages carry the figures (``pkg/scheduler/flavorassigner/
flavorassigner.go``): ``insufficient unused quota for <resource> in flavor <flavor>, <n> more
needed`` and ``insufficient quota for <resource> in flavor <flavor>, previously considered
podsets requests (<a>) + current podset request (<b>) > maximum capacity (<c>)``; both are
parsed into :class:`QuotaShortfall` for ``nvidia.com/gpu``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from scheduler_adapters.errors import UnexpectedResponse

GPU_RESOURCE = "nvidia.com/gpu"

WORKLOAD_API_VERSION = "kueue.x-k8s.io/v1beta2"

_UNUSED = re.compile(
    r"insufficient unused quota for (?P<resource>\S+) in flavor (?P<flavor>\S+), "
    r"(?P<needed>\d+) more needed"
)
_OVER_MAX = re.compile(
    r"insufficient quota for (?P<resource>\S+) in flavor (?P<flavor>\S+), previously "
    r"considered podsets requests \((?P<before>\d+)\) \+ current podset request "
    r"\((?P<request>\d+)\) > maximum capacity \((?P<maximum>\d+)\)"
)


@dataclass(frozen=True)
class QuotaShortfall:
    """The GPU figures of a flavour assigner message: ``more_needed`` cards beyond the unused
    quota of ``flavor`` (it may fit once others finish), or, with ``maximum``, a request that
    can never fit (``requested`` cards against a most of ``maximum``, borrowing included)."""

    flavor: str
    more_needed: int | None = None
    requested: int | None = None
    maximum: int | None = None


@dataclass(frozen=True)
class PendingWorkload:
    """A Workload not admitted: ``namespace``/``name``, its LocalQueue (``spec.queueName``),
    ``gpus_requested`` (``nvidia.com/gpu`` of every pod set: count x the pod's container
    requests, or ``status.resourceRequests`` when Kueue filled it), ``created`` (aware UTC),
    ``condition`` the condition the reason comes from (``None``: none yet), ``reason`` and
    ``message`` verbatim, ``since`` that condition's ``lastTransitionTime``, ``shortfall`` the
    GPU figures of the message when it has them, ``admission_checks`` the names of the checks
    still pending."""

    namespace: str
    name: str
    queue_name: str | None
    gpus_requested: int
    created: datetime | None
    condition: str | None
    reason: str | None
    message: str | None
    since: datetime | None
    shortfall: QuotaShortfall | None
    admission_checks: tuple[str, ...] = ()


def pending_workloads(items: Iterable[Mapping[str, Any]]) -> list[PendingWorkload]:
    """The Workloads of ``items`` (a WorkloadList's items) that wait, sorted by namespace and
    name. Raises :class:`UnexpectedResponse` for an item without ``metadata.name``."""
    found = []
    for item in items:
        conditions = _conditions(item)
        if _true(conditions, "Admitted") or _true(conditions, "Finished"):
            continue
        metadata = item.get("metadata") if isinstance(item.get("metadata"), dict) else {}
        name, namespace = metadata.get("name"), metadata.get("namespace")
        if not isinstance(name, str) or not isinstance(namespace, str):
            raise UnexpectedResponse("a Workload without metadata.name and namespace")
        spec = item.get("spec") if isinstance(item.get("spec"), dict) else {}
        condition = _telling(conditions)
        message = (condition or {}).get("message") or None
        reserved_message = conditions.get("QuotaReserved", {}).get("message") or ""
        found.append(
            PendingWorkload(
                namespace=namespace,
                name=name,
                queue_name=spec.get("queueName") or None,
                gpus_requested=_gpus(item),
                created=_time(metadata.get("creationTimestamp")),
                condition=(condition or {}).get("type"),
                reason=(condition or {}).get("reason") or None,
                message=message,
                since=_time((condition or {}).get("lastTransitionTime")),
                shortfall=quota_shortfall(message or "") or quota_shortfall(reserved_message),
                admission_checks=_pending_checks(item),
            )
        )
    return sorted(found, key=lambda w: (w.namespace, w.name))


def quota_shortfall(message: str) -> QuotaShortfall | None:
    """The ``nvidia.com/gpu`` figures of a flavour assigner message, ``None`` when it has none
    (another resource, or another message)."""
    for match in _OVER_MAX.finditer(message):
        if match["resource"] == GPU_RESOURCE:
            return QuotaShortfall(
                flavor=match["flavor"],
                requested=int(match["before"]) + int(match["request"]),
                maximum=int(match["maximum"]),
            )
    for match in _UNUSED.finditer(message):
        if match["resource"] == GPU_RESOURCE:
            return QuotaShortfall(flavor=match["flavor"], more_needed=int(match["needed"]))
    return None


def _conditions(item: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    status = item.get("status") if isinstance(item.get("status"), dict) else {}
    conditions = status.get("conditions") or []
    return {
        c["type"]: c for c in conditions if isinstance(c, dict) and isinstance(c.get("type"), str)
    }


def _true(conditions: Mapping[str, Mapping[str, Any]], kind: str) -> bool:
    return conditions.get(kind, {}).get("status") == "True"


def _telling(conditions: Mapping[str, dict[str, Any]]) -> dict[str, Any] | None:
    if _true(conditions, "Evicted"):
        return conditions["Evicted"]
    reserved = conditions.get("QuotaReserved")
    if reserved is not None and reserved.get("status") != "True":
        return reserved
    if "Admitted" in conditions:
        return conditions["Admitted"]
    return reserved


def _gpus(item: Mapping[str, Any]) -> int:
    status = item.get("status") if isinstance(item.get("status"), dict) else {}
    requests = status.get("resourceRequests")
    if isinstance(requests, list) and requests:
        return sum(
            _count(((entry or {}).get("resources") or {}).get(GPU_RESOURCE)) for entry in requests
        )
    total = 0
    spec = item.get("spec") if isinstance(item.get("spec"), dict) else {}
    for pod_set in spec.get("podSets") or []:
        count = pod_set.get("count", 1) if isinstance(pod_set, dict) else 1
        pod = ((pod_set or {}).get("template") or {}).get("spec") or {}
        per_pod = sum(
            _count(((c.get("resources") or {}).get("requests") or {}).get(GPU_RESOURCE))
            or _count(((c.get("resources") or {}).get("limits") or {}).get(GPU_RESOURCE))
            for c in pod.get("containers") or []
            if isinstance(c, dict)
        )
        total += int(count or 0) * per_pod
    return total


def _count(value: Any) -> int:
    """A whole-card quantity (``2``, ``"2"``); anything else counts 0 (GPUs are whole)."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return 0


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return None


def _pending_checks(item: Mapping[str, Any]) -> tuple[str, ...]:
    status = item.get("status") if isinstance(item.get("status"), dict) else {}
    return tuple(
        str(check.get("name"))
        for check in status.get("admissionChecks") or []
        if isinstance(check, dict) and check.get("state") in ("Pending", "Retry")
    )
