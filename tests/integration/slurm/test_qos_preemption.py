"""Workload classes as Slurm QOS on the real cluster (issue #36's "Done when"): the portal writes a
batch and a production QOS (production may preempt batch) and an account's QOS list through
slurmrestd, reads them back, and then a production job really preempts a batch job that holds
the cards it needs.

Needs ``PreemptType=preempt/qos`` in slurm.conf (``scripts/services/slurm-lib.sh``). Names start
with ``hqos`` so that nothing collides with other tests; the QOS are deleted afterwards.
"""

from __future__ import annotations

import time
import uuid

import pytest
from integration.slurm.slurm_cluster import build_adapter, eventually, sacctmgr, slurm_command

from scheduler_adapters.errors import NotFound, SchedulerError, SchedulerRejected
from scheduler_adapters.records import AccountQos, GpuLimit, JobSpec, JobState, QosSpec

pytestmark = pytest.mark.integration


@pytest.fixture
def qos_names(slurm, cleanup):
    """A fresh batch / production QOS name pair; both QOS are deleted after the test (after
    ``cleanup`` has cancelled the jobs and deleted the accounts that use them)."""
    suffix = uuid.uuid4().hex[:6]
    names = (f"hqos-batch-{suffix}", f"hqos-prod-{suffix}")
    yield names
    cleanup.run()
    cleanup.jobs.clear()
    cleanup.accounts.clear()
    for _ in range(20):  # a QOS still named by a completing job cannot go yet
        if "Job(s) active" not in sacctmgr("-i", "delete", "qos", f"name={','.join(names)}"):
            break
        time.sleep(0.5)


def _writer(slurm, slurm_settings):
    """The adapter that may change an account's QOS list: the REST one, except on 22.05, where
    the change goes through sacctmgr (the REST one refuses it, as checked below)."""
    if slurm.api_version == "v0.0.38":
        return build_adapter(slurm_settings, SACCTMGR={"ENABLED": True})
    return slurm


def _assoc_field(account: str, field: str) -> str:
    return sacctmgr("show", "assoc", f"account={account}", "user=", f"format={field}")


def test_qos_written_read_back_and_idempotent(slurm, slurm_settings, cleanup, qos_names):
    batch_name, prod_name = qos_names
    batch = QosSpec(batch_name, 10, (), "CANCEL", description="hqos batch")
    prod = QosSpec(prod_name, 1000, (batch_name,), "REQUEUE", description="hqos production")

    with pytest.raises(NotFound):  # what it preempts must exist first
        slurm.ensure_qos(prod)
    assert slurm.get_qos(prod_name) is None
    assert slurm.ensure_qos(batch) is True
    assert slurm.ensure_qos(prod) is True
    assert slurm.ensure_qos(prod) is False  # nothing to change

    assert slurm.get_qos(prod_name) == QosSpec(
        prod_name, 1000, (batch_name,), "REQUEUE", description="hqos production"
    )
    # sacctmgr, not the adapter, as the independent witness
    shown = sacctmgr(
        "show", "qos", f"name={prod_name},{batch_name}", "format=name,priority,preempt,preemptmode"
    )
    assert sorted(shown.splitlines()) == sorted(
        [f"{batch_name}|10||cancel", f"{prod_name}|1000|{batch_name}|requeue"]
    )

    # a change is written: priority 1000 -> 2000, read back
    assert slurm.ensure_qos(QosSpec(prod_name, 2000, (batch_name,), "REQUEUE")) is True
    assert f"{prod_name}|2000" in sacctmgr(
        "show", "qos", f"name={prod_name}", "format=name,priority"
    )


def test_account_qos_list_and_default_keep_the_gpu_limit(
    slurm, slurm_settings, cleanup, qos_names, a100_partition
):
    batch_name, prod_name = qos_names
    slurm.ensure_qos(QosSpec(batch_name, 10, (), "REQUEUE"))
    slurm.ensure_qos(QosSpec(prod_name, 1000, (batch_name,), "REQUEUE"))
    account = f"hqos-{uuid.uuid4().hex[:8]}"
    cleanup.accounts.append(account)
    slurm.ensure_account(account, description="hqos", organization="hqos")
    slurm.set_gpu_limit(GpuLimit(account, a100_partition, "a100", 3))
    wanted = AccountQos(account, (batch_name, prod_name), batch_name)

    if slurm.api_version == "v0.0.38":
        with pytest.raises(SchedulerRejected, match="sacctmgr fallback"):
            slurm.set_account_qos(wanted)
    writer = _writer(slurm, slurm_settings)
    with pytest.raises(NotFound):
        writer.set_account_qos(AccountQos(account, (f"hqos-none-{uuid.uuid4().hex[:6]}",)))
    assert writer.set_account_qos(wanted) is True
    assert writer.set_account_qos(wanted) is False

    assert slurm.get_account_qos(account) == wanted
    assert _assoc_field(account, "qos,defaultqos") == f"{batch_name},{prod_name}|{batch_name}"
    # the QOS write sent the GrpTRES along: 24.11/26.05 would have cleared it otherwise
    assert slurm.get_gpu_limits(account) == (GpuLimit(account, a100_partition, "a100", 3),)
    assert _assoc_field(account, "grptres") == "gres/gpu:a100=3"

    # narrowing to production only, default production
    assert writer.set_account_qos(AccountQos(account, (prod_name,), prod_name)) is True
    assert _assoc_field(account, "qos,defaultqos") == f"{prod_name}|{prod_name}"


def _job_history(job_id: int) -> list[str]:
    """sacct's records of the job, requeued runs included (``--duplicates``):
    ``state|reason|restarts``... one line per run; the independent witness of what happened."""
    import subprocess

    done = subprocess.run(
        slurm_command(
            "sacct",
            "-j",
            str(job_id),
            "--duplicates",
            "-X",
            "-n",
            "-P",
            "-o",
            "jobid,state,reason,qos,start,end",
        ),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return [line for line in done.stdout.splitlines() if line.strip()]


@pytest.mark.parametrize("mode", ["REQUEUE", "CANCEL"])
def test_a_production_job_preempts_a_batch_job_on_the_real_cluster(
    slurm, slurm_settings, cleanup, qos_names, a100_partition, cluster, mode
):
    """Batch fills the 4 A100 of one node; a production job asking for the same 4 cards makes
    slurmctld preempt the batch job by the batch QOS's PreemptMode (REQUEUE: back to pending,
    to run again; CANCEL: ended as PREEMPTED) and start itself."""
    batch_name, prod_name = qos_names
    slurm.ensure_qos(QosSpec(batch_name, 10, (), mode, description="hqos batch"))
    slurm.ensure_qos(QosSpec(prod_name, 1000, (batch_name,), "REQUEUE", description="hqos prod"))
    account = f"hqos-{uuid.uuid4().hex[:8]}"
    cleanup.accounts.append(account)
    slurm.ensure_account(account, description="hqos", organization="hqos")
    slurm.ensure_user_association(account, "alice", a100_partition)
    _writer(slurm, slurm_settings).set_account_qos(
        AccountQos(account, (batch_name, prod_name), batch_name)
    )
    cards = cluster.most_on_one_node(a100_partition, "a100")
    spec = dict(
        account=account,
        user="alice",
        partition=a100_partition,
        gres_type="a100",
        gpus=cards,
        time_limit_min=10,
    )
    batch_job = slurm.submit_job(
        JobSpec(**spec, qos=batch_name, name="hqos-batch", script="#!/bin/sh\nsleep 300\n")
    )
    cleanup.jobs.append(batch_job)
    started = eventually(
        lambda: slurm.get_job(batch_job), lambda j: j.state == JobState.RUNNING, timeout_s=90
    )
    assert started.gpus_allocated == {"a100": cards}

    submitted = time.monotonic()
    prod_job = slurm.submit_job(
        JobSpec(**spec, qos=prod_name, name="hqos-prod", script="#!/bin/sh\nsleep 60\n")
    )
    cleanup.jobs.append(prod_job)
    seen: list[tuple[float, str, str | None, str, str | None]] = []

    def both():
        batch, prod = slurm.get_job(batch_job), slurm.get_job(prod_job)
        row = (
            round(time.monotonic() - submitted, 1),
            str(batch.state),
            batch.state_reason,
            str(prod.state),
            prod.state_reason,
        )
        if not seen or seen[-1][1:] != row[1:]:
            seen.append(row)
        return batch, prod

    batch, prod = eventually(
        both,
        lambda pair: pair[1].state == JobState.RUNNING and pair[0].state != JobState.RUNNING,
        timeout_s=90,
    )
    release = slurm_settings.get("SLURM_RELEASE")
    print(f"\npreemption ({mode}) on Slurm {release} ({slurm.api_version}):")
    for row in seen:
        print("  t+{:5.1f}s batch {} ({}) / production {} ({})".format(*row))
    history = _job_history(batch_job)
    print("  sacct of the batch job:", *history, sep="\n    ")

    assert prod.gpus_allocated == {"a100": cards}
    if mode == "REQUEUE":  # back to pending, to run again when the cards come back
        assert batch.state in {JobState.PENDING, JobState.REQUEUED}, batch
    else:  # ended for good, as preempted (not cancelled by anyone, not failed)
        assert batch.state == JobState.PREEMPTED, batch
    # the accounting record of the run that held the cards says it was preempted
    assert any(line.split("|")[1] == "PREEMPTED" for line in history), history


def test_account_qos_on_an_unknown_account_is_not_found(slurm, slurm_settings, qos_names):
    batch_name, _ = qos_names
    slurm.ensure_qos(QosSpec(batch_name, 10, (), "REQUEUE"))
    with pytest.raises(NotFound):
        _writer(slurm, slurm_settings).set_account_qos(
            AccountQos(f"hqos-none-{uuid.uuid4().hex[:6]}", (batch_name,))
        )
    with pytest.raises(SchedulerError):
        slurm.get_account_qos(f"hqos-none-{uuid.uuid4().hex[:6]}")
