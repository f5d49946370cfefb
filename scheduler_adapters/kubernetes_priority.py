"""Workload classes in Kubernetes (issue #36): one ``scheduling.k8s.io/v1`` PriorityClass per
class (pods name it in ``priorityClassName``; the scheduler preempts lower values for higher
ones) and, with Kueue, one ``WorkloadPriorityClass`` of the same value (jobs name it in the
``kueue.x-k8s.io/priority-class`` label; Kueue orders and preempts admitted workloads by it).
Both cluster-scoped, named ``portal-<slug>``, written through
:meth:`KubernetesAdapter.ensure_objects` (read, compare, apply only what differs; read back by
the next ensure).

What the API server refuses, checked here first so that nothing is half-applied
(k8s.io/kubernetes pkg/apis/scheduling/validation, https://kubernetes.io/docs/concepts/
scheduling-eviction/pod-priority-preemption/): a user PriorityClass ``value`` above one billion
(higher is for ``system-`` classes), a name starting ``system-``, and a change of ``value`` or
``preemptionPolicy`` of an existing PriorityClass ("may not be changed in an update"): the
class must be deleted and created again, which the portal leaves to an operator because pods
running under it keep their old priority. Kueue's WorkloadPriorityClass ``value`` is mutable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scheduler_adapters.errors import SchedulerRejected
from scheduler_adapters.kubernetes import KubernetesAdapter
from scheduler_adapters.kubernetes_manifests import KUEUE_API_VERSION, object_meta
from scheduler_adapters.records import check_name

PRIORITY_CLASS_API_VERSION = "scheduling.k8s.io/v1"
MAX_USER_PRIORITY = 1_000_000_000
"""The highest ``value`` of a PriorityClass not named ``system-...`` (API server validation)."""
PRIORITY_PREFIX = "portal-"


@dataclass(frozen=True)
class ClassPriority:
    """A workload class's scheduling priority: ``value`` (higher first, at most
    :data:`MAX_USER_PRIORITY`), ``preempts`` whether its pods may preempt lower ones
    (``preemptionPolicy: PreemptLowerPriority``, else ``Never``)."""

    slug: str
    value: int
    preempts: bool = True
    description: str = ""

    def __post_init__(self) -> None:
        check_name("workload class", self.slug)
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise ValueError(f"priority value must be a whole number, got {self.value!r}")
        if not -MAX_USER_PRIORITY <= self.value <= MAX_USER_PRIORITY:
            raise ValueError(
                f"priority value {self.value} is outside -{MAX_USER_PRIORITY}..{MAX_USER_PRIORITY}"
                " (higher values are reserved for system- classes)"
            )

    @property
    def name(self) -> str:
        return f"{PRIORITY_PREFIX}{self.slug}"

    @property
    def preemption_policy(self) -> str:
        return "PreemptLowerPriority" if self.preempts else "Never"


def priority_manifests(priorities: Sequence[ClassPriority], *, kueue: bool) -> list[dict[str, Any]]:
    """The PriorityClass of each class and, with ``kueue``, its WorkloadPriorityClass."""
    objects: list[dict[str, Any]] = []
    for priority in priorities:
        description = priority.description or f"gpu-pool-portal workload class {priority.slug}"
        objects.append(
            {
                "apiVersion": PRIORITY_CLASS_API_VERSION,
                "kind": "PriorityClass",
                "metadata": object_meta(priority.name),
                "value": priority.value,
                "globalDefault": False,
                "preemptionPolicy": priority.preemption_policy,
                "description": description,
            }
        )
        if kueue:
            objects.append(
                {
                    "apiVersion": KUEUE_API_VERSION,
                    "kind": "WorkloadPriorityClass",
                    "metadata": object_meta(priority.name),
                    "value": priority.value,
                    "description": description,
                }
            )
    return objects


def ensure_class_priorities(
    adapter: KubernetesAdapter, priorities: Sequence[ClassPriority], *, kueue: bool
) -> bool:
    """Write the classes' PriorityClass (and WorkloadPriorityClass) objects; ``True`` when
    something was written. A PriorityClass whose ``value`` or ``preemptionPolicy`` differs
    from the class's raises :class:`SchedulerRejected` before anything is written (the API
    server refuses the change; see the module docstring)."""
    operation = "ensure_class_priorities"
    names = [p.name for p in priorities]
    if len(set(names)) != len(names):
        raise ValueError(f"one priority per class: {sorted(names)}")
    objects = priority_manifests(priorities, kueue=kueue)
    frozen = []
    for priority in priorities:
        current = adapter.read_object(PRIORITY_CLASS_API_VERSION, "PriorityClass", priority.name)
        if current is None:
            continue
        held = (current.get("value"), current.get("preemptionPolicy", "PreemptLowerPriority"))
        if held != (priority.value, priority.preemption_policy):
            frozen.append(f"{priority.name} holds {held[0]}/{held[1]}")
    if frozen:
        raise SchedulerRejected(
            "PriorityClass value and preemptionPolicy cannot change in place (the API server "
            f"refuses it): {'; '.join(frozen)}; delete them to let the portal recreate them",
            operation=operation,
        )
    return adapter.ensure_objects(None, objects, operation=operation)
