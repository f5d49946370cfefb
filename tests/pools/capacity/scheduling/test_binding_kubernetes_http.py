"""Reconcile against the HTTP fake of kube-apiserver, which stores quantities in canonical form
as the real server does: a GPU quota set to 1.5 by hand (held as ``1500m``) is a drift, repaired
to the portal's cards (issue #28 item 4)."""

from __future__ import annotations

import pytest
from django.utils import timezone
from factories import GpuFactory, NodeFactory, PoolFactory, TeamFactory
from kubernetes_support import portal_on_fake_apiserver

from pools.capacity.models import SchedulerDrift
from pools.capacity.services.reconcile import reconcile_kubernetes
from pools.capacity.services.requests import capacity_request_approve
from pools.common.choices import Scheduler, TeamRole
from pools.inventory.models import GpuModel
from pools.tenancy.models import Membership

pytestmark = pytest.mark.django_db


def test_a_fractional_quota_set_by_hand_is_a_drift_and_repaired(
    submitted, django_user_model, django_capture_on_commit_callbacks
):
    """2 L40S approved; someone sets the namespace quota to 1.5 (stored as 1500m). Reconcile
    records expected 2, found 1.5, repaired, and the quota is 2 again. Before issue #28 the
    read raised ("must be a whole non-negative number") on every run: an error, no repair."""
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
    with portal_on_fake_apiserver() as server:
        with django_capture_on_commit_callbacks(execute=True):
            capacity_request_approve(request=request, actor=admin)
        assert reconcile_kubernetes().drifts == []
        server.edit(
            "",
            "resourcequotas",
            "team-nlp",
            "gpu-quota",
            lambda rq: rq["spec"]["hard"].update({"requests.nvidia.com/gpu": "1.5"}),
        )

        report = reconcile_kubernetes()

        drift = SchedulerDrift.objects.get()
        assert (drift.expected, drift.found, drift.repaired) == ("2", "1.5", True)
        assert report.errors == []
        hard = server.get("", "resourcequotas", "team-nlp", "gpu-quota")["spec"]["hard"]
        assert hard == {"requests.nvidia.com/gpu": "2"}
        assert reconcile_kubernetes().drifts == []
