"""The portal's ClusterRole (``deploy/kubernetes/base/rbac.yaml``, rendered in both overlays)
grants exactly what the Kubernetes adapter uses, no more: the verbs and resources are derived
from the requests the adapter sends to the fake API server while it does every operation it
has (never listed here by hand), and ``bind`` from the ClusterRole its RoleBindings name
(discovery, ``GET /apis``, needs no grant: ``system:discovery`` allows it to everyone). The
web and worker pods run as the ServiceAccount the ClusterRole is bound to."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes_support import fake_apiserver
from kustomize_lite import render

from scheduler_adapters.kubernetes import KubernetesAdapter
from scheduler_adapters.kubernetes_elastic import ElasticBounds, ElasticQuotaWriter, HpaSpec
from scheduler_adapters.kubernetes_fake import DEFAULT_NODES
from scheduler_adapters.kubernetes_priority import ClassPriority, ensure_class_priorities
from scheduler_adapters.kubernetes_taints import ensure_card_class_taints
from scheduler_adapters.kubernetes_transport import api_client_from_settings
from scheduler_adapters.types import KueueCohort

OVERLAYS = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "overlays"
A100 = "NVIDIA-A100-SXM4-80GB"
RTX = "NVIDIA-GeForce-RTX-4090"


def _every_adapter_operation(adapter: KubernetesAdapter) -> None:
    """Each public operation of the adapter and its elastic writer, creating and changing."""
    adapter.list_nodes()
    adapter.list_device_classes()
    adapter.ensure_team("nlp", group="oidc:nlp", gpu_quota={A100: 2, RTX: 1}, kueue=True)
    adapter.ensure_team(
        "nlp", group="oidc:nlp", gpu_quota={A100: 4}, cohort=KueueCohort("p", {A100: 2})
    )
    adapter.get_gpu_quota("nlp", kueue=True)
    adapter.set_gpu_quota("nlp", {A100: 3}, kueue=True)
    adapter.remove_team_quota("nlp", kueue=True)
    writer = ElasticQuotaWriter(adapter)
    for backend in ("resourcequota", "kueue", "volcano", "koordinator"):
        writer.set_elastic_quota(backend, ElasticBounds("nlp", A100, 1, 3, 2, cohort="p"))
        writer.set_elastic_quota(backend, ElasticBounds("nlp", A100, 1, 4, 2, cohort="p"))
    writer.set_lender("p", {A100: 2})
    writer.set_lender("p", {A100: 1})
    writer.apply_hpa("nlp", HpaSpec(deployment="vllm", floor_cards=1, ceiling_cards=3))
    writer.apply_hpa("nlp", HpaSpec(deployment="vllm", floor_cards=1, ceiling_cards=4))
    ensure_card_class_taints(adapter)
    ensure_class_priorities(adapter, [ClassPriority("production", 1000)], kueue=True)


def _needed() -> tuple[set[tuple[str, str, str]], set[str]]:
    """``(group, resource, verb)`` of every request, and the ClusterRoles bound to teams."""
    server = fake_apiserver().FakeApiServer(nodes=DEFAULT_NODES).start()
    adapter = KubernetesAdapter(
        api_client=api_client_from_settings(host=server.url, token=server.token),
        product_card_classes={A100: "datacentre", RTX: "consumer"},
    )
    try:
        _every_adapter_operation(adapter)
    finally:
        adapter.close()
        server.stop()
    needed: set[tuple[str, str, str]] = set()
    bound: set[str] = set()
    for request in server.requests:
        parts = [part for part in request.path.split("/") if part]
        if request.path.rstrip("/") in ("/api", "/apis"):
            continue  # discovery: every authenticated client may (ClusterRole system:discovery)
        group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
        if len(rest) >= 3 and rest[0] == "namespaces":
            rest = rest[2:]
        resource, named = rest[0], len(rest) > 1
        verb = {"GET": "get" if named else "list", "PATCH": "patch", "POST": "create"}[
            request.method
        ]
        needed.add((group, resource, verb))
        if request.method == "PATCH" and request.status == 201:
            needed.add((group, resource, "create"))  # an apply that creates needs create too
        body = request.body if isinstance(request.body, dict) else {}
        if body.get("kind") == "RoleBinding" and body["roleRef"]["kind"] == "ClusterRole":
            bound.add(body["roleRef"]["name"])
    return needed, bound


@pytest.fixture(scope="module")
def needed():
    return _needed()


@pytest.mark.parametrize("overlay", ["default", "production"])
def test_the_cluster_role_grants_exactly_what_the_adapter_uses(overlay, needed):
    objects = {(o["kind"], o["metadata"]["name"]): o for o in render(OVERLAYS / overlay)}
    role = objects[("ClusterRole", "gpu-pool-portal")]
    granted: set[tuple[str, str, str]] = set()
    binds: set[str] = set()
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    if verb == "bind" and resource == "clusterroles":
                        binds |= set(rule["resourceNames"])
                    else:
                        assert "resourceNames" not in rule  # team objects have run-time names
                        granted.add((group, resource, verb))
    uses, bound = needed

    assert granted == uses
    assert binds == bound == {"edit"}
    assert {resource for _, resource, _ in uses} == {
        "namespaces", "resourcequotas", "limitranges", "rolebindings", "nodes", "resourceslices",
        "deviceclasses", "horizontalpodautoscalers", "resourceflavors", "clusterqueues",
        "localqueues", "queues", "elasticquotas", "priorityclasses", "workloadpriorityclasses",
    }  # fmt: skip


@pytest.mark.parametrize("overlay", ["default", "production"])
def test_the_portal_pods_run_as_the_bound_service_account(overlay):
    objects = {(o["kind"], o["metadata"]["name"]): o for o in render(OVERLAYS / overlay)}
    account = objects[("ServiceAccount", "gpu-pool-portal")]
    binding = objects[("ClusterRoleBinding", "gpu-pool-portal")]

    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "gpu-pool-portal",
    }
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": "gpu-pool-portal",
            "namespace": account["metadata"]["namespace"],
        }
    ]
    for name in ("gpu-pool-portal-web", "gpu-pool-portal-worker"):
        pod = objects[("Deployment", name)]["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == "gpu-pool-portal"
