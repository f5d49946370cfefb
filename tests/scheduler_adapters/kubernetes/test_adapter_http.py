"""KubernetesAdapter over real HTTP, through the official client, against the fake API server:
the requests it sends, the answers it survives, and the settings that build it."""

import json
import time
from pathlib import Path

import pytest
import yaml

from scheduler_adapters.errors import (
    NotFound,
    SchedulerAuthError,
    SchedulerRejected,
    SchedulerUnavailable,
    UnexpectedResponse,
)
from scheduler_adapters.kubernetes import KubernetesAdapter
from scheduler_adapters.kubernetes_fake import FakeKubernetes
from scheduler_adapters.kubernetes_nodes import parse_kubernetes_nodes
from scheduler_adapters.kubernetes_transport import ResourceVersionConflict
from scheduler_adapters.registry import build_scheduler_adapter

A100 = "NVIDIA-A100-SXM4-80GB"
RTX = "NVIDIA-GeForce-RTX-4090"
NS = "team-nlp"
RQ_PATH = f"/api/v1/namespaces/{NS}/resourcequotas/gpu-quota"
NODES = Path(__file__).resolve().parents[2] / "fixtures" / "kubernetes" / "nodes.json"


def _ensure(adapter, quota=None, **options):
    return adapter.ensure_team(
        "nlp", group="oidc:nlp", gpu_quota=quota or {A100: 2, RTX: 1}, **options
    )


def _calls(server, since=0):
    return [(r.method, r.path, r.status) for r in server.requests[since:]]


# --------------------------------------------------------------------------- what is sent


def test_missing_objects_are_created_by_server_side_apply(apiserver, make_adapter):
    """Creation is an apply too, so the portal owns every field it set as an applier."""
    assert _ensure(make_adapter(), kueue=True) is True

    writes = apiserver.writes()
    assert [(r.method, r.path, r.status) for r in writes] == [
        ("PATCH", f"/api/v1/namespaces/{NS}", 201),
        ("PATCH", f"/api/v1/namespaces/{NS}/resourcequotas/gpu-quota", 201),
        ("PATCH", f"/api/v1/namespaces/{NS}/limitranges/gpu-pool-portal-defaults", 201),
        (
            "PATCH",
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/rolebindings/"
            "gpu-pool-portal-team-edit",
            201,
        ),
        ("PATCH", "/apis/kueue.x-k8s.io/v1beta2/resourceflavors/nvidia-a100-sxm4-80gb", 201),
        ("PATCH", "/apis/kueue.x-k8s.io/v1beta2/resourceflavors/nvidia-geforce-rtx-4090", 201),
        ("PATCH", f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{NS}", 201),
        ("PATCH", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/localqueues/default", 201),
    ]
    assert {r.content_type for r in writes} == {"application/apply-patch+yaml"}
    assert all(
        r.query
        == {"fieldManager": "gpu-pool-portal", "fieldValidation": "Strict", "force": "false"}
        for r in writes
    )
    assert all(r.headers["authorization"] == "Bearer portal-token" for r in apiserver.requests)
    assert writes[1].body == {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": "gpu-quota",
            "namespace": NS,
            "labels": {
                "app.kubernetes.io/managed-by": "gpu-pool-portal",
                "gpu-pool-portal/team": "nlp",
            },
            "annotations": {
                "gpu-pool-portal/gpu-quota": json.dumps({A100: 2, RTX: 1}, sort_keys=True)
            },
        },
        "spec": {"hard": {"requests.nvidia.com/gpu": "3"}},
    }
    managers = apiserver.get("", "resourcequotas", NS, "gpu-quota")["metadata"]["managedFields"]
    assert [(m["manager"], m["operation"]) for m in managers] == [("gpu-pool-portal", "Apply")]


def test_a_second_ensure_sends_only_gets(apiserver, make_adapter):
    adapter = make_adapter()
    _ensure(adapter, kueue=True)
    before = len(apiserver.requests)

    assert _ensure(adapter, kueue=True) is False

    assert {method for method, _, _ in _calls(apiserver, before)} == {"GET"}
    assert len(apiserver.requests) - before == 8  # one read per object


def test_changes_are_server_side_applied_at_the_version_read(apiserver, make_adapter):
    adapter = make_adapter()
    _ensure(adapter)
    read_at = apiserver.get("", "resourcequotas", NS, "gpu-quota")["metadata"]["resourceVersion"]
    before = len(apiserver.requests)

    assert adapter.set_gpu_quota("nlp", {A100: 4}) is True

    assert _calls(apiserver, before) == [
        ("GET", f"/api/v1/namespaces/{NS}", 200),
        ("GET", RQ_PATH, 200),
        ("PATCH", RQ_PATH, 200),
    ]
    patch = apiserver.requests[-1]
    assert patch.content_type == "application/apply-patch+yaml"
    assert patch.query == {
        "fieldManager": "gpu-pool-portal",
        "fieldValidation": "Strict",
        "force": "false",
    }
    assert patch.body["metadata"]["resourceVersion"] == read_at
    assert patch.body["spec"] == {"hard": {"requests.nvidia.com/gpu": "4"}}
    stored = apiserver.get("", "resourcequotas", NS, "gpu-quota")
    assert stored["spec"]["hard"] == {"requests.nvidia.com/gpu": "4"}
    assert ("gpu-pool-portal", "Apply") in {
        (entry["manager"], entry["operation"]) for entry in stored["metadata"]["managedFields"]
    }


def test_apply_takes_back_a_limit_another_manager_changed(apiserver, make_adapter):
    adapter = make_adapter()
    _ensure(adapter, {A100: 2})
    apiserver.edit(
        "",
        "resourcequotas",
        NS,
        "gpu-quota",
        lambda rq: rq["spec"]["hard"].update({"requests.nvidia.com/gpu": "7", "pods": "50"}),
    )

    assert _ensure(adapter, {A100: 2}) is True

    hard = apiserver.get("", "resourcequotas", NS, "gpu-quota")["spec"]["hard"]
    assert hard == {"requests.nvidia.com/gpu": "2", "pods": "50"}  # the other key is theirs


# --------------------------------------------------------------------------- 409


def test_an_object_a_concurrent_creator_made_first_is_applied_onto(apiserver, make_adapter):
    def someone_else_creates_it(server, request):
        server.put_object(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": NS, "labels": {"a": "b"}},
            }
        )

    apiserver.before("PATCH", f"^/api/v1/namespaces/{NS}$", someone_else_creates_it)

    assert _ensure(make_adapter()) is True

    assert _calls(apiserver)[:2] == [
        ("GET", f"/api/v1/namespaces/{NS}", 404),
        ("PATCH", f"/api/v1/namespaces/{NS}", 200),
    ]
    labels = apiserver.get("", "namespaces", None, NS)["metadata"]["labels"]
    assert labels["gpu-pool-portal/team"] == "nlp"
    assert labels["a"] == "b"


def test_a_resource_version_conflict_is_read_again_and_retried_once(apiserver, make_adapter):
    adapter = make_adapter()
    _ensure(adapter, {A100: 2})
    apiserver.concurrent_write("PATCH", RQ_PATH)
    before = len(apiserver.requests)

    assert adapter.set_gpu_quota("nlp", {A100: 3}) is True

    assert _calls(apiserver, before) == [
        ("GET", f"/api/v1/namespaces/{NS}", 200),
        ("GET", RQ_PATH, 200),
        ("PATCH", RQ_PATH, 409),
        ("GET", RQ_PATH, 200),
        ("PATCH", RQ_PATH, 200),
    ]
    stored = apiserver.get("", "resourcequotas", NS, "gpu-quota")
    assert stored["spec"]["hard"]["requests.nvidia.com/gpu"] == "3"
    assert "example.com/touched" in stored["metadata"]["annotations"]  # theirs is kept


def test_a_second_conflict_is_raised_as_transient(apiserver, make_adapter):
    adapter = make_adapter()
    _ensure(adapter, {A100: 2})
    apiserver.concurrent_write("PATCH", RQ_PATH, times=2)

    with pytest.raises(ResourceVersionConflict) as conflict:
        adapter.set_gpu_quota("nlp", {A100: 3})

    assert conflict.value.transient is True
    assert "the object has been modified" in str(conflict.value)
    assert [r.status for r in apiserver.requests if r.method == "PATCH"][-2:] == [409, 409]


# --------------------------------------------------------------------------- 4xx / 5xx


def test_422_status_becomes_a_rejection_with_the_status_message(apiserver, make_adapter):
    adapter = make_adapter()
    _ensure(adapter, {A100: 2}, kueue=True)
    message = (
        'ClusterQueue.kueue.x-k8s.io "team-nlp" is invalid: spec.resourceGroups[0].flavors[0]'
        '.resources[0].nominalQuota: Invalid value: "-1": must be greater than or equal to 0'
    )
    apiserver.fail(
        "PATCH",
        "/clusterqueues/",
        status=422,
        reason="Invalid",
        message=message,
        causes=[
            {
                "reason": "FieldValueInvalid",
                "message": 'Invalid value: "-1": must be greater than or equal to 0',
                "field": "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
            }
        ],
    )

    with pytest.raises(SchedulerRejected) as rejected:
        adapter.set_gpu_quota("nlp", {A100: 3}, kueue=True)

    error = rejected.value
    assert (error.message, error.http_status, error.transient) == (message, 422, False)
    assert error.operation == "set_gpu_quota"
    assert error.errors[0].text == (
        "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: "
        'Invalid value: "-1": must be greater than or equal to 0'
    )
    assert error.errors[0].description == "FieldValueInvalid"


def test_a_body_the_server_cannot_decode_is_a_rejection(apiserver, make_adapter):
    # what a real server says to a field it does not know under fieldValidation=Strict
    apiserver.fail(
        "PATCH",
        None,
        status=400,
        reason="BadRequest",
        message='ResourceQuota in version "v1" cannot be handled as a ResourceQuota: strict '
        'decoding error: unknown field "spec.hardd"',
    )

    with pytest.raises(SchedulerRejected, match="strict decoding error") as rejected:
        _ensure(make_adapter())

    assert rejected.value.http_status == 400


def test_403_from_rbac_is_an_auth_error(apiserver, make_adapter):
    apiserver.forbid("PATCH", f"^/api/v1/namespaces/{NS}$", resource="namespaces")

    with pytest.raises(SchedulerAuthError) as forbidden:
        _ensure(make_adapter())

    assert forbidden.value.message == (
        'namespaces is forbidden: User "system:serviceaccount:portal:portal" cannot patch '
        'resource "namespaces" in API group "" at the cluster scope'
    )
    assert (forbidden.value.http_status, forbidden.value.transient) == (403, False)


def test_401_for_a_wrong_token_is_an_auth_error(make_adapter):
    with pytest.raises(SchedulerAuthError) as unauthorized:
        make_adapter(token="expired").list_nodes()

    assert unauthorized.value.http_status == 401
    assert unauthorized.value.message == "Unauthorized"


def test_a_namespace_being_deleted_is_a_transient_rejection(apiserver, make_adapter):
    adapter = make_adapter()
    _ensure(adapter)
    del apiserver.objects[("", "resourcequotas", NS, "gpu-quota")]
    apiserver.terminate_namespace(NS)

    with pytest.raises(SchedulerRejected) as terminating:
        adapter.set_gpu_quota("nlp", {A100: 1})

    assert terminating.value.transient is True
    assert terminating.value.http_status == 403
    assert terminating.value.errors[0].description == "NamespaceTerminating"


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (500, "etcdserver: request timed out"),
        (503, "the server is currently unable to handle the request"),
        (429, "storage is (re)initializing"),
    ],
)
def test_server_side_trouble_is_transient(apiserver, make_adapter, status, message):
    apiserver.fail("GET", None, status=status, reason="ServiceUnavailable", message=message)

    with pytest.raises(SchedulerUnavailable) as unavailable:
        make_adapter().get_gpu_quota("nlp")

    assert unavailable.value.message == message
    assert (unavailable.value.http_status, unavailable.value.transient) == (status, True)


def test_a_proxy_error_page_is_transient_and_a_200_page_is_unexpected(apiserver, make_adapter):
    adapter = make_adapter()
    page = b"<html><body>502 Bad Gateway</body></html>"
    apiserver.fail("GET", None, status=502, raw=page)
    with pytest.raises(SchedulerUnavailable) as bad_gateway:
        adapter.list_nodes()
    assert bad_gateway.value.http_status == 502

    apiserver.fail("GET", None, status=200, raw=page)
    with pytest.raises(UnexpectedResponse):
        adapter.list_nodes()


def test_kueue_not_installed_is_said_plainly(k8s_fake):
    server = k8s_fake.FakeApiServer(kueue=False).start()
    adapter = KubernetesAdapter(
        api_client=_client(server.url, server.token), connect_timeout_s=1, timeout_s=2
    )
    try:
        with pytest.raises(SchedulerRejected, match=r"is Kueue >= 0\.15 installed"):
            _ensure(adapter, kueue=True)
        assert server.writes() == []  # checked before anything was written
        assert _ensure(adapter, kueue=False) is True
    finally:
        adapter.close()
        server.stop()


# --------------------------------------------------------------------------- no answer


def test_a_refused_connection_is_transient_and_quick(k8s_fake, make_adapter):
    adapter = make_adapter(host=f"http://127.0.0.1:{k8s_fake.free_port()}")
    started = time.monotonic()

    with pytest.raises(SchedulerUnavailable) as refused:
        _ensure(adapter)

    assert refused.value.transient is True
    assert refused.value.http_status is None
    assert "unreachable" in refused.value.message
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("method", ["GET", "PATCH"])
def test_a_server_that_never_answers_costs_one_timeout(apiserver, make_adapter, method):
    adapter = make_adapter(timeout_s=0.5)
    apiserver.hang(method, None, times=5)
    started = time.monotonic()

    with pytest.raises(SchedulerUnavailable) as timed_out:
        _ensure(adapter)

    elapsed = time.monotonic() - started
    assert timed_out.value.transient is True
    assert "timed out" in timed_out.value.message.lower()
    assert 0.5 <= elapsed < 2  # urllib3 retries are off: one read timeout, not four
    assert [r.method for r in apiserver.requests].count(method) == 1


# --------------------------------------------------------------------------- nodes


def test_nodes_are_read_page_by_page(apiserver, make_adapter):
    result = make_adapter(page_size=1).list_nodes()

    assert [node.hostname for node in result.nodes] == ["gpu-4090-01", "gpu-a100-01"]
    assert [r.query for r in apiserver.requests if r.path == "/api/v1/nodes"] == [
        {"limit": "1"},
        {"limit": "1", "continue": "1"},
    ]


def test_nodes_parse_exactly_like_the_node_parser(k8s_fake):
    node_list = json.loads(NODES.read_text())
    server = k8s_fake.FakeApiServer(nodes=node_list["items"]).start()
    adapter = KubernetesAdapter(api_client=_client(server.url, server.token), timeout_s=2)
    try:
        result = adapter.list_nodes()
    finally:
        adapter.close()
        server.stop()

    expected = parse_kubernetes_nodes(node_list)
    by_name = {node.hostname: node for node in expected.nodes}
    assert sorted(by_name) == sorted(node.hostname for node in result.nodes)
    for node in result.nodes:
        assert node == by_name[node.hostname]


# --------------------------------------------------------------------------- dry run


def test_dry_run_writes_yaml_and_sends_nothing(tmp_path, apiserver, make_adapter):
    adapter = make_adapter(dry_run=True, dry_run_dir=tmp_path, kueue=True)

    assert _ensure(adapter, {A100: 2}) is True
    assert adapter.set_gpu_quota("nlp", {A100: 5, RTX: 1}) is True

    assert apiserver.writes() == []
    docs = list(yaml.safe_load_all((tmp_path / f"{NS}.yaml").read_text()))
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("Namespace", NS),
        ("ResourceQuota", "gpu-quota"),
        ("LimitRange", "gpu-pool-portal-defaults"),
        ("RoleBinding", "gpu-pool-portal-team-edit"),
        ("ResourceFlavor", "nvidia-a100-sxm4-80gb"),
        ("ResourceFlavor", "nvidia-geforce-rtx-4090"),
        ("ClusterQueue", NS),
        ("LocalQueue", "default"),
    ]
    assert docs[1]["spec"]["hard"] == {"requests.nvidia.com/gpu": "6"}  # the later quota wins
    assert len(adapter.manifests) == 2


def test_dry_run_without_a_connection_cannot_read(tmp_path):
    adapter = build_scheduler_adapter(
        {"BACKEND": "kubernetes", "DRY_RUN": True, "DRY_RUN_DIR": str(tmp_path)}
    )

    assert _ensure(adapter) is True
    with pytest.raises(SchedulerUnavailable) as no_connection:
        adapter.get_gpu_quota("nlp")
    assert no_connection.value.transient is False


# --------------------------------------------------------------------------- settings


def test_registry_builds_the_adapter_from_host_and_token(apiserver):
    adapter = build_scheduler_adapter(
        {
            "BACKEND": "kubernetes",
            "HOST": apiserver.url,
            "TOKEN": apiserver.token,
            "KUEUE": True,
            "NAMESPACE_PREFIX": "gpu-",
            "TIMEOUT_S": 2,
        }
    )
    try:
        assert adapter.ensure_team("nlp", group="g", gpu_quota={A100: 1}) is True
    finally:
        adapter.close()

    assert apiserver.get("kueue.x-k8s.io", "clusterqueues", None, "gpu-nlp") is not None


def test_registry_builds_the_adapter_from_a_kubeconfig(tmp_path, apiserver):
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": apiserver.url}}],
                "users": [{"name": "portal", "user": {"token": apiserver.token}}],
                "contexts": [{"name": "portal", "context": {"cluster": "fake", "user": "portal"}}],
                "current-context": "portal",
            }
        )
    )
    adapter = build_scheduler_adapter({"BACKEND": "kubernetes", "KUBECONFIG": str(kubeconfig)})
    try:
        assert len(adapter.list_nodes().nodes) == 2
    finally:
        adapter.close()


@pytest.mark.parametrize(
    "settings",
    [
        {"BACKEND": "kubernetes"},  # no connection and not a dry run
        {"BACKEND": "kubernetes", "HOST": "http://x", "TOKEN": "t", "KUEUE": "false"},
        {"BACKEND": "kubernetes", "HOST": "http://x", "TOKEN": "t", "NAMESPACES": "team-"},
        {"BACKEND": "kubernetes", "KUBECONFIG": "/k", "HOST": "http://x", "TOKEN": "t"},
        {"BACKEND": "kubernetes", "DRY_RUN": True, "NAMESPACE_PREFIX": "Team_"},
        {"BACKEND": "kubernetes-fake", "HOST": "http://x"},
    ],
)
def test_registry_refuses_settings_that_cannot_work(settings):
    with pytest.raises(ValueError):
        build_scheduler_adapter(settings)


def test_registry_builds_the_in_memory_fake():
    adapter = build_scheduler_adapter({"BACKEND": "kubernetes-fake", "KUEUE": True})

    assert isinstance(adapter, FakeKubernetes)
    assert adapter.kueue is True


# --------------------------------------------------------------------------- the fake itself
# The adapter never sends these; they check that the fake answers like the documented API.


def test_fake_apply_without_force_reports_a_field_manager_conflict(apiserver, make_adapter):
    _ensure(make_adapter(), {A100: 2})
    apiserver.edit(
        "",
        "resourcequotas",
        NS,
        "gpu-quota",
        lambda rq: rq["spec"]["hard"].update({"requests.nvidia.com/gpu": "7"}),
    )
    client = _client(apiserver.url, apiserver.token)
    body = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu-quota"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "2"}},
    }
    from kubernetes.client import CoreV1Api
    from kubernetes.client.exceptions import ApiException

    core = CoreV1Api(client)
    with pytest.raises(ApiException) as conflict:
        core.patch_namespaced_resource_quota(
            "gpu-quota",
            NS,
            body,
            field_manager="gpu-pool-portal",
            _content_type="application/apply-patch+yaml",
        )
    status = json.loads(conflict.value.body)
    assert (status["code"], status["reason"]) == (409, "Conflict")
    assert status["details"]["causes"][0]["reason"] == "FieldManagerConflict"

    with pytest.raises(ApiException) as no_manager:
        core.patch_namespaced_resource_quota(
            "gpu-quota", NS, body, _content_type="application/apply-patch+yaml"
        )
    assert no_manager.value.status == 422
    client.close()


def test_fake_rejects_unknown_fields_and_bad_quantities_like_strict_validation(apiserver):
    client = _client(apiserver.url, apiserver.token)
    from kubernetes.client import CustomObjectsApi
    from kubernetes.client.exceptions import ApiException

    custom = CustomObjectsApi(client)
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "a100"},
        "spec": {"nodeLabel": {"nvidia.com/gpu.product": A100}},
    }
    with pytest.raises(ApiException) as unknown:
        custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "resourceflavors", flavor)
    assert unknown.value.status == 400
    assert 'unknown field "spec.nodeLabel"' in json.loads(unknown.value.body)["message"]

    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "q"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu", "cpu"],
                    "flavors": [
                        {
                            "name": "a100",
                            "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "2"}],
                        }
                    ],
                }
            ]
        },
    }
    with pytest.raises(ApiException) as cel:
        custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", queue)
    assert cel.value.status == 422
    assert "same number of resources" in json.loads(cel.value.body)["message"]
    client.close()


def test_fake_keeps_the_resource_version_on_a_no_op_apply(apiserver, make_adapter):
    adapter = make_adapter()
    _ensure(adapter, {A100: 2})
    before = apiserver.get("", "resourcequotas", NS, "gpu-quota")["metadata"]["resourceVersion"]
    body = apiserver.get("", "resourcequotas", NS, "gpu-quota")
    applied = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": "gpu-quota",
            "labels": body["metadata"]["labels"],
            "annotations": body["metadata"]["annotations"],
        },
        "spec": body["spec"],
    }
    adapter.transport.apply(
        {**applied, "metadata": {**applied["metadata"], "namespace": NS}}, operation="test"
    )

    after = apiserver.get("", "resourcequotas", NS, "gpu-quota")["metadata"]["resourceVersion"]
    assert after == before


def test_fake_namespace_delete_takes_its_objects(apiserver, make_adapter):
    adapter = make_adapter()
    _ensure(adapter)
    client = _client(apiserver.url, apiserver.token)
    from kubernetes.client import CoreV1Api

    CoreV1Api(client).delete_namespace(NS)
    client.close()

    with pytest.raises(NotFound):
        adapter.get_gpu_quota("nlp")
    assert apiserver.get("", "resourcequotas", NS, "gpu-quota") is None


def _client(host, token):
    from scheduler_adapters.kubernetes_transport import api_client_from_settings

    return api_client_from_settings(host=host, token=token)
