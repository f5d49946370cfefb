"""What every NamespaceQuotaAdapter promises (scheduler_adapters/base.py), checked on
FakeKubernetes (memory) and on KubernetesAdapter over HTTP against the fake API server.

The cluster is FakeKubernetes' default: one node with 4 A100, one with 2 RTX 4090."""

from collections import Counter

import pytest

from scheduler_adapters.base import NamespaceGpuQuota, NamespaceQuotaAdapter
from scheduler_adapters.errors import NotFound, SchedulerRejected
from scheduler_adapters.kubernetes_transport import ResourceVersionConflict

A100 = "NVIDIA-A100-SXM4-80GB"
RTX = "NVIDIA-GeForce-RTX-4090"
NS = "team-nlp"


def _ensure(cluster, quota=None, *, kueue=False, team="nlp"):
    return cluster.adapter.ensure_team(
        team, group="oidc:nlp", gpu_quota=quota or {A100: 2, RTX: 1}, kueue=kueue
    )


def _versions(cluster, kueue):
    names = [
        ("Namespace", NS, None),
        ("ResourceQuota", "gpu-quota", NS),
        ("LimitRange", "gpu-pool-portal-defaults", NS),
        ("RoleBinding", "gpu-pool-portal-team-edit", NS),
    ]
    if kueue:
        names += [
            ("ResourceFlavor", "nvidia-a100-sxm4-80gb", None),
            ("ResourceFlavor", "nvidia-geforce-rtx-4090", None),
            ("ClusterQueue", NS, None),
            ("LocalQueue", "default", NS),
        ]
    return {
        (kind, name): cluster.read(kind, name, ns)["metadata"]["resourceVersion"]
        for kind, name, ns in names
    }


def test_both_backends_are_namespace_quota_adapters(cluster):
    assert isinstance(cluster.adapter, NamespaceQuotaAdapter)


def test_nodes_report_cards_by_product(cluster):
    result = cluster.adapter.list_nodes()

    cards = Counter((node.hostname, gpu.model_name) for node in result.nodes for gpu in node.gpus)
    assert cards == Counter({("gpu-a100-01", A100): 4, ("gpu-4090-01", RTX): 2})
    assert result.issues == ()


@pytest.mark.parametrize("kueue", [False, True])
def test_ensure_team_is_idempotent(cluster, kueue):
    assert _ensure(cluster, kueue=kueue) is True
    writes = cluster.writes()
    versions = _versions(cluster, kueue)

    assert _ensure(cluster, kueue=kueue) is False
    assert cluster.writes() == writes  # the second call only reads
    assert _versions(cluster, kueue) == versions

    quota = cluster.read("ResourceQuota", "gpu-quota", NS)
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "3"}
    namespace = cluster.read("Namespace", NS)
    assert namespace["metadata"]["labels"]["gpu-pool-portal/team"] == "nlp"
    binding = cluster.read("RoleBinding", "gpu-pool-portal-team-edit", NS)
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "edit",
    }
    assert binding["subjects"] == [
        {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "oidc:nlp"}
    ]
    assert (cluster.read("ClusterQueue", NS) is not None) is kueue


@pytest.mark.parametrize("kueue", [False, True])
def test_quota_reads_back_per_product(cluster, kueue):
    _ensure(cluster, kueue=kueue)

    assert cluster.adapter.get_gpu_quota("nlp", kueue=kueue) == NamespaceGpuQuota(
        team="nlp", namespace=NS, cards=3, cards_by_product={A100: 2, RTX: 1}, kueue=kueue
    )


@pytest.mark.parametrize("kueue", [False, True])
def test_quota_is_raised_and_lowered(cluster, kueue):
    adapter = cluster.adapter
    _ensure(cluster, {A100: 2}, kueue=kueue)

    assert adapter.set_gpu_quota("nlp", {A100: 4, RTX: 2}, kueue=kueue) is True
    assert adapter.get_gpu_quota("nlp", kueue=kueue).cards_by_product == {A100: 4, RTX: 2}
    assert adapter.get_gpu_quota("nlp", kueue=kueue).cards == 6

    writes = cluster.writes()
    assert adapter.set_gpu_quota("nlp", {A100: 4, RTX: 2}, kueue=kueue) is False
    assert cluster.writes() == writes

    assert adapter.set_gpu_quota("nlp", {A100: 1}, kueue=kueue) is True
    assert adapter.get_gpu_quota("nlp", kueue=kueue) == NamespaceGpuQuota(
        team="nlp", namespace=NS, cards=1, cards_by_product={A100: 1}, kueue=kueue
    )
    if kueue:
        queue = cluster.read("ClusterQueue", NS)
        assert queue["spec"]["resourceGroups"] == [
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": "nvidia-a100-sxm4-80gb",
                        "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "1"}],
                    }
                ],
            }
        ]
        # flavors are shared by all teams and never deleted
        assert cluster.read("ResourceFlavor", "nvidia-geforce-rtx-4090") is not None


@pytest.mark.parametrize("kueue", [False, True])
def test_remove_lowers_to_zero_and_keeps_the_namespace(cluster, kueue):
    adapter = cluster.adapter
    _ensure(cluster, kueue=kueue)

    assert adapter.remove_team_quota("nlp", kueue=kueue) is True
    assert adapter.get_gpu_quota("nlp", kueue=kueue) == NamespaceGpuQuota(
        team="nlp", namespace=NS, cards=0, cards_by_product={}, kueue=kueue
    )
    assert adapter.remove_team_quota("nlp", kueue=kueue) is False
    assert cluster.read("Namespace", NS) is not None
    assert cluster.read("RoleBinding", "gpu-pool-portal-team-edit", NS) is not None
    if kueue:
        assert cluster.read("ClusterQueue", NS)["spec"].get("resourceGroups", []) == []


def test_remove_without_a_namespace_changes_nothing(cluster):
    assert cluster.adapter.remove_team_quota("ghost") is False
    assert cluster.writes() == 0


def test_quota_needs_the_namespace(cluster):
    with pytest.raises(NotFound) as set_missing:
        cluster.adapter.set_gpu_quota("ghost", {A100: 1})
    with pytest.raises(NotFound) as get_missing:
        cluster.adapter.get_gpu_quota("ghost")

    assert (set_missing.value.kind, set_missing.value.key) == ("namespace", "team-ghost")
    assert get_missing.value.kind == "namespace"
    assert cluster.writes() == 0


@pytest.mark.parametrize(
    ("team", "group", "quota"),
    [
        ("Team_A", "g", {A100: 1}),  # namespaces allow no upper case or '_'
        ("a" * 60, "g", {A100: 1}),  # team- + 60 characters is over 63
        ("nlp", "", {A100: 1}),
        ("nlp", "g", {"NVIDIA A100": 1}),  # not a label value
        ("nlp", "g", {A100: -1}),
        ("nlp", "g", {A100: True}),
        ("nlp", "g", {A100: 1.5}),
        ("nlp", "g", {"NVIDIA_A100": 1, "nvidia-a100": 1}),  # one flavor name for both
    ],
)
def test_names_kubernetes_would_reject_are_refused_before_sending(cluster, team, group, quota):
    with pytest.raises(ValueError):
        cluster.adapter.ensure_team(team, group=group, gpu_quota=quota, kueue=True)

    assert cluster.writes() == 0
    assert cluster.read("Namespace", "team-nlp") is None


def test_namespace_of_another_team_is_not_taken_over(cluster):
    _ensure(cluster)
    cluster.edit(
        "Namespace",
        NS,
        None,
        lambda ns: ns["metadata"]["labels"].update({"gpu-pool-portal/team": "x"}),
    )
    writes = cluster.writes()

    with pytest.raises(SchedulerRejected, match="belongs to team 'x'"):
        _ensure(cluster)
    with pytest.raises(SchedulerRejected):
        cluster.adapter.set_gpu_quota("nlp", {A100: 8})

    assert cluster.writes() == writes


def test_quota_changed_by_hand_is_read_and_repaired(cluster):
    _ensure(cluster)
    cluster.edit(
        "ResourceQuota",
        "gpu-quota",
        NS,
        lambda rq: rq["spec"]["hard"].update({"requests.nvidia.com/gpu": "10"}),
    )

    assert cluster.adapter.get_gpu_quota("nlp").cards == 10
    assert _ensure(cluster) is True
    assert cluster.adapter.get_gpu_quota("nlp").cards == 3


def test_deleted_namespace_is_made_again(cluster):
    _ensure(cluster, kueue=True)
    cluster.delete_namespace(NS)

    assert _ensure(cluster, kueue=True) is True
    assert cluster.adapter.get_gpu_quota("nlp", kueue=True).cards_by_product == {A100: 2, RTX: 1}


def test_a_concurrent_change_is_retried_once(cluster):
    _ensure(cluster, {A100: 2})
    cluster.conflict_next(1)

    assert cluster.adapter.set_gpu_quota("nlp", {A100: 3}) is True
    assert cluster.adapter.get_gpu_quota("nlp").cards == 3


def test_two_concurrent_changes_give_a_transient_error(cluster):
    _ensure(cluster, {A100: 2})
    cluster.conflict_next(2)

    with pytest.raises(ResourceVersionConflict) as conflict:
        cluster.adapter.set_gpu_quota("nlp", {A100: 3})

    assert conflict.value.transient is True
    assert conflict.value.http_status == 409
    assert cluster.adapter.get_gpu_quota("nlp").cards == 2


def test_a_refused_write_carries_the_servers_message_and_changes_nothing(cluster):
    _ensure(cluster, {A100: 2})
    cluster.reject_next_write("must be less than or equal to 8", "spec.hard")

    with pytest.raises(SchedulerRejected) as rejected:
        cluster.adapter.set_gpu_quota("nlp", {A100: 9})

    assert rejected.value.transient is False
    assert rejected.value.http_status == 422
    assert "must be less than or equal to 8" in str(rejected.value)
    assert rejected.value.errors[0].text == "spec.hard: must be less than or equal to 8"
    assert cluster.adapter.get_gpu_quota("nlp").cards == 2


def test_an_unreachable_cluster_is_transient(cluster):
    expected = cluster.break_connection()

    for call in (
        lambda: _ensure(cluster),
        lambda: cluster.adapter.get_gpu_quota("nlp"),
        cluster.adapter.list_nodes,
    ):
        with pytest.raises(expected) as unreachable:
            call()
        assert unreachable.value.transient is True


def test_a_forbidden_identity_is_an_auth_error(cluster):
    expected = cluster.forbid_everything()

    with pytest.raises(expected) as forbidden:
        _ensure(cluster)

    assert forbidden.value.transient is False
    assert forbidden.value.http_status == 403
