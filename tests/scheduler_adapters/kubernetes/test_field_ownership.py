"""Every object the portal writes goes back to exactly the state it wants after the state it
wanted changed (issue #28 item 1), on FakeKubernetes (memory) and over HTTP against the fake API
server, which models server-side apply's field ownership: a field is removed only when the
applier's *Apply* entry owned it and nobody else does.

"Exactly" is checked two ways: the fields worked out by hand, and the object equal (server
fields aside) to the one a fresh cluster holds after only the final write."""

import json

import pytest

from scheduler_adapters.errors import SchedulerRejected
from scheduler_adapters.kubernetes_elastic import ElasticBounds, ElasticQuotaWriter
from scheduler_adapters.kubernetes_fake import FakeKubernetes
from scheduler_adapters.kubernetes_manifests import ANNOTATION_NODE_SELECTOR
from scheduler_adapters.types import KueueCohort

A100 = "NVIDIA-A100-SXM4-80GB"
RTX = "NVIDIA-GeForce-RTX-4090"
NS = "team-nlp"
GPU = "nvidia.com/gpu"
A100_FLAVOR = "nvidia-a100-sxm4-80gb"
SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation")


def _ensure(adapter, quota, **options):
    return adapter.ensure_team("nlp", group="oidc:nlp", gpu_quota=quota, **options)


def _view(obj):
    """An object as the portal wants it: without what the server sets on every write."""
    if obj is None:
        return None
    obj = {key: value for key, value in obj.items() if key != "status"}
    obj["metadata"] = {k: v for k, v in obj["metadata"].items() if k not in SERVER_FIELDS}
    return obj


def _fresh(cluster, kind, name, namespace, final):
    """The object as a fresh cluster of the same backend holds it after only ``final``."""
    if cluster.server is None:
        fresh = FakeKubernetes()
        final(fresh)
        return _view(fresh.objects.get((kind, namespace, name)))
    server = type(cluster.server)(nodes=()).start()
    try:
        from scheduler_adapters.kubernetes import KubernetesAdapter
        from scheduler_adapters.kubernetes_transport import KINDS, api_client_from_settings

        adapter = KubernetesAdapter(
            api_client=api_client_from_settings(host=server.url, token=server.token)
        )
        final(adapter)
        adapter.close()
        spec = KINDS[kind]
        return _view(server.get(spec.group, spec.plural, namespace, name))
    finally:
        server.stop()


# --------------------------------------------------------------------------- the cohort case


def test_a_cluster_queue_leaves_the_cohort_when_the_elastic_allocation_ends(cluster):
    """4 A100 with 2 of them elastic burst in cohort pool-a: nominalQuota 4 - 2 = 2,
    borrowingLimit 2, lendingLimit 0. The allocation ends and the team keeps its 2 guaranteed
    cards: the queue must hold nominalQuota 2 and nothing else, no cohortName (else it keeps
    borrowing and lending in pool-a), no borrowingLimit, no lendingLimit. Before issue #28 the
    re-apply could not remove them (they were set by a create) and ``covers`` saw nothing to
    write at all."""
    adapter = cluster.adapter
    _ensure(adapter, {A100: 4}, cohort=KueueCohort("pool-a", {A100: 2}))
    assert cluster.read("ClusterQueue", NS)["spec"]["cohortName"] == "pool-a"

    assert _ensure(adapter, {A100: 2}, kueue=True) is True

    spec = cluster.read("ClusterQueue", NS)["spec"]
    assert spec == {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
        "resourceGroups": [
            {
                "coveredResources": [GPU],
                "flavors": [
                    {"name": A100_FLAVOR, "resources": [{"name": GPU, "nominalQuota": "2"}]}
                ],
            }
        ],
    }
    final = lambda a: _ensure(a, {A100: 2}, kueue=True)  # noqa: E731
    assert _view(cluster.read("ClusterQueue", NS)) == _fresh(
        cluster, "ClusterQueue", NS, None, final
    )
    assert _ensure(adapter, {A100: 2}, kueue=True) is False  # and it stays put


def test_a_cohort_change_moves_the_queue_and_keeps_nothing_of_the_old_one(cluster):
    """pool-a borrowing 2 of 4 -> pool-b borrowing 1 of 3: nominalQuota 3 - 1 = 2,
    borrowingLimit 1, lendingLimit 0, cohortName pool-b."""
    adapter = cluster.adapter
    _ensure(adapter, {A100: 4}, cohort=KueueCohort("pool-a", {A100: 2}))

    assert _ensure(adapter, {A100: 3}, cohort=KueueCohort("pool-b", {A100: 1})) is True

    spec = cluster.read("ClusterQueue", NS)["spec"]
    assert spec["cohortName"] == "pool-b"
    assert spec["resourceGroups"][0]["flavors"] == [
        {
            "name": A100_FLAVOR,
            "resources": [
                {"name": GPU, "nominalQuota": "2", "borrowingLimit": "1", "lendingLimit": "0"}
            ],
        }
    ]


def test_a_team_leaving_a_pool_loses_its_product_everywhere(cluster):
    """{A100: 2, RTX: 1} -> {RTX: 1} (the A100 pool's allocation is gone): the quota's total is
    1, the recorded split {RTX: 1}, the queue has the RTX flavor only."""
    adapter = cluster.adapter
    _ensure(adapter, {A100: 2, RTX: 1}, kueue=True)

    assert _ensure(adapter, {RTX: 1}, kueue=True) is True

    quota = cluster.read("ResourceQuota", "gpu-quota", NS)
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "1"}
    assert json.loads(quota["metadata"]["annotations"]["gpu-pool-portal/gpu-quota"]) == {RTX: 1}
    flavors = cluster.read("ClusterQueue", NS)["spec"]["resourceGroups"][0]["flavors"]
    assert [flavor["name"] for flavor in flavors] == ["nvidia-geforce-rtx-4090"]
    final = lambda a: _ensure(a, {RTX: 1}, kueue=True)  # noqa: E731
    for kind, name, namespace in [
        ("Namespace", NS, None),
        ("ResourceQuota", "gpu-quota", NS),
        ("ClusterQueue", NS, None),
        ("LocalQueue", "default", NS),
    ]:
        assert _view(cluster.read(kind, name, namespace)) == _fresh(
            cluster, kind, name, namespace, final
        )


def test_the_node_selector_goes_when_the_namespace_gains_a_second_product(cluster):
    """PodNodeSelector ANDs its terms, so it is only set for one product (A100 alone); with
    the RTX added it must go, or every pod of the namespace stays on A100 nodes."""
    adapter = cluster.adapter
    adapter.namespace_node_selector = True
    _ensure(adapter, {A100: 2})
    annotations = cluster.read("Namespace", NS)["metadata"]["annotations"]
    assert annotations == {ANNOTATION_NODE_SELECTOR: f"nvidia.com/gpu.product={A100}"}

    assert _ensure(adapter, {A100: 2, RTX: 1}) is True

    metadata = cluster.read("Namespace", NS)["metadata"]
    assert "annotations" not in metadata
    assert metadata["labels"] == {
        "app.kubernetes.io/managed-by": "gpu-pool-portal",
        "gpu-pool-portal/team": "nlp",
        "kubernetes.io/metadata.name": NS,  # the server's, never removed
    }
    assert _ensure(adapter, {A100: 2, RTX: 1}) is False


def test_a_quota_backend_change_drops_the_old_backends_record(cluster):
    """The ResourceQuota backend records the elastic bounds on the quota
    (``gpu-pool-portal/elastic``); once the pool's backend is Kueue the quota sync writes the
    quota without it, and it must go."""
    writer = ElasticQuotaWriter(cluster.adapter)
    _ensure(cluster.adapter, {A100: 2})
    bounds = ElasticBounds("nlp", A100, floor_cards=2, ceiling_cards=4, cards=3)
    writer.set_elastic_quota("resourcequota", bounds)
    annotations = cluster.read("ResourceQuota", "gpu-quota", NS)["metadata"]["annotations"]
    assert json.loads(annotations["gpu-pool-portal/elastic"]) == {
        "floor": 2,
        "ceiling": 4,
        "cards": 3,
    }

    _ensure(cluster.adapter, {A100: 4}, cohort=KueueCohort("pool-a", {A100: 2}))

    annotations = cluster.read("ResourceQuota", "gpu-quota", NS)["metadata"]["annotations"]
    assert annotations == {"gpu-pool-portal/gpu-quota": json.dumps({A100: 4})}


@pytest.mark.parametrize("backend", ["volcano", "koordinator"])
def test_a_deleted_pool_leaves_no_parent_behind(cluster, backend):
    """Volcano's ``spec.parent`` and Koordinator's parent labels name the pool's queue; with
    the pool gone (no cohort) they must go, the bounds stay (floor 1, ceiling 3, cards 2)."""
    writer = ElasticQuotaWriter(cluster.adapter)
    _ensure(cluster.adapter, {A100: 3})
    writer.set_elastic_quota(backend, ElasticBounds("nlp", A100, 1, 3, 2, cohort="pool-a"))

    assert writer.set_elastic_quota(backend, ElasticBounds("nlp", A100, 1, 3, 2)) is True

    if backend == "volcano":
        spec = cluster.read("Queue", NS)["spec"]
        assert spec == {
            "guarantee": {"resource": {GPU: "1"}},
            "deserved": {GPU: "2"},
            "capability": {GPU: "3"},
            "reclaimable": True,
        }
    else:
        quota = cluster.read("ElasticQuota", NS, NS)
        assert quota["metadata"]["labels"] == {
            "app.kubernetes.io/managed-by": "gpu-pool-portal",
            "gpu-pool-portal/team": "nlp",
            "quota.scheduling.koordinator.sh/allow-lent-resource": "false",
        }
        assert quota["spec"] == {"min": {GPU: "1"}, "max": {GPU: "3"}}


def test_the_lender_queue_of_a_pool_with_nothing_free_keeps_no_flavors(cluster):
    """The pool's lender lends 2 A100 and 1 RTX, then nothing: ``resourceGroups`` is empty."""
    writer = ElasticQuotaWriter(cluster.adapter)
    writer.set_lender("pool-a", {A100: 2, RTX: 1})

    assert writer.set_lender("pool-a", {}) is True

    assert cluster.read("ClusterQueue", "pool-a-free")["spec"] == {
        "cohortName": "pool-a",
        "resourceGroups": [],
    }


# --------------------------------------------------------------------------- someone else


def test_an_object_an_older_portal_created_is_upgraded_then_cleaned(cluster):
    """An older portal created the ClusterQueue with POST (an ``Update`` entry of
    gpu-pool-portal, cohortName included). The adapter folds that entry into its ``Apply``
    entry once (a managedFields write), after which leaving cohortName out removes it."""
    adapter = cluster.adapter
    legacy = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {
            "name": NS,
            "labels": {"app.kubernetes.io/managed-by": "gpu-pool-portal"},
        },
        "spec": {
            "cohortName": "pool-a",
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
            "resourceGroups": [],
        },
    }
    _ensure(adapter, {}, kueue=False)
    if cluster.server is not None:
        cluster.server.put_object(legacy, manager="gpu-pool-portal")
    else:
        adapter.api.apply(legacy, operation="test")
        stored = adapter.objects[("ClusterQueue", None, NS)]
        stored["metadata"]["managedFields"][0]["operation"] = "Update"

    assert _ensure(adapter, {}, kueue=True) is True

    queue = cluster.read("ClusterQueue", NS)
    assert "cohortName" not in queue["spec"]
    assert [(m["manager"], m["operation"]) for m in queue["metadata"]["managedFields"]] == [
        ("gpu-pool-portal", "Apply")
    ]
    assert _ensure(adapter, {}, kueue=True) is False


def test_a_hand_edit_of_the_portals_field_is_taken_back_by_force(apiserver, make_adapter):
    """Someone set the quota to 7 (``kubectl edit`` now owns the field): the portal's apply
    conflicts (409 FieldManagerConflict), the object is the portal's, so it applies again with
    ``force=true``: 2 again, owned by the portal; the other key they added (pods: 50) stays."""
    adapter = make_adapter()
    _ensure(adapter, {A100: 2})
    apiserver.edit(
        "",
        "resourcequotas",
        NS,
        "gpu-quota",
        lambda rq: rq["spec"]["hard"].update({"requests.nvidia.com/gpu": "7", "pods": "50"}),
    )
    before = len(apiserver.requests)

    assert _ensure(adapter, {A100: 2}) is True

    patches = [r for r in apiserver.requests[before:] if r.method == "PATCH"]
    assert [(r.status, r.query["force"]) for r in patches] == [(409, "false"), (200, "true")]
    stored = apiserver.get("", "resourcequotas", NS, "gpu-quota")
    assert stored["spec"]["hard"] == {"requests.nvidia.com/gpu": "2", "pods": "50"}
    owned = {
        entry["manager"]: entry["fieldsV1"]["f:spec"]["f:hard"]
        for entry in stored["metadata"]["managedFields"]
        if "f:spec" in entry["fieldsV1"]
    }
    assert owned == {
        "gpu-pool-portal": {"f:requests.nvidia.com/gpu": {}},
        "kubectl-edit": {"f:pods": {}},
    }


def test_someone_elses_object_is_reported_not_overwritten(apiserver, make_adapter):
    """An admin made ClusterQueue team-nlp in cohort research (kubectl-create owns the
    field); the portal wants cohort pool-a. The portal never made this object, so the conflict
    is reported with the field and its owner, and the object keeps its cohort."""
    adapter = make_adapter()
    _ensure(adapter, {A100: 2})
    apiserver.put_object(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": NS},
            "spec": {"cohortName": "research", "resourceGroups": []},
        },
        manager="kubectl-create",
    )

    with pytest.raises(SchedulerRejected) as rejected:
        _ensure(adapter, {A100: 4}, cohort=KueueCohort("pool-a", {A100: 2}))

    message = rejected.value.message
    assert "ClusterQueue 'team-nlp' was not made by the portal" in message
    assert ".spec.cohortName (owned by kubectl-create)" in message
    assert rejected.value.transient is False
    stored = apiserver.get("kueue.x-k8s.io", "clusterqueues", None, NS)
    assert stored["spec"] == {"cohortName": "research", "resourceGroups": []}
