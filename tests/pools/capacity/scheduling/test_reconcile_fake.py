"""Reconcile finds and repairs drift between allocations and Slurm caps (fake Slurm)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from factories import AllocationFactory, ClusterFactory, PoolFactory

from pools.capacity.models import SchedulerDrift
from pools.capacity.services.reconcile import (
    reconcile_all,
    reconcile_cluster,
    reconcile_slurm,
)
from pools.capacity.services.requests import capacity_request_approve
from pools.capacity.services.scheduler_binding import cap_drift_subject
from pools.common.choices import AllocationStatus, Scheduler
from scheduler_adapters.records import GpuLimit

pytestmark = pytest.mark.django_db


@pytest.fixture
def applied(fake_slurm, setup, submitted, django_capture_on_commit_callbacks):
    pool, a100, team, bob, admin = setup
    with django_capture_on_commit_callbacks(execute=True):
        allocation = capacity_request_approve(
            request=submitted(pool, a100, team, bob, 2, timezone.now(), days=10), actor=admin
        )
    return fake_slurm, allocation


def test_no_drift_when_slurm_holds_what_allocations_require(applied):
    report = reconcile_slurm()
    assert report.drifts == []
    assert report.checked == 1
    assert SchedulerDrift.objects.count() == 0


def test_a_cap_changed_by_hand_is_recorded_and_put_back(applied):
    fake, allocation = applied
    fake.set_gpu_limit(GpuLimit(account="vision", partition="gpu", gres_type="a100", cards=4))

    report = reconcile_slurm()

    drift = SchedulerDrift.objects.get()
    assert (drift.expected, drift.found, drift.repaired) == ("2", "4", True)
    assert report.drifts == [drift]
    assert [lim.cards for lim in fake.get_gpu_limits("vision")] == [2]
    assert reconcile_slurm().drifts == []  # repaired: the next run finds nothing


def test_a_cap_left_behind_after_the_database_moved_on_is_set_to_zero(applied):
    fake, allocation = applied
    # A worker died after the allocation ended in the database but before Slurm was told.
    type(allocation).objects.filter(pk=allocation.pk).update(status="ended")

    reconcile_slurm()

    drift = SchedulerDrift.objects.get()
    assert (drift.expected, drift.found, drift.repaired) == ("0", "2", True)
    assert fake.get_gpu_limits("vision") == (GpuLimit("vision", "gpu", "a100", 0),)


def test_cards_in_another_slurm_cluster_stay_out_of_this_ones_cap(applied, tmp_path):
    """Issue 35: vision holds 2 a100 in the environment's Slurm (fake) and 3 in pool ``far`` of
    another Slurm cluster. By hand: the environment's account cap is 2, not 2 + 3 = 5; reconcile
    of the environment's cluster finds no drift. Reconcile of all queues ``far``'s own
    reconcile, whose key file cannot be read: reported as an error naming it, nothing raised,
    nothing written."""
    fake, allocation = applied
    far = ClusterFactory(slug="far", credential_path=str(tmp_path / "missing.key"))
    now = timezone.now()
    AllocationFactory(
        team=allocation.team,
        pool=PoolFactory(slug="far-gpu", scheduler=Scheduler.SLURM, cluster=far),
        gpu_model=allocation.gpu_model,
        card_count=3,
        status=AllocationStatus.ACTIVE,
        starts_at=now - timedelta(hours=1),
        ends_at=now + timedelta(days=1),
    )

    assert reconcile_slurm().drifts == []
    report = reconcile_all()
    far_report = reconcile_cluster(far.pk)

    assert (report.drifts, report.errors, report.clusters_queued) == ([], [], 1)
    assert far_report.drifts == []
    assert [error.split(":")[0] for error in far_report.errors] == ["far"]
    assert [lim.cards for lim in fake.get_gpu_limits("vision")] == [2]
    assert SchedulerDrift.objects.count() == 0


def test_a_drift_outside_the_environments_cluster_names_its_cluster():
    """An account exists once per Slurm cluster: the drift subject names the cluster kept as
    data, and stays as it was for the environment's (the scheduler panel looks drifts up by it)."""
    far = ClusterFactory.build(slug="far")
    env = ClusterFactory.build(slug="env-slurm", credential_kind="environment")

    assert cap_drift_subject("vision", "a100", far) == "account vision in far GrpTRES gres/gpu:a100"
    assert cap_drift_subject("vision", "a100", env) == "account vision GrpTRES gres/gpu:a100"
    assert cap_drift_subject("vision", "a100", None) == "account vision GrpTRES gres/gpu:a100"
