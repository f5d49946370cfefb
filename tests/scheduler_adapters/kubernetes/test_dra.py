"""GPUs published through DRA (issue #28 item 5): ResourceSlices of NVIDIA's DRA driver
(``tests/fixtures/kubernetes/dra_resourceslices.json``, written from the driver's source, see
its ``_source``) read through the adapter's node import, over HTTP against the fake API server,
which validates them against Kubernetes' own schema."""

import json
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from scheduler_adapters.kubernetes_dra import (
    device_classes,
    dra_cards,
    gfd_label,
    product_names,
    product_selector,
    selects,
)

FIXTURE = (
    Path(__file__).resolve().parents[2] / "fixtures" / "kubernetes" / "dra_resourceslices.json"
)
SLICES = json.loads(FIXTURE.read_text())["items"]
A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize("version", ["1.34", "1.35", "1.36"])
def test_the_recorded_slices_are_valid_resource_k8s_io_v1(version):
    for item in SLICES:
        kubernetes_validate.validate(item, version, strict=True)


def test_a_card_is_counted_once_from_the_newest_generation_of_its_pool():
    """gpu-a100-01: generation 1 had gpu-4 (gone), generation 2 has gpu-0..gpu-3 over two
    slices with gpu-2 in both, plus a MIG device (type mig, not a card): 4 cards. 80Gi of
    memory = 80 x 1024 = 81920 MiB. The other driver's device never counts."""
    cards, drivers = dra_cards(SLICES)

    a100 = cards["gpu-a100-01"]
    assert [(g.index, g.uuid) for g in a100] == [
        (i, f"GPU-a100000{i}-0000-4000-8000-00000000000{i}") for i in range(4)
    ]
    assert {(g.model_name, g.memory_total_mib) for g in a100} == {(A100, 81920)}
    assert a100[0].pci_bus_id == "0000:07:00.0"
    assert drivers == {"gpu-a100-01": "550.54.15", "dra-h100-01": "550.54.15"}


def test_the_node_import_takes_the_dra_cards(k8s_fake, apiserver, make_adapter):
    """gpu-a100-01 also advertises 4 nvidia.com/gpu through the device plugin: still 4 cards
    (the DRA ones, with UUIDs), not 8. dra-h100-01 advertises nothing but DRA: 2 H100, memory
    85520809984 B / 1048576 = 81559 MiB. gpu-4090-01 has no DRA devices: as before."""
    apiserver.put_object(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "dra-h100-01",
                "labels": {"kubernetes.io/hostname": "dra-h100-01"},
            },
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        },
        manager="kubelet",
    )
    for item in SLICES:
        apiserver.put_object(item, manager="gpu.nvidia.com")

    result = make_adapter().list_nodes()

    nodes = {node.hostname: node for node in result.nodes}
    assert [(g.model_name, g.uuid is not None) for g in nodes["gpu-a100-01"].gpus] == [
        (A100, True)
    ] * 4
    assert [(g.model_name, g.memory_total_mib) for g in nodes["dra-h100-01"].gpus] == [
        (H100, 81559),
        (H100, 81559),
    ]
    assert nodes["dra-h100-01"].driver_version == "550.54.15"
    assert [g.model_name for g in nodes["gpu-4090-01"].gpus] == ["NVIDIA-GeForce-RTX-4090"] * 2
    assert result.issues == ()


def test_a_count_the_device_plugin_disagrees_with_is_said(k8s_fake, apiserver, make_adapter):
    """Only generation 2's first slice (gpu-0..gpu-2): DRA says 3, the device plugin 4."""
    partial = {
        **SLICES[1],
        "spec": {
            **SLICES[1]["spec"],
            "pool": {**SLICES[1]["spec"]["pool"], "resourceSliceCount": 1},
        },
    }
    apiserver.put_object(partial, manager="gpu.nvidia.com")

    result = make_adapter().list_nodes()

    assert len({n.hostname: n for n in result.nodes}["gpu-a100-01"].gpus) == 3
    assert [str(issue) for issue in result.issues] == [
        "node gpu-a100-01: the device plugin counts 4 nvidia.com/gpu, the DRA driver publishes "
        "3 GPUs; the DRA devices are used"
    ]


def test_a_cluster_without_resource_k8s_io_v1_is_read_from_nodes_only(
    k8s_fake, make_adapter, apiserver
):
    """Before 1.34 (or with DRA off) discovery lists no resource.k8s.io/v1: no slice list."""
    for plural in ("resourceslices", "deviceclasses"):
        del apiserver.resources[("resource.k8s.io", "v1", plural)]

    result = make_adapter().list_nodes()

    assert len(result.nodes) == 2
    assert not any("resourceslices" in r.path for r in apiserver.requests)


def test_the_team_quota_caps_the_dra_device_class_too(apiserver, make_adapter):
    """With DRA_DEVICE_CLASS gpu.nvidia.com the ResourceQuota holds 2 + 1 = 3 on
    requests.nvidia.com/gpu and on gpu.nvidia.com.deviceclass.resource.k8s.io/devices (a
    claim is not a nvidia.com/gpu request, so without it DRA claims go uncapped); an elastic
    write renders the quota the same way, so neither undoes the other."""
    from scheduler_adapters.kubernetes_elastic import ElasticBounds, ElasticQuotaWriter

    adapter = make_adapter(dra_device_class="gpu.nvidia.com")
    label = "NVIDIA-A100-SXM4-80GB"  # quotas are keyed by the GFD product label
    adapter.ensure_team("nlp", group="oidc:nlp", gpu_quota={label: 2, "NVIDIA-L40S": 1})

    hard = apiserver.get("", "resourcequotas", "team-nlp", "gpu-quota")["spec"]["hard"]
    assert hard == {
        "requests.nvidia.com/gpu": "3",
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "3",
    }
    bounds = ElasticBounds("nlp", label, floor_cards=1, ceiling_cards=3, cards=2)
    ElasticQuotaWriter(adapter).set_elastic_quota("volcano", bounds)
    hard = apiserver.get("", "resourcequotas", "team-nlp", "gpu-quota")["spec"]["hard"]
    assert hard == {
        "requests.nvidia.com/gpu": "3",
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "3",
    }


def test_a_device_class_that_is_no_name_is_refused_at_once(make_adapter):
    with pytest.raises(ValueError, match="is not a DNS subdomain"):
        make_adapter(dra_device_class="GPU_class")


CLASSES_FIXTURE = FIXTURE.with_name("dra_deviceclasses.json")
CLASSES = json.loads(CLASSES_FIXTURE.read_text())["items"]
NVIDIA_CLASS_CEL = (
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
)


@pytest.mark.parametrize("version", ["1.34", "1.35", "1.36"])
def test_the_recorded_device_classes_are_valid_resource_k8s_io_v1(version):
    for item in CLASSES:
        kubernetes_validate.validate(item, version, strict=True)


def test_the_device_classes_are_listed_with_the_models_they_select(apiserver, make_adapter):
    """The chart's gpu.nvidia.com (one selector) and an admin's A100 class (two), sorted by
    name ("a100-..." < "gpu..."), read over HTTP with one list of deviceclasses. The slices
    publish A100s on gpu-a100-01 and H100s on dra-h100-01 (plus a MIG device, type mig, and
    another driver's type-gpu device, neither selected by `device.driver == 'gpu.nvidia.com'
    && type == 'gpu'`): gpu.nvidia.com selects both models, the A100 class only the A100,
    reported by GFD label."""
    for item in [*CLASSES, *SLICES]:
        apiserver.put_object(item, manager="helm")

    classes = make_adapter().list_device_classes()

    assert [(c.name, c.selectors, c.extended_resource_name, c.products) for c in classes] == [
        (
            "a100-80gb.example.com",
            (NVIDIA_CLASS_CEL, 'device.attributes["gpu.nvidia.com"].productName == "' + A100 + '"'),
            None,
            ("NVIDIA-A100-SXM4-80GB",),
        ),
        (
            "gpu.nvidia.com",
            (NVIDIA_CLASS_CEL,),
            None,
            ("NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"),
        ),
    ]
    assert [r.path for r in apiserver.requests if "deviceclasses" in r.path] == [
        "/apis/resource.k8s.io/v1/deviceclasses"
    ]


def test_a_selector_that_cannot_be_evaluated_here_leaves_the_models_unknown():
    """semver() is a Kubernetes CEL library function cel-python does not have: the class's
    models are None (unknown), never a guess; a selector naming an attribute the cards lack
    is an error in Kubernetes too: unknown."""
    newer = "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('550.0.0')) >= 0"
    for expression in (newer, "device.attributes['gpu.nvidia.com'].noSuchAttribute == 'x'"):
        item = {
            "metadata": {"name": "c"},
            "spec": {"selectors": [{"cel": {"expression": expression}}]},
        }

        assert [c.products for c in device_classes([item], SLICES)] == [None]


def test_device_classes_are_unknown_where_dra_is_not_served(apiserver, make_adapter):
    """No resource.k8s.io/v1 in discovery: None (unknown), not an empty list, and no request."""
    for plural in ("resourceslices", "deviceclasses"):
        del apiserver.resources[("resource.k8s.io", "v1", plural)]

    assert make_adapter().list_device_classes() is None
    assert not any("deviceclasses" in r.path for r in apiserver.requests)


def _commented_documents(text: str) -> list[dict]:
    """The YAML documents inside the dry-run file's leading comment, each between ``---`` and
    ``...`` (YAML's document markers)."""
    header = "\n".join(line[2:] for line in text.splitlines() if line.startswith("# "))
    return [yaml.safe_load(piece.partition("\n...")[0]) for piece in header.split("\n---\n")[1:]]


@pytest.mark.parametrize("version", ["1.34", "1.35", "1.36"])
def test_the_dry_run_gives_each_model_its_claim_template(apiserver, make_adapter, version):
    """DRA_DEVICE_CLASS gpu.nvidia.com, quota keyed by GFD labels A100 2 and H100 1 (both
    published through DRA by the recorded slices) and L40S 1 (no DRA card): one
    ResourceClaimTemplate per published model, in the team namespace, selecting NVML's
    spelling (GFD's NVIDIA-H100-80GB-HBM3 is NVML's "NVIDIA H100 80GB HBM3"), valid
    resource.k8s.io/v1; the L40S is said to have no selector. The selector rendered for the
    A100 selects exactly the 4 A100 cards of the slices and no H100."""
    for item in SLICES:
        apiserver.put_object(item, manager="gpu.nvidia.com")
    adapter = make_adapter(dra_device_class="gpu.nvidia.com", dry_run=True)

    adapter.ensure_team(
        "nlp",
        group="oidc:nlp",
        gpu_quota={"NVIDIA-A100-SXM4-80GB": 2, "NVIDIA-H100-80GB-HBM3": 1, "NVIDIA-L40S": 1},
    )

    text = adapter.manifests[-1]
    templates = _commented_documents(text)
    for template in templates:
        kubernetes_validate.validate(template, version, strict=True)
    requests = {
        t["metadata"]["name"]: t["spec"]["spec"]["devices"]["requests"][0] for t in templates
    }
    assert {t["metadata"]["namespace"] for t in templates} == {"team-nlp"}
    assert {
        name: r["exactly"]["selectors"][0]["cel"]["expression"] for name, r in requests.items()
    } == {
        "nvidia-a100-sxm4-80gb": f'device.attributes["gpu.nvidia.com"].productName == "{A100}"',
        "nvidia-h100-80gb-hbm3": f'device.attributes["gpu.nvidia.com"].productName == "{H100}"',
    }
    assert {r["exactly"]["deviceClassName"] for r in requests.values()} == {"gpu.nvidia.com"}
    assert "# NVIDIA-L40S: no DRA card of this model is published, no selector" in text
    a100 = requests["nvidia-a100-sxm4-80gb"]["exactly"]["selectors"][0]["cel"]["expression"]
    chosen = [
        device["name"]
        for item in SLICES[1:3]
        for device in item["spec"]["devices"]
        if selects([NVIDIA_CLASS_CEL, a100], item["spec"]["driver"], device)
    ]
    assert sorted(set(chosen)) == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert not any(
        selects([a100], "gpu.nvidia.com", device)
        for item in SLICES
        if item["spec"]["nodeName"] == "dra-h100-01"
        for device in item["spec"]["devices"]
    )


def test_gfd_label_and_nvml_name_meet_in_one_place():
    """GFD's label is NVML's name with spaces as hyphens; a quote in a name is escaped in the
    CEL string literal."""
    assert gfd_label("NVIDIA A100-SXM4-80GB") == "NVIDIA-A100-SXM4-80GB"
    assert gfd_label("NVIDIA-A100-SXM4-80GB") == "NVIDIA-A100-SXM4-80GB"
    assert product_names(SLICES) == {"NVIDIA-A100-SXM4-80GB": A100, "NVIDIA-H100-80GB-HBM3": H100}
    assert product_selector('A "B"') == (
        'device.attributes["gpu.nvidia.com"].productName == "A \\"B\\""'
    )


def test_with_kueue_the_cluster_queue_covers_the_mapped_device_class(apiserver, make_adapter):
    """Kueue on, DRA_DEVICE_CLASS gpu.nvidia.com, A100 quota 4 of which 2 borrowed in cohort
    p: the ClusterQueue covers nvidia.com/gpu and gpu.nvidia.com.deviceclass.resource.k8s.io/
    devices (the name Kueue's deviceClassMappings charges the class's claims to), each with
    nominalQuota 4 - 2 = 2, borrowingLimit 2, lendingLimit 0, in coveredResources' order."""
    from scheduler_adapters.types import KueueCohort

    dra = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
    adapter = make_adapter(dra_device_class="gpu.nvidia.com", kueue=True)
    label = "NVIDIA-A100-SXM4-80GB"

    adapter.ensure_team(
        "nlp", group="oidc:nlp", gpu_quota={label: 4}, cohort=KueueCohort("p", {label: 2})
    )

    group = apiserver.get("kueue.x-k8s.io", "clusterqueues", None, "team-nlp")["spec"][
        "resourceGroups"
    ]
    limits = {"nominalQuota": "2", "borrowingLimit": "2", "lendingLimit": "0"}
    assert group == [
        {
            "coveredResources": ["nvidia.com/gpu", dra],
            "flavors": [
                {
                    "name": "nvidia-a100-sxm4-80gb",
                    "resources": [{"name": "nvidia.com/gpu", **limits}, {"name": dra, **limits}],
                }
            ],
        }
    ]


def test_the_dry_run_gives_kueue_its_device_class_mapping(make_adapter):
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2) resources.deviceClassMappings:
    name = the ClusterQueue's DRA resource, deviceClassNames = [the class]; shown only where
    Kueue is on."""
    adapter = make_adapter(dra_device_class="gpu.nvidia.com", kueue=True, dry_run=True)
    adapter.ensure_team("nlp", group="oidc:nlp", gpu_quota={"NVIDIA-L40S": 1})

    assert _commented_documents(adapter.manifests[-1]) == [
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "resources": {
                "deviceClassMappings": [
                    {
                        "name": "gpu.nvidia.com.deviceclass.resource.k8s.io/devices",
                        "deviceClassNames": ["gpu.nvidia.com"],
                    }
                ]
            },
        }
    ]
    adapter.ensure_team("nlp", group="oidc:nlp", gpu_quota={"NVIDIA-L40S": 1}, kueue=False)
    assert _commented_documents(adapter.manifests[-1]) == []


def test_a_dry_run_without_a_connection_gives_no_selector():
    """No cluster to read NVML's spelling from: no template, each model said to have none."""
    from scheduler_adapters.kubernetes import KubernetesAdapter

    text = KubernetesAdapter(dry_run=True, dra_device_class="gpu.nvidia.com").render_manifests(
        "nlp", group="oidc:nlp", gpu_quota={"NVIDIA-A100-SXM4-80GB": 1}
    )

    assert _commented_documents(text) == []
    assert "# NVIDIA-A100-SXM4-80GB: no DRA card of this model is published, no selector" in text
