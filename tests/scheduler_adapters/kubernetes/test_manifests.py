"""Every object the Kubernetes adapter generates, checked against the schemas the API server
would use: kubernetes-validate's strict OpenAPI schemas for the built-in kinds (the oldest and
the newest Kubernetes it ships that we claim), and the fake API server's hand-written
Kueue v1beta2 schemas plus the server-side rules it emulates for the Kueue kinds
(kubernetes-validate ships no CRD schemas)."""

import json
import re

import kubernetes_validate
import pytest
import yaml

from scheduler_adapters.kubernetes import KubernetesAdapter
from scheduler_adapters.kubernetes_manifests import (
    DEFAULT_CONTAINER_LIMITS,
    DEFAULT_CONTAINER_REQUESTS,
    KUEUE_API_VERSION,
    quota_manifests,
    team_manifests,
)
from scheduler_adapters.units import parse_k8s_quantity

A100 = "NVIDIA-A100-SXM4-80GB"
RTX = "NVIDIA-GeForce-RTX-4090"
H100 = "NVIDIA-H100-80GB-HBM3"
KUEUE_KINDS = {"ResourceFlavor", "ClusterQueue", "LocalQueue"}
ALL_KINDS = {"Namespace", "ResourceQuota", "LimitRange", "RoleBinding"} | KUEUE_KINDS
# Kubernetes versions to validate against: the oldest this project's kubernetes-validate pin
# (>=1.31) guarantees, and the newest the installed package ships.
NEWEST = ".".join(kubernetes_validate.latest_version().split(".")[:2])
VERSIONS = sorted({"1.31", NEWEST}, key=lambda v: tuple(map(int, v.split("."))))

QUOTAS = [{}, {A100: 2}, {A100: 2, RTX: 1, H100: 0}]
LABEL_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?")


def _generated() -> list[tuple[str, dict]]:
    """(case, object) for everything the adapter can send: ensure_team with and without
    Kueue for several quotas (none, one model, three with one at 0), and what set_gpu_quota
    and remove_team_quota send."""
    objects = []
    for kueue in (False, True):
        for quota in QUOTAS:
            case = f"kueue={kueue} quota={quota}"
            for obj in team_manifests(
                "nlp", "team-nlp", group="oidc:nlp-inference", gpu_quota=quota, kueue=kueue
            ):
                objects.append((case, obj))
        for obj in quota_manifests("nlp", "team-nlp", {}, kueue=kueue):
            objects.append((f"remove kueue={kueue}", obj))
    return objects


GENERATED = _generated()


def _id(item):
    case, obj = item
    return f"{obj['kind']}/{obj['metadata']['name']} {case}"


def test_every_kind_is_covered():
    assert {obj["kind"] for _, obj in GENERATED} == ALL_KINDS


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("item", [i for i in GENERATED if i[1]["kind"] not in KUEUE_KINDS], ids=_id)
def test_built_in_objects_pass_the_strict_openapi_schema(item, version):
    _, obj = item

    assert kubernetes_validate.validate(obj, version, strict=True) == version


@pytest.mark.parametrize("item", [i for i in GENERATED if i[1]["kind"] in KUEUE_KINDS], ids=_id)
def test_kueue_objects_pass_the_v1beta2_schema(item, k8s_fake):
    _, obj = item
    import jsonschema

    assert obj["apiVersion"] == KUEUE_API_VERSION
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        kubernetes_validate.validate(obj, NEWEST, strict=True)  # why we bring our own
    jsonschema.validate(obj, k8s_fake.KUEUE_SCHEMAS[(obj["apiVersion"], obj["kind"])])


@pytest.mark.parametrize("item", GENERATED, ids=_id)
def test_objects_pass_the_server_side_checks(item, k8s_fake):
    # names (DNS-1123), quantity grammar, roleRef kind, the Kueue CEL rules, the schemas
    k8s_fake.validate_object(item[1], NEWEST)


@pytest.mark.parametrize("item", GENERATED, ids=_id)
def test_labels_and_annotations_are_valid(item):
    metadata = item[1]["metadata"]
    for key, value in (metadata.get("labels") or {}).items():
        assert LABEL_KEY.fullmatch(key), key
        assert LABEL_VALUE.fullmatch(value), value
    for key in metadata.get("annotations") or {}:
        assert LABEL_KEY.fullmatch(key), key


def test_quotas_are_whole_card_quantities_with_the_requests_prefix():
    for _, obj in GENERATED:
        if obj["kind"] == "ResourceQuota":
            assert list(obj["spec"]["hard"]) == ["requests.nvidia.com/gpu"]
        if obj["kind"] == "ClusterQueue":
            for group in obj["spec"]["resourceGroups"]:
                for flavor in group["flavors"]:
                    for resource in flavor["resources"]:
                        value = parse_k8s_quantity(resource["nominalQuota"])
                        assert value == int(value) >= 0

    objects = team_manifests(
        "nlp", "team-nlp", group="g", gpu_quota={A100: 2, RTX: 1, H100: 0}, kueue=True
    )
    quota = next(o for o in objects if o["kind"] == "ResourceQuota")
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "3"}
    assert json.loads(quota["metadata"]["annotations"]["gpu-pool-portal/gpu-quota"]) == {
        A100: 2,
        H100: 0,
        RTX: 1,
    }


def test_limit_range_never_mentions_gpus_and_requests_fit_limits():
    limit_range = next(o for _, o in GENERATED if o["kind"] == "LimitRange")
    (item,) = limit_range["spec"]["limits"]

    assert item["type"] == "Container"
    assert not any(
        "nvidia.com" in key for part in item.values() if isinstance(part, dict) for key in part
    )
    for resource, request in DEFAULT_CONTAINER_REQUESTS.items():
        assert parse_k8s_quantity(request) <= parse_k8s_quantity(DEFAULT_CONTAINER_LIMITS[resource])


def test_kueue_objects_refer_to_each_other():
    objects = team_manifests("nlp", "team-nlp", group="g", gpu_quota={A100: 2, RTX: 1}, kueue=True)
    by_kind = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], []).append(obj)
    namespace = by_kind["Namespace"][0]
    (queue,) = by_kind["ClusterQueue"]
    (local,) = by_kind["LocalQueue"]
    flavors = {f["metadata"]["name"]: f for f in by_kind["ResourceFlavor"]}

    assert local["metadata"]["namespace"] == namespace["metadata"]["name"]
    assert local["spec"]["clusterQueue"] == queue["metadata"]["name"]
    # the API server labels every namespace kubernetes.io/metadata.name=<name>
    assert queue["spec"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "team-nlp"}
    }
    (group,) = queue["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["nvidia.com/gpu"]
    assert {f["name"] for f in group["flavors"]} == set(flavors)
    assert {name: f["spec"]["nodeLabels"] for name, f in flavors.items()} == {
        "nvidia-a100-sxm4-80gb": {"nvidia.com/gpu.product": A100},
        "nvidia-geforce-rtx-4090": {"nvidia.com/gpu.product": RTX},
    }


# --------------------------------------------------------------------------- negative controls
# The validators must have teeth: each of these is a mistake the adapter could make.


def _team(kueue=True):
    return {
        o["kind"]: o
        for o in team_manifests("nlp", "team-nlp", group="g", gpu_quota={A100: 2}, kueue=kueue)
    }


@pytest.mark.parametrize(
    ("kind", "spoil"),
    [
        ("ResourceQuota", lambda o: o["spec"].update({"hardd": o["spec"].pop("hard")})),
        ("ResourceQuota", lambda o: o["spec"].update({"hard": [{"requests.nvidia.com/gpu": 2}]})),
        ("LimitRange", lambda o: o["spec"]["limits"][0].update({"defaultRequests": {}})),
        ("RoleBinding", lambda o: o.pop("roleRef")),
        ("RoleBinding", lambda o: o["subjects"][0].update({"name": None})),
        ("Namespace", lambda o: o["metadata"].update({"labelz": {}})),
    ],
)
@pytest.mark.parametrize("version", VERSIONS)
def test_openapi_schema_catches_mistakes(kind, spoil, version):
    obj = _team(kueue=False)[kind]
    spoil(obj)

    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(obj, version, strict=True)


def _resource(obj):
    return obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]


@pytest.mark.parametrize(
    ("kind", "spoil", "status"),
    [
        ("ResourceFlavor", lambda o: o["spec"].update({"nodeLabel": {}}), 400),
        (
            "ResourceFlavor",
            lambda o: o["spec"]["nodeLabels"].update({f"k{i}": "" for i in range(8)}),
            422,
        ),
        ("ClusterQueue", lambda o: o["spec"].update({"cohort": "inference"}), 400),  # v1beta1 name
        ("ClusterQueue", lambda o: _resource(o).update({"nominalQuota": "two"}), 422),
        ("ClusterQueue", lambda o: _resource(o).update({"borrowingLimit": "1"}), 422),
        (
            "ClusterQueue",
            lambda o: o["spec"]["resourceGroups"][0]["coveredResources"].append("cpu"),
            422,
        ),
        ("LocalQueue", lambda o: o["spec"].update({"clusterQueue": "Team_NLP"}), 422),
        ("LocalQueue", lambda o: o["spec"].update({"stopPolicy": "Paused"}), 422),
        (
            "ResourceQuota",
            lambda o: o["spec"]["hard"].update({"requests.nvidia.com/gpu": "4x"}),
            400,
        ),
        ("RoleBinding", lambda o: o["roleRef"].update({"kind": "Rolle"}), 422),
        ("Namespace", lambda o: o["metadata"].update({"name": "Team_NLP"}), 422),
    ],
)
def test_server_side_checks_catch_mistakes(kind, spoil, status, k8s_fake):
    obj = _team()[kind]
    spoil(obj)

    with pytest.raises(k8s_fake.ApiError) as refused:
        k8s_fake.validate_object(obj, NEWEST)
    assert refused.value.code == status


# --------------------------------------------------------------------------- the YAML


def test_rendered_yaml_is_the_objects_in_apply_order():
    adapter = KubernetesAdapter(dry_run=True, kueue=True)

    text = adapter.render_manifests("nlp", group="oidc:nlp", gpu_quota={A100: 2, RTX: 1})

    docs = list(yaml.safe_load_all(text))
    assert docs == team_manifests(
        "nlp", "team-nlp", group="oidc:nlp", gpu_quota={A100: 2, RTX: 1}, kueue=True
    )
    assert [d["kind"] for d in docs] == [
        "Namespace",
        "ResourceQuota",
        "LimitRange",
        "RoleBinding",
        "ResourceFlavor",
        "ResourceFlavor",
        "ClusterQueue",
        "LocalQueue",
    ]
    assert "kubectl apply --server-side --field-manager=gpu-pool-portal -f" in text
    assert "requests.nvidia.com/gpu: '3'" in text  # quantities stay strings in YAML
    assert "nominalQuota: '2'" in text


@pytest.mark.parametrize("version", VERSIONS)
def test_rendered_yaml_validates_document_by_document(version, tmp_path, k8s_fake):
    text = KubernetesAdapter(dry_run=True).render_manifests(
        "nlp", group="oidc:nlp", gpu_quota={A100: 2}, kueue=True
    )
    path = tmp_path / "team-nlp.yaml"
    path.write_text(text)

    for doc in yaml.safe_load_all(path.read_text()):
        if doc["kind"] in KUEUE_KINDS:
            k8s_fake.validate_object(doc, version)
        else:
            kubernetes_validate.validate(doc, version, strict=True)
