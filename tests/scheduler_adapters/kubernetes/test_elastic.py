"""Elastic quota backends and the team's HPA: rendered objects (validated against Kubernetes'
schemas and the transcribed CRD schemas), and writes through the HTTP fake and the memory fake."""

from __future__ import annotations

import copy
import json

import jsonschema
import kubernetes_validate
import pytest

from scheduler_adapters.crd_schemas import validate_crd_object
from scheduler_adapters.errors import SchedulerRejected
from scheduler_adapters.kubernetes_elastic import (
    ANNOTATION_ELASTIC,
    ElasticBounds,
    ElasticQuotaWriter,
    HpaSpec,
    QuotaBackend,
    elastic_manifests,
    hpa_manifest,
    kueue_lender_manifests,
)
from scheduler_adapters.kubernetes_fake import FakeKubernetes

A100 = "NVIDIA-A100-SXM4-80GB"
NS = "team-nlp"
NEWEST = ".".join(kubernetes_validate.latest_version().split(".")[:2])
BOUNDS = ElasticBounds(
    team="nlp", product=A100, floor_cards=2, ceiling_cards=6, cards=4, cohort="infer"
)


def by_kind(objects):
    return {obj["kind"]: obj for obj in objects}


def valid(obj, k8s_fake):
    """The object passes what the API server checks (the fake's validate_object: built-in kinds
    through kubernetes-validate strict, CRDs through their transcribed schemas)."""
    k8s_fake.validate_object(obj)
    return True


# ----------------------------------------------------------------------------- rendering


def recorded_bounds(quota: dict) -> dict:
    """The floor, ceiling and cards the writer recorded on ``quota`` (its JSON annotation)."""
    return json.loads(quota["metadata"]["annotations"][ANNOTATION_ELASTIC])


def test_resourcequota_backend_holds_the_decided_cards(k8s_fake):
    objects = elastic_manifests("resourcequota", BOUNDS, namespace=NS)
    assert [o["kind"] for o in objects] == ["ResourceQuota"]
    quota = objects[0]
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "4"}
    assert recorded_bounds(quota) == {
        "floor": 2,
        "ceiling": 6,
        "cards": 4,
    }
    assert kubernetes_validate.validate(quota, NEWEST, strict=True) == NEWEST
    assert valid(quota, k8s_fake)


def test_kueue_backend_floor_is_nominal_quota_and_burst_is_borrowing_limit(k8s_fake):
    objects = by_kind(elastic_manifests(QuotaBackend.KUEUE, BOUNDS, namespace=NS))
    assert list(objects) == ["ResourceQuota", "ResourceFlavor", "ClusterQueue", "LocalQueue"]
    queue = objects["ClusterQueue"]
    assert queue["spec"]["cohortName"] == "infer"
    assert queue["spec"]["resourceGroups"] == [
        {
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [
                {
                    "name": "nvidia-a100-sxm4-80gb",
                    "resources": [
                        {
                            "name": "nvidia.com/gpu",
                            "nominalQuota": "2",
                            "borrowingLimit": "4",  # ceiling 6 - floor 2
                            "lendingLimit": "0",  # guaranteed cards are never lent
                        }
                    ],
                }
            ],
        }
    ]
    # the namespace quota is the ceiling, so it never blocks what Kueue admits
    assert objects["ResourceQuota"]["spec"]["hard"] == {"requests.nvidia.com/gpu": "6"}
    for obj in objects.values():
        assert valid(obj, k8s_fake)


def test_kueue_needs_a_cohort():
    bounds = ElasticBounds(team="nlp", product=A100, floor_cards=2, ceiling_cards=6, cards=2)
    with pytest.raises(ValueError, match="cohort"):
        elastic_manifests("kueue", bounds, namespace=NS)


def test_kueue_borrowing_without_a_cohort_is_refused_by_the_api(k8s_fake):
    queue = by_kind(elastic_manifests("kueue", BOUNDS, namespace=NS))["ClusterQueue"]
    del queue["spec"]["cohortName"]
    with pytest.raises(k8s_fake.ApiError, match="borrowingLimit must be nil"):
        k8s_fake.validate_object(queue)


H100 = "NVIDIA-H100-80GB-HBM3"


def test_kueue_lender_holds_the_pools_free_cards(k8s_fake):
    objects = kueue_lender_manifests("infer", {H100: 3, A100: 10})
    assert [o["kind"] for o in objects] == ["ResourceFlavor", "ResourceFlavor", "ClusterQueue"]
    # the same flavours as the teams' queues: a product no team holds yet still resolves
    assert objects[0]["spec"] == {"nodeLabels": {"nvidia.com/gpu.product": A100}}
    lender = objects[-1]
    assert lender["metadata"]["name"] == "infer-free"
    assert lender["spec"]["cohortName"] == "infer"
    assert "namespaceSelector" not in lender["spec"]  # admits no namespace
    flavors = lender["spec"]["resourceGroups"][0]["flavors"]
    assert [(f["name"], f["resources"]) for f in flavors] == [
        ("nvidia-a100-sxm4-80gb", [{"name": "nvidia.com/gpu", "nominalQuota": "10"}]),
        ("nvidia-h100-80gb-hbm3", [{"name": "nvidia.com/gpu", "nominalQuota": "3"}]),
    ]
    for obj in objects:
        assert valid(obj, k8s_fake)
    # nothing free: the queue stays, with no resource groups (still a valid ClusterQueue)
    empty = kueue_lender_manifests("infer", {})
    assert [o["kind"] for o in empty] == ["ClusterQueue"]
    assert empty[0]["spec"]["resourceGroups"] == []
    assert valid(empty[0], k8s_fake)


@pytest.mark.parametrize("free", [{A100: -1}, {A100: 1.5}, {A100: True}])
def test_kueue_lender_refuses_bad_counts(free):
    with pytest.raises(ValueError):
        kueue_lender_manifests("infer", free)


def test_kueue_lender_refuses_a_cohort_that_is_not_a_label():
    with pytest.raises(ValueError, match="DNS-1123"):
        kueue_lender_manifests("Infer_Pool", {A100: 1})


def test_volcano_queue(k8s_fake):
    objects = by_kind(elastic_manifests("volcano", BOUNDS, namespace=NS))
    queue = objects["Queue"]
    assert queue["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert queue["metadata"]["name"] == NS and "namespace" not in queue["metadata"]
    assert queue["spec"] == {
        "guarantee": {"resource": {"nvidia.com/gpu": "2"}},
        "deserved": {"nvidia.com/gpu": "4"},
        "capability": {"nvidia.com/gpu": "6"},
        "reclaimable": True,
        "parent": "infer",
    }
    assert objects["ResourceQuota"]["spec"]["hard"] == {"requests.nvidia.com/gpu": "6"}
    validate_crd_object(queue)
    assert valid(queue, k8s_fake)


def test_koordinator_elastic_quota(k8s_fake):
    quota = by_kind(elastic_manifests("koordinator", BOUNDS, namespace=NS))["ElasticQuota"]
    assert quota["apiVersion"] == "scheduling.sigs.k8s.io/v1alpha1"
    assert quota["metadata"]["namespace"] == NS
    assert quota["spec"] == {"min": {"nvidia.com/gpu": "2"}, "max": {"nvidia.com/gpu": "6"}}
    labels = quota["metadata"]["labels"]
    assert labels["quota.scheduling.koordinator.sh/allow-lent-resource"] == "false"
    assert labels["quota.scheduling.koordinator.sh/parent"] == "infer"
    assert valid(quota, k8s_fake)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda q: q["spec"].update(capabilty={"nvidia.com/gpu": "6"}), "capabilty"),
        (lambda q: q["spec"]["capability"].update({"nvidia.com/gpu": "six"}), "six"),
        (lambda q: q["spec"].update(weight=0), "minimum"),
    ],
)
def test_transcribed_volcano_schema_rejects(change, message):
    queue = by_kind(elastic_manifests("volcano", BOUNDS, namespace=NS))["Queue"]
    queue = copy.deepcopy(queue)
    change(queue)
    with pytest.raises(jsonschema.ValidationError, match=message):
        validate_crd_object(queue)


def test_transcribed_elastic_quota_schema_rejects_unknown_fields():
    quota = by_kind(elastic_manifests("koordinator", BOUNDS, namespace=NS))["ElasticQuota"]
    quota["spec"]["minimum"] = {}
    with pytest.raises(jsonschema.ValidationError, match="minimum"):
        validate_crd_object(quota)


@pytest.mark.parametrize(
    "fields", [{"cards": 7}, {"cards": 1}, {"floor_cards": -1, "cards": 0}, {"cards": 4.0}]
)
def test_bounds_out_of_order_are_refused(fields):
    base = {"team": "nlp", "product": A100, "floor_cards": 2, "ceiling_cards": 6, "cards": 4}
    with pytest.raises(ValueError):
        ElasticBounds(**{**base, **fields})


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError):
        elastic_manifests("yunikorn", BOUNDS, namespace=NS)


# ----------------------------------------------------------------------------- HPA


def test_hpa_from_the_policy(k8s_fake):
    spec = HpaSpec(
        deployment="vllm-qwen", floor_cards=2, ceiling_cards=8, cards_per_replica=2, step_cards=2
    )
    hpa = hpa_manifest("nlp", NS, spec)
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["minReplicas"] == 1  # floor 2 cards / 2 per replica
    assert hpa["spec"]["maxReplicas"] == 4  # ceiling 8 / 2
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "vllm-qwen",
    }
    targets = [m["pods"]["target"]["averageValue"] for m in hpa["spec"]["metrics"]]
    assert targets == ["75", "800m"]  # 75 %, 0.8 s
    assert hpa["spec"]["behavior"] == {
        "scaleUp": {
            "stabilizationWindowSeconds": 300,
            "selectPolicy": "Max",
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 900}],
        },
        "scaleDown": {
            "stabilizationWindowSeconds": 1800,
            "selectPolicy": "Max",
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 900}],
        },
    }
    assert kubernetes_validate.validate(hpa, NEWEST, strict=True) == NEWEST
    assert valid(hpa, k8s_fake)


def test_hpa_min_replicas_is_at_least_one():
    hpa = hpa_manifest("nlp", NS, HpaSpec(deployment="d", floor_cards=0, ceiling_cards=3))
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 3)


@pytest.mark.parametrize(
    "fields",
    [
        {"ceiling_cards": 1, "cards_per_replica": 2},  # no replica fits the ceiling
        {"min_replicas": 0},
        {"cooldown_s": 3600},  # HPA policy periods are at most 1800 s
    ],
)
def test_hpa_refuses_impossible_specs(fields):
    base = {"deployment": "d", "floor_cards": 0, "ceiling_cards": 4}
    with pytest.raises(ValueError):
        hpa_manifest("nlp", NS, HpaSpec(**{**base, **fields}))


# ----------------------------------------------------------------------------- writes


def _team(adapter):
    adapter.ensure_team("nlp", group="oidc:nlp", gpu_quota={A100: 2})


@pytest.mark.parametrize(
    "backend, kind, group, plural, namespace",
    [
        ("resourcequota", "ResourceQuota", "", "resourcequotas", NS),
        ("kueue", "ClusterQueue", "kueue.x-k8s.io", "clusterqueues", None),
        ("volcano", "Queue", "scheduling.volcano.sh", "queues", None),
        ("koordinator", "ElasticQuota", "scheduling.sigs.k8s.io", "elasticquotas", NS),
    ],
)
def test_writes_over_http_are_idempotent_and_patch_on_change(
    apiserver, make_adapter, backend, kind, group, plural, namespace
):
    adapter = make_adapter()
    _team(adapter)
    writer = ElasticQuotaWriter(adapter)
    assert writer.set_elastic_quota(backend, BOUNDS) is True
    name = "gpu-quota" if kind == "ResourceQuota" else NS
    stored = apiserver.get(group, plural, namespace, name)
    assert stored is not None
    before = len(apiserver.writes())
    assert writer.set_elastic_quota(backend, BOUNDS) is False  # same decision: only GETs
    assert len(apiserver.writes()) == before

    up = ElasticBounds(
        team="nlp", product=A100, floor_cards=2, ceiling_cards=6, cards=6, cohort="infer"
    )
    assert writer.set_elastic_quota(backend, up) is True
    patches = [r for r in apiserver.writes()[before:] if r.method == "PATCH"]
    assert patches and all(r.content_type == "application/apply-patch+yaml" for r in patches)
    quota = apiserver.get("", "resourcequotas", NS, "gpu-quota")
    assert recorded_bounds(quota) == {
        "floor": 2,
        "ceiling": 6,
        "cards": 6,
    }
    if backend == "resourcequota":
        assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "6"
    if backend == "volcano":
        queue = apiserver.get(group, plural, None, NS)
        assert queue["spec"]["deserved"] == {"nvidia.com/gpu": "6"}


def test_hpa_and_lender_written_over_http(apiserver, make_adapter):
    adapter = make_adapter()
    _team(adapter)
    writer = ElasticQuotaWriter(adapter)
    spec = HpaSpec(deployment="vllm", floor_cards=1, ceiling_cards=4)
    assert writer.apply_hpa("nlp", spec) is True
    assert (
        apiserver.get("autoscaling", "horizontalpodautoscalers", NS, "vllm")["spec"]["maxReplicas"]
        == 4
    )
    assert writer.apply_hpa("nlp", spec) is False
    assert writer.set_lender("infer", {A100: 10}) is True
    lender = apiserver.get("kueue.x-k8s.io", "clusterqueues", None, "infer-free")
    assert lender["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "10"
    assert writer.set_lender("infer", {A100: 8}) is True
    before = len(apiserver.writes())
    assert writer.set_lender("infer", {A100: 8}) is False
    assert len(apiserver.writes()) == before


def test_missing_crd_says_which_project(apiserver, make_adapter):
    del apiserver.resources[("scheduling.volcano.sh", "v1beta1", "queues")]
    adapter = make_adapter()
    _team(adapter)
    with pytest.raises(SchedulerRejected, match="is Volcano installed"):
        ElasticQuotaWriter(adapter).set_elastic_quota("volcano", BOUNDS)


def test_memory_fake_holds_the_same_objects():
    fake = FakeKubernetes()
    _team(fake)
    writer = ElasticQuotaWriter(fake)
    assert writer.set_elastic_quota("koordinator", BOUNDS) is True
    assert writer.set_elastic_quota("koordinator", BOUNDS) is False
    stored = fake.objects[("ElasticQuota", NS, NS)]
    assert stored["spec"]["max"] == {"nvidia.com/gpu": "6"}


def test_dry_run_renders_without_writing():
    from scheduler_adapters.kubernetes import KubernetesAdapter

    adapter = KubernetesAdapter(dry_run=True)
    assert ElasticQuotaWriter(adapter).set_elastic_quota("volcano", BOUNDS) is True
    assert "kind: Queue" in adapter.manifests[-1]
