"""Against the real Slurm only (22.05, 24.11, 26.05): releasing a reservation a job is tied to
ends it whatever the timing, through the adapter's ``delete_reservation`` (what an
allocation's release calls).

slurmctld keeps whole seconds and refuses an end at or before the start (``Invalid time
specified``), so ``EndTime=now`` alone left the reservation to its planned end when the release
came in its first second, or before its start with a job waiting for it (a pending job ties a
reservation as a running one does: ``Requested reservation is in use``); see
:mod:`scheduler_adapters.slurm.reservations`. Each case: the reservation is read back ending
within a second of the release, it stops holding the node (state ``INACTIVE`` or purged), and
another account's job then starts on the node while the reserved job is still there.

The node is a free one of the partition with at least two cards of one GPU type (the fewest
such cards first: ``gpu-4090-01`` on the test clusters); the reservation holds it ten minutes
at most and is deleted at the end either way. Names start ``hrel-``.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from integration.slurm.slurm_cluster import build_adapter, eventually, slurm_command, unique_account

from scheduler_adapters.errors import SchedulerRejected
from scheduler_adapters.records import JobSpec, JobState, ReservationSpec

pytestmark = pytest.mark.integration

SECOND = timedelta(seconds=1)


def free_node(adapter, partition: str) -> tuple[str, str]:
    """``(host name, GRES type)`` of a node of ``partition`` with no job on it and two or more
    cards of a type no other node of the partition has (so a job asking for that type lands
    there), the fewest cards first."""
    nodes = [n for n in adapter.list_nodes().nodes if partition in n.partitions]
    found = []
    for node in nodes:
        types = [g.model_name for g in node.gpus if g.model_name]
        for gres_type in set(types):
            elsewhere = any(
                g.model_name == gres_type for n in nodes if n is not node for g in n.gpus
            )
            if types.count(gres_type) >= 2 and not elsewhere and not node.gpus_allocated:
                found.append((types.count(gres_type), node.hostname, gres_type))
    assert found, "the test cluster needs a free node with two cards of a type of its own"
    _, hostname, gres_type = min(found)
    return hostname, gres_type


def wait_until(moment: datetime) -> None:
    time.sleep(max(0.0, (moment - datetime.now(UTC)).total_seconds()))


def scancel_account(account: str) -> None:
    """Every job of the account, the ones the adapter never got an id for included (22.05's
    slurmrestd answers 2056 to a job for a reservation that has not started, and queues it)."""
    subprocess.run(
        slurm_command("scancel", f"--account={account}"),
        capture_output=True,
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize(
    "case",
    [
        pytest.param("first-second", id="released-in-its-first-second"),
        pytest.param("not-started", id="released-before-its-start-with-a-job-waiting"),
    ],
)
def test_a_reservation_in_use_released_at_once_stops_holding_its_node(
    case, slurm_settings, cleanup
):
    adapter = build_adapter(slurm_settings, SCONTROL={"ENABLED": True})
    partition = slurm_settings.get("SLURM_PARTITION", "gpu")
    node, gres_type = free_node(adapter, partition)
    user = slurm_settings.get("SLURM_TEST_USERS", "alice").split()[0]
    account, outsider = unique_account("hrel"), unique_account("hrel")
    cleanup.accounts.extend([account, outsider])
    for name in (account, outsider):
        adapter.ensure_account(name, description="release timing", organization="portal")
        adapter.ensure_user_association(name, user, partition)

    # first second: opens 2 s from now; not started: a minute from now (released long before)
    ahead = 2 if case == "first-second" else 60
    start = datetime.now(UTC).replace(microsecond=0) + ahead * SECOND
    spec = ReservationSpec(
        name=f"hrel-{uuid.uuid4().hex[:8]}",
        account=account,
        nodes=(node,),
        starts_at=start,
        ends_at=start + timedelta(minutes=10),
        partition=partition,
    )
    job = dict(user=user, partition=partition, gpus=1, gres_type=gres_type, time_limit_min=5)
    try:
        assert adapter.create_reservation(spec) is True
        try:
            tied = adapter.submit_job(
                JobSpec(account=account, script="#!/bin/sh\nsleep 300\n", **job,
                        reservation=spec.name)
            )  # fmt: skip
            cleanup.jobs.append(tied)
        except SchedulerRejected as refused:  # 22.05, before the start: queued all the same
            assert refused.error_numbers == (2056,), refused
        if case == "first-second":
            wait_until(start + timedelta(milliseconds=50))
        asked_at = datetime.now(UTC)
        assert adapter.delete_reservation(spec.name) is True
        answered_at = datetime.now(UTC)

        record = adapter.get_reservation(spec.name)
        assert record is not None  # the job ties it: ended, not deleted
        assert record.starts_at < record.ends_at <= answered_at.replace(microsecond=0) + SECOND
        if case == "first-second" and answered_at < start + SECOND:
            # all of it in the first second: EndTime=now refused, EndTime=now+1 taken
            assert record.ends_at == start + SECOND
        if case == "not-started":  # moved to the second it was released in
            assert asked_at.replace(microsecond=0) <= record.starts_at < start

        # It stops holding the node within the second, while the tied job is still there.
        eventually(
            lambda: adapter.get_reservation(spec.name),
            lambda r: r is None or r.state == "INACTIVE",
            timeout_s=15,
        )
        other = adapter.submit_job(JobSpec(account=outsider, script="#!/bin/sh\nsleep 60\n", **job))
        cleanup.jobs.append(other)
        eventually(lambda: adapter.get_job(other), lambda j: j.state is JobState.RUNNING)
        (placed,) = [p for p in adapter.running_gpu_jobs(partition) if p.job_id == other]
        assert {slot.node for slot in placed.slots} == {node}
    finally:
        scancel_account(account)
        scancel_account(outsider)

        def gone():  # deleted, or purged once no job is tied to it
            adapter.delete_reservation(spec.name)
            return adapter.get_reservation(spec.name)

        eventually(gone, lambda r: r is None, timeout_s=60)
