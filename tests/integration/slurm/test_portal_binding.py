"""The portal's approval and release applied in the real Slurm (issue #4's "Done when").

Approving a request sets the team account's GrpTRES (seen by ``sacctmgr show assoc`` and by
slurmctld); a job over the limit pends; releasing the allocation sets it to 0 (no limit at all
would be unlimited).
"""

from __future__ import annotations

import pytest
from django.test import override_settings
from integration.slurm.slurm_cluster import eventually, sacctmgr

from pools.capacity.services.allocations import allocation_release
from pools.capacity.services.requests import capacity_request_approve
from pools.clusters import adapters
from pools.common.choices import AllocationStatus
from scheduler_adapters.records import GpuLimit, JobSpec
from scheduler_adapters.registry import slurm_settings_from_env

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture
def portal_on_real_slurm(slurm, slurm_settings, cleanup):
    adapters.reset()
    config = slurm_settings_from_env(slurm_settings)
    with override_settings(SCHEDULERS={"slurm": config}):
        yield slurm
    adapters.reset()


def test_approve_sets_grptres_a_job_over_it_pends_release_zeroes_it(
    portal_on_real_slurm,
    slurm_settings,
    cleanup,
    portal_slurm_team,
    django_capture_on_commit_callbacks,
):
    slurm = portal_on_real_slurm
    pool, a100, team, alice, admin, submit = portal_slurm_team
    account = team.slug
    request = submit(1)

    with django_capture_on_commit_callbacks(execute=True):
        allocation = capacity_request_approve(request=request, actor=admin)
    allocation.refresh_from_db()
    assert allocation.status == AllocationStatus.ACTIVE, allocation.status_reason
    assert allocation.scheduler_binding["grp_tres"] == "gres/gpu:a100=1"
    assoc = sacctmgr("show", "assoc", f"account={account}", "user=", "format=account,grptres")
    assert "gres/gpu:a100=1" in assoc

    # Two one-card jobs as alice under the team's account: one runs, one waits on the limit.
    spec = JobSpec(
        account=account,
        user="alice",
        partition=pool.slurm_partition,
        gres_type="a100",
        gpus=1,
        time_limit_min=5,
        script="#!/bin/sh\nsleep 120\n",
        name="portal-binding",
    )
    first, second = slurm.submit_job(spec), slurm.submit_job(spec)
    cleanup.jobs.extend([first, second])
    states = eventually(
        lambda: (slurm.get_job(first), slurm.get_job(second)),
        lambda pair: (
            pair[0].state.value == "RUNNING"
            and pair[1].state.value == "PENDING"
            and "AssocGrp" in (pair[1].state_reason or "")
        ),
    )
    assert states[1].state_reason.startswith("AssocGrp")

    with django_capture_on_commit_callbacks(execute=True):
        allocation_release(allocation=allocation, actor=alice, reason="done")
    assert slurm.get_gpu_limits(account) == (GpuLimit(account, "gpu", "a100", 0),)
    assert "gres/gpu:a100=0" in sacctmgr(
        "show", "assoc", f"account={account}", "user=", "format=account,grptres"
    )


def test_reconcile_repairs_a_cap_changed_by_hand_and_records_the_drift(
    portal_on_real_slurm, cleanup, portal_slurm_team, cluster, django_capture_on_commit_callbacks
):
    """An operator raises the team's cap with sacctmgr behind the portal's back; reconcile puts
    back what the allocations hold (2 cards) and records expected 2 / found 4."""
    from pools.capacity.models import SchedulerDrift
    from pools.capacity.services.reconcile import reconcile_slurm

    slurm = portal_on_real_slurm
    pool, a100, team, alice, admin, submit = portal_slurm_team
    with django_capture_on_commit_callbacks(execute=True):
        allocation = capacity_request_approve(request=submit(2), actor=admin)
    allocation.refresh_from_db()
    assert allocation.status == AllocationStatus.ACTIVE, allocation.status_reason
    sacctmgr("-i", "modify", "account", f"name={team.slug}", "set", "GrpTRES=gres/gpu:a100=4")
    assert slurm.get_gpu_limits(team.slug) == (GpuLimit(team.slug, "gpu", "a100", 4),)

    report = reconcile_slurm()

    assert report.errors == []
    assert report.nodes_refreshed == len(cluster.hostnames)  # every node of the live listing
    drift = SchedulerDrift.objects.get(team=team)
    assert (drift.expected, drift.found, drift.repaired) == ("2", "4", True)
    assert slurm.get_gpu_limits(team.slug) == (GpuLimit(team.slug, "gpu", "a100", 2),)
    assert "gres/gpu:a100=2" in sacctmgr(
        "show", "assoc", f"account={team.slug}", "user=", "format=account,grptres"
    )

    assert reconcile_slurm().drifts == []  # nothing left to repair
