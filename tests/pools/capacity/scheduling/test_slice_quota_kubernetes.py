"""Issue 38, item 2: Kubernetes quotas for MIG slice allocations, on the HTTP fake of
kube-apiserver (it models server-side apply's field ownership: a quota entry the portal stops
sending is removed).

The fake serves ``tests/mig_nodes.py``'s real GFD node objects of both strategies (imported
into pool ``infer``). By hand, for team ``nlp`` holding, from now:
* 2 whole A100 → ``nvidia.com/gpu`` 2 under product ``NVIDIA-A100-SXM4-80GB``;
* 9 × A100 ``1g.10gb`` on the *mixed* node → ``requests.nvidia.com/mig-1g.10gb: 9``;
* 14 × H100 NVL ``1g.12gb`` on the *single* node → 14 ``nvidia.com/gpu`` of product
  ``NVIDIA-H100-NVL-MIG-1g.12gb`` (GFD's label on that node);
so ``requests.nvidia.com/gpu`` = 2 + 14 = 16. Releasing the 9 slices removes their entry.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from factories import MembershipFactory, UserFactory
from kubernetes_support import portal_on_fake_apiserver
from mig_nodes import mig_fleet, mixed_a100_node, single_h100_nvl_node

from pools.capacity.request_fields import RequestFields
from pools.capacity.services.allocations import allocation_release
from pools.capacity.services.reconcile import reconcile_kubernetes
from pools.capacity.services.requests import capacity_request_approve, capacity_request_create
from pools.common.choices import TeamRole, WorkloadKind
from pools.inventory.models import GpuModel
from scheduler_adapters.kubernetes_manifests import flavor_name

pytestmark = pytest.mark.django_db

NODES = [mixed_a100_node(), single_h100_nvl_node()]


@pytest.fixture
def granted(django_capture_on_commit_callbacks):
    pool = mig_fleet()
    manager = MembershipFactory(team__slug="nlp", user__username="mia", role=TeamRole.MANAGER)
    admin = UserFactory(username="root", is_staff=True)
    start = timezone.now()

    def grant(count, model, profile=""):
        request = capacity_request_create(actor=manager.user, submit=True, fields=RequestFields(
            team=manager.team, workload_kind=WorkloadKind.INFERENCE,
            card_count=count, starts_at=start, ends_at=start + timedelta(days=3),
            justification="slices", pool=pool, gpu_model=GpuModel.objects.get(slug=model),
            mig_profile=profile,
        ))  # fmt: skip
        with django_capture_on_commit_callbacks(execute=True):
            return capacity_request_approve(request=request, actor=admin)

    return grant, manager.user


def quota(server):
    return server.get("", "resourcequotas", "team-nlp", "gpu-quota")


def test_slices_are_quotad_by_strategy_and_released(granted, django_capture_on_commit_callbacks):
    grant, manager = granted
    with portal_on_fake_apiserver(nodes=NODES) as server:
        grant(2, "a100_80g_sxm")
        slices = grant(9, "a100_80g_sxm", "1g.10gb")
        grant(14, "h100_nvl", "1g.12gb")
        found = quota(server)
        assert found["spec"]["hard"] == {
            "requests.nvidia.com/gpu": "16",
            "requests.nvidia.com/mig-1g.10gb": "9",
        }
        assert json.loads(found["metadata"]["annotations"]["gpu-pool-portal/gpu-quota"]) == {
            "NVIDIA-A100-SXM4-80GB": 2,
            "NVIDIA-H100-NVL-MIG-1g.12gb": 14,
        }
        assert reconcile_kubernetes().drifts == []  # the read-back agrees: 16

        with django_capture_on_commit_callbacks(execute=True):
            allocation_release(allocation=slices, actor=manager, reason="done")
        assert quota(server)["spec"]["hard"] == {"requests.nvidia.com/gpu": "16"}


def test_with_kueue_the_single_strategy_slices_get_a_flavour_on_their_mig_nodes(granted):
    """Kueue's ResourceFlavor of the single-strategy product selects the MIG nodes by GFD's
    product label: the node affinity that keeps the slices' pods there."""
    grant, _ = granted
    with portal_on_fake_apiserver(nodes=NODES, KUEUE=True) as server:
        grant(14, "h100_nvl", "1g.12gb")
        product = "NVIDIA-H100-NVL-MIG-1g.12gb"
        flavour = server.get("kueue.x-k8s.io", "resourceflavors", None, flavor_name(product))
        assert flavour["spec"]["nodeLabels"] == {"nvidia.com/gpu.product": product}
