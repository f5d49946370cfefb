"""Workload classes as PriorityClass / Kueue WorkloadPriorityClass on the HTTP fake API server
(issue #36), which refuses what a real API server refuses."""

from __future__ import annotations

import pytest

from scheduler_adapters.errors import SchedulerRejected
from scheduler_adapters.kubernetes_priority import (
    ClassPriority,
    ensure_class_priorities,
    priority_manifests,
)

CLASSES = [
    ClassPriority("production", 1000),
    ClassPriority("batch", 100, preempts=False),
]


def test_priority_classes_written_read_back_and_idempotent(make_adapter, apiserver):
    adapter = make_adapter()
    assert ensure_class_priorities(adapter, CLASSES, kueue=True) is True
    writes = len(apiserver.writes())
    assert ensure_class_priorities(adapter, CLASSES, kueue=True) is False
    assert len(apiserver.writes()) == writes  # a repeat costs reads only

    prod = apiserver.get("scheduling.k8s.io", "priorityclasses", None, "portal-production")
    assert (prod["value"], prod["preemptionPolicy"], prod["globalDefault"]) == (
        1000,
        "PreemptLowerPriority",
        False,
    )
    batch = apiserver.get("scheduling.k8s.io", "priorityclasses", None, "portal-batch")
    assert (batch["value"], batch["preemptionPolicy"]) == (100, "Never")
    wpc = apiserver.get("kueue.x-k8s.io", "workloadpriorityclasses", None, "portal-production")
    assert wpc["value"] == 1000
    assert (
        adapter.read_object("scheduling.k8s.io/v1", "PriorityClass", "portal-batch")["value"] == 100
    )


def test_without_kueue_only_priority_classes():
    kinds = [o["kind"] for o in priority_manifests(CLASSES, kueue=False)]
    assert kinds == ["PriorityClass", "PriorityClass"]


def test_a_changed_value_is_refused_before_anything_is_written(make_adapter, apiserver):
    adapter = make_adapter()
    ensure_class_priorities(adapter, CLASSES, kueue=True)
    writes = len(apiserver.writes())
    changed = [ClassPriority("production", 2000), ClassPriority("batch", 100, preempts=False)]

    with pytest.raises(
        SchedulerRejected, match="portal-production holds 1000/PreemptLowerPriority"
    ):
        ensure_class_priorities(adapter, changed, kueue=True)
    assert len(apiserver.writes()) == writes  # nothing half-applied
    wpc = apiserver.get("kueue.x-k8s.io", "workloadpriorityclasses", None, "portal-production")
    assert wpc["value"] == 1000


def test_the_fake_apiserver_refuses_what_a_real_one_refuses(make_adapter, apiserver):
    """Bypassing the portal's own check: the server itself answers 422 (value immutable, a
    user value above one billion, a system- name)."""
    adapter = make_adapter()
    ensure_class_priorities(adapter, CLASSES, kueue=False)
    (changed,) = priority_manifests([ClassPriority("production", 5)], kueue=False)
    with pytest.raises(SchedulerRejected, match="may not be changed in an update"):
        adapter.ensure_objects(None, [changed], operation="test")
    (too_high,) = priority_manifests([ClassPriority("urgent", 10)], kueue=False)
    too_high["value"] = 1_000_000_001
    with pytest.raises(SchedulerRejected, match="maximum allowed value"):
        adapter.ensure_objects(None, [too_high], operation="test")
    (system,) = priority_manifests([ClassPriority("x", 10)], kueue=False)
    system["metadata"]["name"] = "system-portal"
    with pytest.raises(SchedulerRejected, match="reserved for system use"):
        adapter.ensure_objects(None, [system], operation="test")


def test_class_priority_refuses_values_kubernetes_reserves():
    with pytest.raises(ValueError, match="reserved for system"):
        ClassPriority("production", 1_000_000_001)
    with pytest.raises(ValueError):
        ClassPriority("Production!", 1)
