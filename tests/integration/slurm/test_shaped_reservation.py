"""Issue #20's "Done when", through the portal's own services on the real Slurm: a 1 x 8 request
in one NVLink domain (TP=8), approved in a pool bound to the test cluster, is placed by the
shape check on the cluster's eight-card node; provisioning (the Celery task, eager) reserves
that node for the team's account over the allocation's window; the allocation records the
reservation; a job of that shape (``gres/gpu:<type>:8`` with ``--reservation``) runs in it while
another account's job cannot use the node (it pends; 22.05 refuses it at submit); release, with
the job still running, ends the reservation and zeroes the team's cap; once the job is gone the
reservation is purged and the other account's job starts.

The node is the first of the partition with eight cards of one GRES type, read from the cluster
(``gpu-h100-01``, ``gpu:h100:8``, a DGX H100's eight cards, on ``scripts/services/slurm-modern.sh``
/ ``slurm.sh``); without one, or with a type no 8-card SXM board of the catalogue has, the test
skips, saying why. The pool's inventory is read from the live listing by the portal's reconcile
(as its beat does), so the fitter sees the cluster's real nodes.
Slurm's listing says nothing about NVLink, so the one-domain check rests on the catalogue (an
8-card SXM board is one NVSwitch domain). The reservation is made with ``scontrol`` next to the
cluster (see :mod:`scheduler_adapters.slurm.reservations`) and holds the node for two hours at
most; it is deleted at the end either way.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from integration.slurm.slurm_cluster import eventually, sacctmgr, unique_account

from pools.capacity.models import CapacityRequest
from pools.capacity.services.allocations import allocation_release
from pools.capacity.services.reconcile import reconcile_slurm
from pools.capacity.services.requests import capacity_request_approve
from pools.clusters import adapters
from pools.common.choices import AliasKind, AllocationStatus, RequestStatus, Scheduler, TeamRole
from pools.inventory.models import GpuModel, GpuModelAlias, Node
from scheduler_adapters.errors import SchedulerRejected
from scheduler_adapters.records import GpuLimit, JobSpec, JobState
from scheduler_adapters.registry import slurm_settings_from_env

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

# GRES types of 8-card SXM boards (one NVSwitch domain each, as the catalogue says) -> the model
SXM8 = {
    "h100": "h100_sxm",
    "h200": "h200_sxm",
    "h800": "h800_sxm",
    "a100": "a100_80g_sxm",
    "a800": "a800_80g_sxm",
}


@pytest.fixture
def portal_on_real_slurm(slurm, slurm_settings):
    adapters.reset()
    with override_settings(SCHEDULERS={"slurm": slurm_settings_from_env(slurm_settings)}):
        yield slurm
    adapters.reset()


def test_a_1x8_request_approved_reserves_the_node_and_a_job_of_that_shape_runs_in_it(
    portal_on_real_slurm,
    slurm_settings,
    cluster,
    cleanup,
    django_user_model,
    django_capture_on_commit_callbacks,
):
    from factories import PoolFactory, TeamFactory

    from pools.tenancy.models import Membership

    slurm = portal_on_real_slurm
    partition = slurm_settings.get("SLURM_PARTITION", "gpu")
    node_name, gres = cluster.require_node(partition, cards=8)
    if gres not in SXM8:
        pytest.skip(f"{node_name}'s gpu:{gres} is no 8-card SXM board the catalogue knows")
    board = GpuModel.objects.get(slug=SXM8[gres])
    GpuModelAlias.objects.create(gpu_model=board, value=gres, kind=AliasKind.ADMIN, key=gres)
    pool = PoolFactory(slug="gpu", scheduler=Scheduler.SLURM, slurm_partition=partition)

    # The pool's nodes come from the live listing, as the reconcile beat brings them in.
    assert reconcile_slurm().errors == []
    node = Node.objects.get(hostname=node_name)
    assert node.pool == pool
    assert sorted(node.gpus.filter(gpu_model=board).values_list("index", flat=True))[:8] == list(
        range(8)
    )

    account = unique_account("pt")
    cleanup.accounts.append(account)
    team = TeamFactory(slug=account)
    alice = django_user_model.objects.create_user("alice", password="x")
    Membership.objects.create(team=team, user=alice, role=TeamRole.MANAGER)
    admin = django_user_model.objects.create_user("admin", password="x", is_staff=True)
    now = timezone.now().replace(microsecond=0)
    request = CapacityRequest.objects.create(
        team=team,
        requested_by=alice,
        workload_kind="training",
        pool=pool,
        gpu_model=board,
        card_count=8,
        cards_per_node=8,
        node_count=1,
        one_nvlink_domain=True,  # TP=8: from the catalogue, an 8-card SXM board is one domain
        starts_at=now,
        ends_at=now + timedelta(hours=2),
        justification="TP=8 on one node",
        status=RequestStatus.SUBMITTED,
    )

    reservation = None
    try:
        with django_capture_on_commit_callbacks(execute=True):  # provisioning runs (eager)
            allocation = capacity_request_approve(request=request, actor=admin)
        allocation.refresh_from_db()
        reservation = allocation.scheduler_binding.get("reservation")

        assert allocation.status == AllocationStatus.ACTIVE, allocation.status_reason
        assert allocation.placement == [{"node": node_name, "gpus": list(range(8))}]
        assert reservation == f"portal-alloc-{allocation.pk}"
        assert allocation.scheduler_binding["reserved_nodes"] == [node_name]
        assert allocation.scheduler_binding["grp_tres"] == f"gres/gpu:{gres}=8"
        record = slurm.get_reservation(reservation)
        assert (record.accounts, record.nodes) == ((account,), (node_name,))
        assert (record.starts_at, record.ends_at) == (now, now + timedelta(hours=2))
        assert slurm.get_gpu_limits(account) == (GpuLimit(account, partition, gres, 8),)

        # Another account (no cap at all) cannot start on the reserved node.
        outsider = unique_account("pt")
        cleanup.accounts.append(outsider)
        slurm.ensure_account(outsider, description="outsider", organization="portal")
        slurm.ensure_user_association(outsider, "bob", partition)
        shape = {"partition": partition, "gres_type": gres, "script": "#!/bin/sh\nsleep 120\n"}

        def outsider_job() -> int:
            job_id = slurm.submit_job(JobSpec(account=outsider, user="bob", gpus=1, **shape))
            cleanup.jobs.append(job_id)
            return job_id

        try:
            other = outsider_job()
        except SchedulerRejected as refused:  # 22.05 refuses it at submit; 24.11+ let it pend
            # 2068 "Required node not available (down, drained or reserved)"
            assert refused.error_numbers == (2068,), refused
            other = None
        else:
            held = eventually(  # once slurmctld has looked at it: a reason other than None
                lambda: slurm.get_job(other), lambda j: j.state_reason not in {None, "", "None"}
            )
            assert held.state is JobState.PENDING, held

        job_id = slurm.submit_job(
            JobSpec(account=account, user="alice", gpus=8, reservation=reservation, **shape)
        )
        cleanup.jobs.append(job_id)
        job = eventually(lambda: slurm.get_job(job_id), lambda j: j.state is JobState.RUNNING)
        assert job.gpus_allocated == {gres: 8}
        (placed,) = [p for p in slurm.running_gpu_jobs(partition) if p.job_id == job_id]
        assert {slot.node for slot in placed.slots} == {node_name}
        assert sorted(slot.index for slot in placed.slots) == list(range(8))
        if other is not None:
            assert slurm.get_job(other).state is JobState.PENDING

        # Released while the job runs: slurmctld will not delete a reservation in use, so it is
        # ended now (in its first second, which a quiet machine can reach here, a second after
        # its start: slurmctld keeps whole seconds and refuses an end at the start; see
        # test_release_timing.py); the team's cap is 0 at once, and the node is free once the
        # job is gone.
        with django_capture_on_commit_callbacks(execute=True):
            allocation_release(allocation=allocation, actor=alice, reason="done")
        released = timezone.now().replace(microsecond=0)
        ended = slurm.get_reservation(reservation)  # State turns INACTIVE on slurmctld's next pass
        assert (ended.accounts, ended.nodes) == ((account,), (node_name,))
        assert now < ended.ends_at <= released + timedelta(seconds=1)
        assert slurm.get_gpu_limits(account) == (GpuLimit(account, partition, gres, 0),)
        assert f"gres/gpu:{gres}=0" in sacctmgr(
            "show", "assoc", f"account={account}", "user=", "format=account,grptres"
        )
        # Releasing cancels no job: the portal sends no scancel. slurmctld itself ends a job
        # still running in a reservation that has ended, on its next pass (slurm.conf
        # ResvOverRun, default 0 minutes): TIMEOUT, at or after the reservation's end, never
        # CANCELLED (seen on 22.05 when that pass came before this read).
        after = slurm.get_job(job_id)
        if after.state is JobState.RUNNING:
            slurm.cancel_job(job_id)
        else:
            assert after.state is JobState.TIMEOUT, after
            assert after.end is not None and after.end >= ended.ends_at, after
        eventually(lambda: slurm.get_reservation(reservation), lambda r: r is None, timeout_s=60)
        other = other or outsider_job()
        eventually(lambda: slurm.get_job(other), lambda j: j.state is JobState.RUNNING)
        slurm.cancel_job(other)
    finally:
        if reservation:
            slurm.delete_reservation(reservation)
