"""Waiting work against the real Slurm (every tier: 24.11, 26.05, 22.05): jobs made to pend
on ``AssocGrpGRES`` (an ``hpend_`` account with GrpTRES gres/gpu:<type>=1 and one card
running) and on ``Resources`` (all cards of the one node that has them asked for while one of
them is held), read with their real reason codes and stored with the portal's explanation."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from integration.slurm.slurm_cluster import eventually

from pools.waiting import services
from pools.waiting.models import PendingWork
from scheduler_adapters.records import GpuLimit, JobSpec, JobState

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

SLEEP = "#!/bin/bash\nsleep 300\n"


def hpend_account(slurm, cleanup, partition: str) -> str:
    account = f"hpend_{uuid.uuid4().hex[:10]}"
    cleanup.accounts.append(account)
    slurm.ensure_account(account, description="waiting work", organization="portal")
    slurm.ensure_user_association(account, "alice", partition)
    return account


def submit(slurm, cleanup, account, partition, gres_type, gpus, name) -> int:
    job_id = slurm.submit_job(
        JobSpec(
            account=account,
            user="alice",
            partition=partition,
            script=SLEEP,
            gpus=gpus,
            gres_type=gres_type,
            name=name,
            time_limit_min=7,
        )
    )
    cleanup.jobs.append(job_id)
    return job_id


def _one_node_type(cluster, partition: str) -> tuple[str, int]:
    """A GPU type all of whose cards in ``partition`` sit on one node with 2 or more of them:
    asking for all of them while one is held can only wait for Resources."""
    nodes = cluster.in_partition(partition)
    for gres_type in sorted({t for node in nodes for t in node.gpus}):
        total = sum(node.gpus[gres_type] for node in nodes)
        if total >= 2 and cluster.most_on_one_node(partition, gres_type) == total:
            return gres_type, total
    pytest.skip(f"no GPU type of partition {partition} sits whole on one node")


def test_a_job_over_the_team_cap_is_explained_with_the_holder_and_its_end(
    slurm, cleanup, cluster, slurm_settings, monkeypatch
):
    from factories import TeamFactory, WaitingWatchFactory

    partition = slurm_settings.get("SLURM_PARTITION", "gpu")
    gres_type, _ = _one_node_type(cluster, partition)
    account = hpend_account(slurm, cleanup, partition)
    slurm.set_gpu_limit(GpuLimit(account, partition, gres_type, 1))
    holder = submit(slurm, cleanup, account, partition, gres_type, 1, "hpend-holder")
    eventually(lambda: slurm.get_job(holder), lambda job: job.state is JobState.RUNNING)
    capped = submit(slurm, cleanup, account, partition, gres_type, 1, "hpend-capped")

    queue = eventually(
        lambda: slurm.job_queue(accounts=[account]),
        lambda q: [j.reason for j in q.pending] == ["AssocGrpGRES"],
    )
    (pending,) = queue.pending
    assert (pending.job_id, dict(pending.gpus_requested)) == (capped, {gres_type: 1})
    (running,) = queue.running
    started = slurm.get_job(holder).start  # read through another endpoint
    assert running.job_id == holder
    assert running.expected_end == started + timedelta(minutes=7)  # the time limit

    team = TeamFactory(slug=account)
    WaitingWatchFactory(team=team)
    monkeypatch.setattr(services, "scheduler_adapter", lambda s: slurm if s == "slurm" else None)
    report = services.pending_work_refresh()

    assert report.errors == {}
    row = PendingWork.objects.get(team=team)
    end = running.expected_end
    assert (row.ref, row.reason_code, row.kind, row.translated) == (
        str(capped), "AssocGrpGRES", "cap_full", True,
    )  # fmt: skip
    first_end = (
        f"{end:%H:%M} UTC" if end.date() == row.read_at.date() else f"{end.day} {end:%b %H:%M} UTC"
    )
    assert row.explanation == (
        f"Your team's cap of 1 card is full — 1 card held by job {holder}; "
        f"the first ends at {first_end}"
    )


def test_a_job_asking_for_every_card_of_a_node_waits_for_resources(
    slurm, cleanup, cluster, slurm_settings
):
    partition = slurm_settings.get("SLURM_PARTITION", "gpu")
    gres_type, total = _one_node_type(cluster, partition)
    account = hpend_account(slurm, cleanup, partition)
    holder = submit(slurm, cleanup, account, partition, gres_type, 1, "hpend-hold-one")
    eventually(lambda: slurm.get_job(holder), lambda job: job.state is JobState.RUNNING)
    whole = submit(slurm, cleanup, account, partition, gres_type, total, "hpend-whole-node")

    queue = eventually(
        lambda: slurm.job_queue(accounts=[account]),
        lambda q: [j.reason for j in q.pending] == ["Resources"],
    )
    (pending,) = queue.pending
    assert (pending.job_id, pending.name, pending.partition) == (
        whole,
        "hpend-whole-node",
        partition,
    )
    assert dict(pending.gpus_requested) == {gres_type: total}
    assert pending.time_limit_min == 7
    assert [j.job_id for j in queue.running] == [holder]
