"""Card-class taints and tolerations (issue #36 item 2) on the HTTP fake API server, which merges
a Node's ``spec.taints`` as the real one does: an associative list keyed by (key, effect), each
entry owned by the field manager that set it, and refuses the taints a real server refuses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler_adapters.errors import NotFound, SchedulerRejected
from scheduler_adapters.kubernetes import KubernetesAdapter
from scheduler_adapters.kubernetes_fake import gpu_node
from scheduler_adapters.kubernetes_manifests import flavor_name
from scheduler_adapters.kubernetes_ownership import object_paths, stale_paths
from scheduler_adapters.kubernetes_taints import (
    ANNOTATION_DEFAULT_TOLERATIONS,
    ANNOTATION_TOLERATIONS_WHITELIST,
    ensure_card_class_taints,
    node_taint_manifest,
)
from scheduler_adapters.kubernetes_transport import api_client_from_settings

A100 = "NVIDIA-A100-SXM4-80GB"
RTX4090 = "NVIDIA-GeForce-RTX-4090"
CLASSES = {A100: "datacentre", RTX4090: "consumer"}
KEY = "gpu-pool-portal/card-class"
PORTAL_ENTRY = 'k:{"effect":"NoSchedule","key":"gpu-pool-portal/card-class"}'
# the kubelet's own taint of a cordoned node (kubectl cordon sets spec.unschedulable; the
# node lifecycle controller adds this taint)
CORDONED = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
CONSUMER = {"key": KEY, "value": "consumer", "effect": "NoSchedule"}
DATACENTRE = {"key": KEY, "value": "datacentre", "effect": "NoSchedule"}
CONSUMER_TOLERATION = {"key": KEY, "operator": "Equal", "value": "consumer", "effect": "NoSchedule"}
DATACENTRE_TOLERATION = {
    "key": KEY,
    "operator": "Equal",
    "value": "datacentre",
    "effect": "NoSchedule",
}


def _nodes() -> list[dict[str, Any]]:
    cordoned = gpu_node("gpu-4090-01", RTX4090, 2, memory_mib=24564)
    cordoned["spec"] = {"taints": [dict(CORDONED)]}
    return [gpu_node("gpu-a100-01", A100, 4, memory_mib=81920), cordoned]


@pytest.fixture
def server(k8s_fake) -> Iterator[Any]:
    """The fake with an A100 node and a 4090 node carrying the kubelet's taint."""
    running = k8s_fake.FakeApiServer(nodes=_nodes()).start()
    yield running
    running.stop()


@pytest.fixture
def adapter(server) -> Iterator[KubernetesAdapter]:
    made = KubernetesAdapter(
        api_client=api_client_from_settings(host=server.url, token=server.token),
        timeout_s=30.0,
        connect_timeout_s=10.0,
        product_card_classes=CLASSES,
    )
    yield made
    made.close()


def _node(server, name: str) -> dict[str, Any]:
    return server.get("", "nodes", None, name)


def _owned(node: dict[str, Any], manager: str) -> dict[str, Any]:
    entries = [e for e in node["metadata"]["managedFields"] if e["manager"] == manager]
    assert len(entries) == 1, entries
    return entries[0]["fieldsV1"]


def test_apply_adds_the_portals_taint_beside_the_kubelets_and_owns_only_its_entry(server, adapter):
    done = ensure_card_class_taints(adapter)

    assert done.nodes == {"gpu-4090-01": "consumer", "gpu-a100-01": "datacentre"}
    assert done.repaired == {"gpu-4090-01": "none", "gpu-a100-01": "none"}

    node = _node(server, "gpu-4090-01")
    # the kubelet's entry stays first, the portal's is merged in after it (not replaced whole)
    assert node["spec"]["taints"] == [CORDONED, CONSUMER]
    assert _node(server, "gpu-a100-01")["spec"]["taints"] == [DATACENTRE]
    assert _owned(node, "gpu-pool-portal") == {
        "f:spec": {
            "f:taints": {PORTAL_ENTRY: {".": {}, "f:effect": {}, "f:key": {}, "f:value": {}}}
        }
    }
    kubelet_taints = _owned(node, "kubelet")["f:spec"]["f:taints"]
    assert list(kubelet_taints) == [
        'k:{"effect":"NoSchedule","key":"node.kubernetes.io/unschedulable"}'
    ]

    writes = len(server.writes())
    assert ensure_card_class_taints(adapter).repaired == {}
    assert len(server.writes()) == writes  # read back, nothing differs: no write


def test_the_portals_taint_removed_by_hand_is_drift_and_repaired_others_left_alone(server, adapter):
    ensure_card_class_taints(adapter)

    def hand_edit(node: dict[str, Any]) -> None:  # kubectl taint node gpu-4090-01 <portal's>-
        node["spec"]["taints"] = [
            CORDONED,
            {"key": "dedicated", "value": "ml", "effect": "NoExecute"},
        ]

    server.edit("", "nodes", None, "gpu-4090-01", hand_edit, manager="kubectl-taint")
    writes = len(server.writes())

    assert ensure_card_class_taints(adapter).repaired == {"gpu-4090-01": "none"}

    assert len(server.writes()) == writes + 1  # one apply, on the drifted node only
    assert _node(server, "gpu-4090-01")["spec"]["taints"] == [
        CORDONED,
        {"key": "dedicated", "value": "ml", "effect": "NoExecute"},
        CONSUMER,
    ]


def test_a_card_class_taint_set_by_an_operator_first_is_reported_not_overwritten(server, adapter):
    """An operator tainted the 4090 node datacentre by hand before the portal ever wrote it:
    the same (key, effect) entry with another value is a conflict; the portal never made the
    node, so it reports it and writes nothing."""

    def hand_taint(node: dict[str, Any]) -> None:
        node["spec"]["taints"].append(dict(DATACENTRE))

    server.edit("", "nodes", None, "gpu-4090-01", hand_taint, manager="kubectl-taint")

    with pytest.raises(SchedulerRejected) as rejected:
        ensure_card_class_taints(adapter, nodes={"gpu-4090-01": "consumer"})

    assert (
        '.spec.taints[effect="NoSchedule",key="gpu-pool-portal/card-class"].value '
        "(owned by kubectl-taint)" in rejected.value.message
    )
    assert _node(server, "gpu-4090-01")["spec"]["taints"] == [CORDONED, DATACENTRE]


def test_a_bad_effect_is_refused_by_the_server_and_reported(server, adapter, monkeypatch):
    import scheduler_adapters.kubernetes_taints as taints

    monkeypatch.setattr(taints, "CARD_CLASS_TAINT_EFFECT", "NoScheduel")
    before = _node(server, "gpu-4090-01")

    with pytest.raises(SchedulerRejected) as rejected:
        ensure_card_class_taints(adapter, nodes={"gpu-4090-01": "consumer"})

    # the merged list is [kubelet's, portal's]: the portal's entry is index 1
    assert rejected.value.http_status == 422
    assert (
        'spec.taints[1].effect: Unsupported value: "NoScheduel": supported values: '
        '"NoSchedule", "PreferNoSchedule", "NoExecute"'
    ) in rejected.value.message
    assert _node(server, "gpu-4090-01") == before  # nothing written


def test_the_fake_refuses_what_the_api_server_refuses_in_taints(k8s_fake):
    def node(*taints: dict[str, str]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "spec": {"taints": list(taints)},
        }

    k8s_fake.validate_object(node(CORDONED, CONSUMER))  # fine

    with pytest.raises(k8s_fake.ApiError) as bad_key:
        k8s_fake.validate_object(node({"key": "card class", "effect": "NoSchedule"}))
    assert bad_key.value.code == 422
    assert bad_key.value.details["causes"][0]["field"] == "spec.taints[0].key"

    with pytest.raises(k8s_fake.ApiError) as bad_value:
        k8s_fake.validate_object(node({"key": KEY, "value": "-consumer", "effect": "NoSchedule"}))
    assert bad_value.value.details["causes"][0]["field"] == "spec.taints[0].value"

    with pytest.raises(k8s_fake.ApiError) as duplicate:
        k8s_fake.validate_object(node(CONSUMER, DATACENTRE))  # same (key, effect) twice
    cause = duplicate.value.details["causes"][0]
    assert (cause["reason"], cause["field"]) == ("FieldValueDuplicate", "spec.taints[1]")
    assert "taints must be unique by key and effect pair" in cause["message"]

    # the same key with another effect is another entry
    k8s_fake.validate_object(
        node(CONSUMER, {"key": KEY, "value": "consumer", "effect": "NoExecute"})
    )


def test_an_apply_with_two_entries_of_one_key_is_refused_before_typing(server, adapter):
    body = node_taint_manifest("gpu-4090-01", "consumer")
    body["spec"]["taints"].append(dict(DATACENTRE))

    with pytest.raises(SchedulerRejected) as rejected:
        adapter.ensure_objects(None, [body], operation="test")

    assert (
        '.spec.taints: duplicate entries for key [effect="NoSchedule",'
        'key="gpu-pool-portal/card-class"]' in rejected.value.message
    )
    assert _node(server, "gpu-4090-01")["spec"]["taints"] == [CORDONED]


def test_a_missing_node_is_not_created(server, adapter):
    with pytest.raises(NotFound):
        ensure_card_class_taints(adapter, nodes={"gpu-a100-01": "datacentre", "gone": "consumer"})
    assert server.writes() == []  # checked before the first write
    assert server.get("", "nodes", None, "gone") is None


def test_a_team_whose_class_may_not_use_consumer_cards_gets_no_consumer_toleration(server, adapter):
    """Without Kueue the namespace carries PodTolerationRestriction's annotations: a team of
    production work (datacentre only) tolerates only the datacentre taint; a batch team
    (consumer and datacentre) both, sorted by class."""
    adapter.ensure_team(
        "nlp", group="team-nlp", gpu_quota={A100: 2}, kueue=False, card_classes=["datacentre"]
    )
    adapter.ensure_team(
        "cv",
        group="team-cv",
        gpu_quota={A100: 1, RTX4090: 2},
        kueue=False,
        card_classes=["datacentre", "consumer"],
    )

    nlp = server.get("", "namespaces", None, "team-nlp")["metadata"]["annotations"]
    assert json.loads(nlp[ANNOTATION_DEFAULT_TOLERATIONS]) == [DATACENTRE_TOLERATION]
    assert json.loads(nlp[ANNOTATION_TOLERATIONS_WHITELIST]) == [DATACENTRE_TOLERATION]
    cv = server.get("", "namespaces", None, "team-cv")["metadata"]["annotations"]
    assert json.loads(cv[ANNOTATION_DEFAULT_TOLERATIONS]) == [
        CONSUMER_TOLERATION,
        DATACENTRE_TOLERATION,
    ]

    # the team's classes narrow: the consumer toleration goes, in the same apply
    adapter.ensure_team(
        "cv", group="team-cv", gpu_quota={A100: 1}, kueue=False, card_classes=["datacentre"]
    )
    cv = server.get("", "namespaces", None, "team-cv")["metadata"]["annotations"]
    assert json.loads(cv[ANNOTATION_TOLERATIONS_WHITELIST]) == [DATACENTRE_TOLERATION]


def test_with_kueue_each_flavor_tolerates_its_products_class(server, adapter):
    """Kueue adds a flavor's tolerations to the pods it admits there; the production team's
    ClusterQueue names only the A100 flavor, so it is never given the consumer toleration."""
    adapter.ensure_team("nlp", group="team-nlp", gpu_quota={A100: 2}, kueue=True)
    adapter.ensure_team("cv", group="team-cv", gpu_quota={RTX4090: 2}, kueue=True)

    a100 = server.get("kueue.x-k8s.io", "resourceflavors", None, flavor_name(A100))
    assert a100["spec"] == {
        "nodeLabels": {"nvidia.com/gpu.product": A100},
        "tolerations": [DATACENTRE_TOLERATION],
    }
    rtx = server.get("kueue.x-k8s.io", "resourceflavors", None, flavor_name(RTX4090))
    assert rtx["spec"]["tolerations"] == [CONSUMER_TOLERATION]
    queue = server.get("kueue.x-k8s.io", "clusterqueues", None, "team-nlp")
    flavors = [f["name"] for g in queue["spec"]["resourceGroups"] for f in g["flavors"]]
    assert flavors == [flavor_name(A100)]
    namespace = server.get("", "namespaces", None, "team-nlp")["metadata"]
    assert ANNOTATION_DEFAULT_TOLERATIONS not in (namespace.get("annotations") or {})


def test_ownership_paths_step_into_taint_entries():
    """Paths are per entry and field, so an entry the portal set and no longer wants is stale
    while another manager's entry is none of its business."""
    desired = node_taint_manifest("n1", "consumer")
    entry = ("spec", "taints", PORTAL_ENTRY)
    assert object_paths(desired) == {(*entry, "effect"), (*entry, "key"), (*entry, "value")}

    old = 'k:{"effect":"NoExecute","key":"gpu-pool-portal/card-class"}'
    current = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "n1",
            "managedFields": [
                {
                    "manager": "gpu-pool-portal",
                    "operation": "Apply",
                    "fieldsV1": {
                        "f:spec": {
                            "f:taints": {old: {".": {}, "f:effect": {}, "f:key": {}, "f:value": {}}}
                        }
                    },
                }
            ],
        },
        "spec": {"taints": [CORDONED, {"key": KEY, "value": "consumer", "effect": "NoExecute"}]},
    }
    assert stale_paths(current, desired) == {
        ("spec", "taints", old, "effect"),
        ("spec", "taints", old, "key"),
        ("spec", "taints", old, "value"),
    }
