"""Inference allocations applied as a namespace GPU quota (in-memory Kubernetes fake)."""

from __future__ import annotations

import pytest
from django.test import override_settings
from django.utils import timezone
from factories import GpuFactory, NodeFactory, PoolFactory, TeamFactory

from pools.capacity.services.allocations import allocation_release
from pools.capacity.services.requests import capacity_request_approve
from pools.clusters import adapters
from pools.common.choices import AllocationStatus, Scheduler, TeamRole
from pools.inventory.models import GpuModel
from pools.tenancy.models import Membership

pytestmark = pytest.mark.django_db


@pytest.fixture
def fake_k8s():
    adapters.reset()
    with override_settings(SCHEDULERS={"kubernetes": {"BACKEND": "kubernetes-fake"}}):
        yield adapters.scheduler_adapter("kubernetes")
    adapters.reset()


def test_approval_sets_the_namespace_quota_and_release_lowers_it(
    fake_k8s, submitted, django_user_model, django_capture_on_commit_callbacks
):
    l40s = GpuModel.objects.get(slug="l40s")
    pool = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    node = NodeFactory(pool=pool, scheduler=Scheduler.KUBERNETES)
    for index in range(4):
        GpuFactory(node=node, index=index, gpu_model=l40s, raw_model_name="NVIDIA L40S")
    team = TeamFactory(slug="nlp")
    alice = django_user_model.objects.create_user("alice", password="x")
    Membership.objects.create(team=team, user=alice, role=TeamRole.MANAGER)
    admin = django_user_model.objects.create_user("admin", password="x", is_staff=True)
    request = submitted(pool, l40s, team, alice, 3, timezone.now(), days=10)
    request.workload_kind = "inference"
    request.save()

    with django_capture_on_commit_callbacks(execute=True):
        allocation = capacity_request_approve(request=request, actor=admin)
    allocation.refresh_from_db()

    assert allocation.status == AllocationStatus.ACTIVE
    assert allocation.scheduler_binding["gpu_quota"] == {"NVIDIA-L40S": 3}
    quota = fake_k8s.get_gpu_quota("nlp")
    assert quota.cards == 3

    with django_capture_on_commit_callbacks(execute=True):
        allocation_release(allocation=allocation, actor=alice)
    assert fake_k8s.get_gpu_quota("nlp").cards == 0


def test_reconcile_recreates_a_deleted_namespace_quota(
    fake_k8s, submitted, django_user_model, django_capture_on_commit_callbacks
):
    from pools.capacity.models import SchedulerDrift
    from pools.capacity.services.reconcile import reconcile_kubernetes

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
    with django_capture_on_commit_callbacks(execute=True):
        capacity_request_approve(request=request, actor=admin)
    assert reconcile_kubernetes().drifts == []

    fake_k8s.set_gpu_quota("nlp", {"NVIDIA-L40S": 7})  # changed by hand in the cluster
    report = reconcile_kubernetes()

    drift = SchedulerDrift.objects.get()
    assert (drift.expected, drift.found, drift.repaired) == ("2", "7", True)
    assert report.drifts == [drift]
    assert fake_k8s.get_gpu_quota("nlp").cards == 2
