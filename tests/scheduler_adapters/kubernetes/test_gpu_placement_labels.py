"""Placement on Kubernetes: the pool's GPU-model node label in the objects the adapter writes
(ResourceFlavor nodeLabels, the PodNodeSelector namespace annotation), checked against
Kubernetes' strict OpenAPI schemas (kubernetes-validate) and the fake API server's Kueue
schemas."""

import kubernetes_validate
import pytest

from scheduler_adapters.kubernetes import KubernetesAdapter
from scheduler_adapters.kubernetes_manifests import (
    ANNOTATION_NODE_SELECTOR,
    GPU_TYPE_LABEL,
    check_gpu_label,
    quota_manifests,
    team_manifests,
)
from scheduler_adapters.registry import build_scheduler_adapter

A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"
NEWEST = ".".join(kubernetes_validate.latest_version().split(".")[:2])


def test_flavors_select_nodes_by_the_configured_label(k8s_fake):
    objects = quota_manifests("nlp", "team-nlp", {A100: 8}, kueue=True, gpu_label=GPU_TYPE_LABEL)
    flavor = next(obj for obj in objects if obj["kind"] == "ResourceFlavor")
    assert flavor["spec"]["nodeLabels"] == {GPU_TYPE_LABEL: A100}
    k8s_fake.validate_object(flavor, NEWEST)  # Kueue v1beta2 schema and server-side rules
    default = quota_manifests("nlp", "team-nlp", {A100: 8}, kueue=True)
    assert next(o for o in default if o["kind"] == "ResourceFlavor")["spec"]["nodeLabels"] == {
        "nvidia.com/gpu.product": A100
    }


def test_namespace_node_selector_only_for_a_one_product_team():
    def namespace(quota):
        objects = team_manifests(
            "nlp",
            "team-nlp",
            group="oidc:nlp",
            gpu_quota=quota,
            kueue=False,
            gpu_label=GPU_TYPE_LABEL,
            namespace_node_selector=True,
        )
        return objects[0]

    one = namespace({A100: 8, H100: 0})  # a product at 0 cards holds no nodes
    assert one["metadata"]["annotations"] == {ANNOTATION_NODE_SELECTOR: f"gpu-type={A100}"}
    assert kubernetes_validate.validate(one, NEWEST, strict=True) == NEWEST
    # PodNodeSelector ANDs its terms, so two products cannot be said this way: nothing is set
    assert "annotations" not in namespace({A100: 8, H100: 2})["metadata"]
    off = team_manifests("nlp", "team-nlp", group="g", gpu_quota={A100: 8}, kueue=False)
    assert "annotations" not in off[0]["metadata"]  # off by default: existing namespaces unchanged


@pytest.mark.parametrize("label", ["", "gpu type", "-x", "a/b/c", "Bad_Prefix/gpu", "x" * 64])
def test_bad_labels_are_refused(label):
    with pytest.raises(ValueError):
        check_gpu_label(label)
    with pytest.raises(ValueError):
        KubernetesAdapter(dry_run=True, gpu_label=label)


def test_settings_carry_the_label_and_the_selector_switch():
    adapter = build_scheduler_adapter(
        {
            "BACKEND": "kubernetes",
            "DRY_RUN": True,
            "GPU_LABEL": GPU_TYPE_LABEL,
            "NAMESPACE_NODE_SELECTOR": True,
        }
    )
    assert (adapter.gpu_label, adapter.namespace_node_selector) == (GPU_TYPE_LABEL, True)
    adapter.ensure_team("nlp", group="oidc:nlp", gpu_quota={A100: 4})
    assert f"{ANNOTATION_NODE_SELECTOR}: gpu-type={A100}" in adapter.manifests[-1]
