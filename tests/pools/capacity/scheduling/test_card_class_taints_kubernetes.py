"""Card-class taints through the portal (issue #36 item 2) on the HTTP fake of kube-apiserver,
with ``CARD_CLASS_TAINTS`` on: an approval taints the GPU nodes by their model's card class
and gives the team the tolerations of the classes of the models it holds; a taint removed by
hand is a drift that reconcile repairs, leaving another manager's taint alone."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone
from factories import GpuFactory, NodeFactory, PoolFactory, TeamFactory
from kubernetes_support import portal_on_fake_apiserver

from pools.capacity.models import SchedulerDrift
from pools.capacity.services.reconcile import reconcile_kubernetes
from pools.capacity.services.requests import capacity_request_approve
from pools.classes.selectors import catalogue_card_classes
from pools.common.choices import Scheduler, TeamRole
from pools.inventory.models import GpuModel
from pools.tenancy.models import Membership
from scheduler_adapters.kubernetes_fake import gpu_node

pytestmark = pytest.mark.django_db

KEY = "gpu-pool-portal/card-class"
# the catalogue's Kubernetes labels (k8s-label aliases) of the two models
L40S, RTX4090 = "NVIDIA-L40S", "NVIDIA-GeForce-RTX-4090"
CORDONED = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def _nodes() -> list[dict]:
    rtx = gpu_node("k8s-4090-01", RTX4090, 2)
    rtx["spec"] = {"taints": [dict(CORDONED)]}
    return [gpu_node("k8s-l40s-01", L40S, 4), rtx]


def test_catalogue_card_classes_by_kubernetes_label():
    classes = catalogue_card_classes()
    assert (classes[L40S], classes[RTX4090]) == ("datacentre", "consumer")


def test_approval_taints_nodes_and_reconcile_repairs_a_removed_taint(
    submitted, django_user_model, django_capture_on_commit_callbacks
):
    """nlp is approved 2 L40S (data-centre): the L40S node gets ``card-class=datacentre``, the
    4090 node ``card-class=consumer`` beside the kubelet's taint, and nlp's namespace tolerates
    datacentre only. Someone removes the 4090's card-class taint: reconcile records expected
    ``consumer:NoSchedule``, found ``none``, repaired; the kubelet's taint stays."""
    l40s = GpuModel.objects.get(slug="l40s")
    pool = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    node = NodeFactory(pool=pool, scheduler=Scheduler.KUBERNETES)
    for index in range(4):
        GpuFactory(node=node, index=index, gpu_model=l40s, raw_model_name="NVIDIA L40S")
    team = TeamFactory(slug="nlp")
    alice = django_user_model.objects.create_user("alice", password="x")
    Membership.objects.create(team=team, user=alice, role=TeamRole.MANAGER)
    admin = django_user_model.objects.create_user("admin", password="x", is_staff=True)
    request = submitted(pool, l40s, team, alice, 2, timezone.now(), days=10)
    request.workload_kind = "inference"
    request.save()
    with portal_on_fake_apiserver(nodes=_nodes(), CARD_CLASS_TAINTS=True) as server:
        with django_capture_on_commit_callbacks(execute=True):
            capacity_request_approve(request=request, actor=admin)

        assert server.get("", "nodes", None, "k8s-l40s-01")["spec"]["taints"] == [
            {"key": KEY, "value": "datacentre", "effect": "NoSchedule"}
        ]
        consumer = {"key": KEY, "value": "consumer", "effect": "NoSchedule"}
        assert server.get("", "nodes", None, "k8s-4090-01")["spec"]["taints"] == [
            CORDONED,
            consumer,
        ]
        annotations = server.get("", "namespaces", None, "team-nlp")["metadata"]["annotations"]
        whitelist = json.loads(annotations["scheduler.alpha.kubernetes.io/tolerationsWhitelist"])
        assert whitelist == [
            {"key": KEY, "operator": "Equal", "value": "datacentre", "effect": "NoSchedule"}
        ]
        assert reconcile_kubernetes().drifts == []

        server.edit(
            "",
            "nodes",
            None,
            "k8s-4090-01",
            lambda n: n["spec"].update(taints=[dict(CORDONED)]),
            manager="kubectl-taint",
        )
        report = reconcile_kubernetes()

        drift = SchedulerDrift.objects.get()
        assert (drift.subject, drift.expected, drift.found, drift.repaired) == (
            f"node k8s-4090-01 taint {KEY}",
            "consumer:NoSchedule",
            "none",
            True,
        )
        assert report.errors == []
        assert server.get("", "nodes", None, "k8s-4090-01")["spec"]["taints"] == [
            CORDONED,
            consumer,
        ]
        assert reconcile_kubernetes().drifts == []
