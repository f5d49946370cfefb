"""Against the real Slurm only: a whole-node shape is placed by the fitter on the cluster's own
nodes, reserved for a team's account with ``scontrol``, and a job of that shape runs inside the
reservation on the node the fitter chose.

Here the adapter alone, on the partition's a100 nodes (the test clusters': 1 node × its 4
cards; a cluster without gpu:a100 skips, saying so); the issue's 1 × 8 through the portal's
approval and provisioning, on a node with eight cards of one type, is
``test_shaped_reservation.py``. ``scontrol`` runs next to the cluster
``SLURM_TEST_ENV`` describes (its ``SLURM_COMMAND_PREFIX`` or ``SLURM_MODERN_ROOT``, else the
machine's own client), and the
reservation holds its node for about ten minutes at most; it is deleted at the end either way.
"""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from integration.slurm.slurm_cluster import build_adapter, eventually, unique_account

from pools.capacity.placement import NodeFree, Shape, fit_shape
from scheduler_adapters.records import JobSpec, JobState, ReservationSpec

pytestmark = pytest.mark.integration


def test_a_whole_node_shape_is_reserved_and_a_job_of_that_shape_runs_in_it(
    slurm_settings, a100_partition, cleanup
):
    # scontrol runs next to the cluster: through the env file's prefix (a chroot, ssh), or the
    # machine's own client for the machine's own cluster (22.05).
    adapter = build_adapter(slurm_settings, SCONTROL={"ENABLED": True})
    partition = a100_partition
    nodes = [
        node
        for node in adapter.list_nodes().nodes
        if partition in node.partitions and any(g.model_name == "a100" for g in node.gpus)
    ]
    assert nodes, "the test cluster needs a node with gpu:a100 cards"
    cards = max(len(node.gpus) for node in nodes)
    free = [
        NodeFree(node.hostname, frozenset(g.index for g in node.gpus if g.model_name == "a100"))
        for node in nodes
        if not node.gpus_allocated  # nothing else is running there now
    ]
    fit = fit_shape(free, Shape(cards_per_node=cards, nodes=1))
    assert fit.fits, fit.message()
    (chosen,) = fit.nodes

    account = unique_account("rsv")
    cleanup.accounts.append(account)
    adapter.ensure_account(account, description="reservation", organization="portal")
    user = slurm_settings.get("SLURM_TEST_USERS", "alice").split()[0]
    adapter.ensure_user_association(account, user, partition)
    now = datetime.now(UTC).replace(microsecond=0)
    reservation = ReservationSpec(
        name=f"portal-{uuid.uuid4().hex[:8]}",
        account=account,
        nodes=(chosen,),
        starts_at=now,
        ends_at=now + timedelta(minutes=10),
        partition=partition,
    )
    try:
        assert adapter.create_reservation(reservation) is True
        assert adapter.create_reservation(reservation) is False  # idempotent
        record = adapter.get_reservation(reservation.name)
        assert (record.accounts, record.nodes) == ((account,), (chosen,))

        job_id = adapter.submit_job(
            JobSpec(
                account=account,
                user=user,
                partition=partition,
                script="#!/bin/bash\nsleep 60\n",
                gpus=cards,
                gres_type="a100",
                name="shape-in-reservation",
                reservation=reservation.name,
            )
        )
        cleanup.jobs.append(job_id)
        job = eventually(lambda: adapter.get_job(job_id), lambda j: j.state is JobState.RUNNING)
        assert job.gpus_allocated == {"a100": cards}
        (placed,) = [p for p in adapter.running_gpu_jobs(partition) if p.job_id == job_id]
        assert {slot.node for slot in placed.slots} == {chosen}
        adapter.cancel_job(job_id)
    finally:
        adapter.delete_reservation(reservation.name)
    assert adapter.get_reservation(reservation.name) is None
    assert adapter.delete_reservation(reservation.name) is False
