"""Workload classes applied in Slurm as QOS through the adapter (issue #36), with the fake; the
real clusters run tests/integration/slurm/test_qos_preemption.py."""

from __future__ import annotations

import pytest
from django.utils import timezone

from pools.capacity.services.requests import capacity_request_approve
from pools.classes.models import WorkloadClass
from pools.classes.slurm_qos import class_qos_specs
from pools.common.choices import AllocationStatus
from scheduler_adapters.records import AccountQos, QosSpec

pytestmark = pytest.mark.django_db


def test_a_production_allocation_writes_every_class_qos_and_the_account_list(
    fake_slurm, setup, submitted, django_capture_on_commit_callbacks
):
    pool, a100, team, bob, admin = setup
    request = submitted(pool, a100, team, bob, 2, timezone.now())
    request.workload_class = WorkloadClass.objects.get(slug="production")
    request.save()
    with django_capture_on_commit_callbacks(execute=True):
        allocation = capacity_request_approve(request=request, actor=admin)
    allocation.refresh_from_db()

    assert allocation.status == AllocationStatus.ACTIVE, allocation.status_reason
    assert allocation.scheduler_binding["qos"] == ["portal-production"]
    assert allocation.scheduler_binding["default_qos"] == "portal-production"
    assert fake_slurm.get_account_qos("vision") == AccountQos(
        "vision", ("portal-production",), "portal-production"
    )
    # the seeded classes by preemption order: batch 10 < development 20 < internal 30 <
    # production 40; each may preempt those below it (priorities 100, 200, 500, 1000)
    expected = {
        "portal-batch": (100, ()),
        "portal-development": (200, ("portal-batch",)),
        "portal-internal": (500, ("portal-batch", "portal-development")),
        "portal-production": (1000, ("portal-batch", "portal-development", "portal-internal")),
    }
    for name, (priority, preempts) in expected.items():
        qos = fake_slurm.get_qos(name)
        assert (qos.priority, qos.preempts, qos.preempt_mode) == (priority, preempts, "REQUEUE")


def test_an_unclassed_allocation_leaves_the_account_on_normal(
    fake_slurm, setup, submitted, django_capture_on_commit_callbacks
):
    pool, a100, team, bob, admin = setup
    with django_capture_on_commit_callbacks(execute=True):
        allocation = capacity_request_approve(
            request=submitted(pool, a100, team, bob, 1, timezone.now()), actor=admin
        )
    allocation.refresh_from_db()

    assert allocation.status == AllocationStatus.ACTIVE
    assert "qos" not in allocation.scheduler_binding
    assert fake_slurm.get_account_qos("vision") == AccountQos("vision", ("normal",), None)
    assert fake_slurm.get_qos("portal-production") is None


def test_class_qos_specs_of_hand_built_classes():
    classes = [
        WorkloadClass(slug="gold", name="Gold", priority=900, preemption_order=5),
        WorkloadClass(slug="scrap", name="Scrap", priority=1, preemption_order=1),
        WorkloadClass(slug="mid", name="Mid", priority=50, preemption_order=3),
    ]
    specs = class_qos_specs(classes)

    assert [(s.name, s.priority, s.preempts) for s in specs] == [
        ("portal-scrap", 1, ()),
        ("portal-mid", 50, ("portal-scrap",)),
        ("portal-gold", 900, ("portal-mid", "portal-scrap")),
    ]
    assert all(isinstance(s, QosSpec) and s.preempt_mode == "REQUEUE" for s in specs)


def test_a_classed_kubernetes_allocation_writes_the_priority_classes(
    submitted, django_user_model, django_capture_on_commit_callbacks
):
    from django.test import override_settings
    from factories import GpuFactory, NodeFactory, PoolFactory, TeamFactory

    from pools.clusters import adapters
    from pools.common.choices import Scheduler, TeamRole
    from pools.inventory.models import GpuModel
    from pools.tenancy.models import Membership

    adapters.reset()
    with override_settings(SCHEDULERS={"kubernetes": {"BACKEND": "kubernetes-fake"}}):
        fake_k8s = adapters.scheduler_adapter("kubernetes")
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
        request.workload_class = WorkloadClass.objects.get(slug="production")
        request.save()
        with django_capture_on_commit_callbacks(execute=True):
            allocation = capacity_request_approve(request=request, actor=admin)
        allocation.refresh_from_db()

        assert allocation.status == AllocationStatus.ACTIVE, allocation.status_reason
        assert allocation.scheduler_binding["priority_classes"] == ["portal-production"]
        read = fake_k8s.read_object
        prod = read("scheduling.k8s.io/v1", "PriorityClass", "portal-production")
        batch = read("scheduling.k8s.io/v1", "PriorityClass", "portal-batch")
        # seeded values: production 1000 may preempt; batch (lowest order) 100 may not
        assert (prod["value"], prod["preemptionPolicy"]) == (1000, "PreemptLowerPriority")
        assert (batch["value"], batch["preemptionPolicy"]) == (100, "Never")
    adapters.reset()


def test_reconcile_repairs_qos_changed_by_hand_and_records_the_drift(
    fake_slurm, setup, submitted, django_capture_on_commit_callbacks
):
    from pools.capacity.models import SchedulerDrift
    from pools.capacity.services.reconcile import reconcile_slurm

    pool, a100, team, bob, admin = setup
    request = submitted(pool, a100, team, bob, 2, timezone.now())
    request.workload_class = WorkloadClass.objects.get(slug="production")
    request.save()
    with django_capture_on_commit_callbacks(execute=True):
        capacity_request_approve(request=request, actor=admin)
    # an operator puts the account back on normal and lowers batch's priority, by hand
    fake_slurm.accounts["vision"].qos, fake_slurm.accounts["vision"].default_qos = ("normal",), None
    fake_slurm.qos["portal-batch"] = QosSpec("portal-batch", 5, (), "REQUEUE")

    report = reconcile_slurm()

    assert report.errors == []
    drift = SchedulerDrift.objects.get(team=team, subject="account vision QOS")
    assert drift.expected == "QOS=portal-production default portal-production"
    assert drift.found == "QOS=normal default none; portal-batch priority 5 preempts none REQUEUE"
    assert drift.repaired is True
    assert fake_slurm.get_account_qos("vision") == AccountQos(
        "vision", ("portal-production",), "portal-production"
    )
    assert fake_slurm.get_qos("portal-batch").priority == 100
    # a second run finds nothing to repair
    assert [d.subject for d in reconcile_slurm().drifts] == []


def test_a_slurm_that_cannot_take_the_account_qos_is_refused_before_anything_is_written(
    fake_slurm, setup, submitted, django_capture_on_commit_callbacks
):
    """22.05 over REST without the sacctmgr fallback drops association QOS changes: the
    production allocation is refused with that reason before the account, its members, its GPU
    cap or any class QOS is written (before, the cap was written and then the QOS refused)."""
    pool, a100, team, bob, admin = setup
    reason = "API v0.0.38 does not apply association QOS changes reliably over REST"
    fake_slurm.account_qos_refused = reason
    request = submitted(pool, a100, team, bob, 2, timezone.now())
    request.workload_class = WorkloadClass.objects.get(slug="production")
    request.save()
    with django_capture_on_commit_callbacks(execute=True):
        allocation = capacity_request_approve(request=request, actor=admin)
    allocation.refresh_from_db()

    assert reason in allocation.status_reason
    assert allocation.scheduler_binding.get("applied") is not True
    assert allocation.status == AllocationStatus.FAILED
    # the refused provisioning wrote nothing; what follows is the failed allocation's release,
    # which writes the team's cap as it now is: 0 cards held (never the 2 asked for)
    assert fake_slurm.calls == ["ensure_account", "ensure_user_association", "set_gpu_limit"]
    assert fake_slurm.accounts["vision"].grp_tres == {"gres/gpu:a100": 0}
    assert sorted(fake_slurm.qos) == ["normal"]  # no class QOS either


def test_reconcile_reports_class_qos_it_could_not_repair_on_the_cluster_health(
    fake_slurm, setup, submitted, django_capture_on_commit_callbacks
):
    """The environment's Slurm cluster row carries what is still wrong after the repairs: first
    nothing; then a Slurm that refuses every QOS write (the operator deleted portal-batch and
    slurmdbd now refuses writes) shows "portal-batch missing"; a cluster that cannot take the
    account's QOS list says so."""
    from pools.capacity.services.reconcile import reconcile_slurm
    from pools.clusters.models import Cluster
    from pools.common.choices import CredentialKind, Scheduler
    from scheduler_adapters.errors import SchedulerRejected

    cluster = Cluster.objects.create(
        slug="env-slurm", name="Slurm", kind=Scheduler.SLURM,
        credential_kind=CredentialKind.ENVIRONMENT,
    )  # fmt: skip
    pool, a100, team, bob, admin = setup
    request = submitted(pool, a100, team, bob, 2, timezone.now())
    request.workload_class = WorkloadClass.objects.get(slug="production")
    request.save()
    with django_capture_on_commit_callbacks(execute=True):
        capacity_request_approve(request=request, actor=admin)

    reconcile_slurm()
    cluster.refresh_from_db()
    assert cluster.class_qos_problem == ""

    del fake_slurm.qos["portal-batch"]
    original = fake_slurm.ensure_qos

    def refusing(spec):
        raise SchedulerRejected("slurmdbd refused (fake)", operation="ensure_qos")

    fake_slurm.ensure_qos = refusing
    report = reconcile_slurm()
    cluster.refresh_from_db()
    assert cluster.class_qos_problem == "portal-batch missing"
    assert any("slurmdbd refused" in e for e in report.errors)

    fake_slurm.ensure_qos = original
    fake_slurm.account_qos_refused = "API v0.0.38 drops it"
    reconcile_slurm()
    cluster.refresh_from_db()
    # the repair is refused whole before it writes anything, so portal-batch stays missing
    assert cluster.class_qos_problem == (
        "account QOS cannot be written: API v0.0.38 drops it; portal-batch missing"
    )
