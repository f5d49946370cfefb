"""Against the real Slurm only: what sacctmgr and slurmctld see after the adapter's changes,
and a job that ends by itself read back from accounting."""

import math
from datetime import UTC, datetime, timedelta

import pytest
from integration.slurm.slurm_cluster import (
    build_adapter,
    enforced_cards,
    eventually,
    sacctmgr,
    unique_account,
)

from scheduler_adapters.records import GpuLimit, JobSpec, JobState

pytestmark = pytest.mark.integration


def grp_tres_in_slurmdbd(account: str) -> str:
    return sacctmgr("show", "assoc", "where", f"account={account}", "user=", "format=grptres")


@pytest.mark.parametrize("through", ["rest", "sacctmgr"])
def test_limit_changes_reach_slurmdbd_and_the_controller(
    slurm, slurm_settings, cleanup, through, cluster
):
    cluster.require("gpu", "a100", 1)
    cluster.require("gpu", "rtx4090", 1)
    adapter = (
        slurm if through == "rest" else build_adapter(slurm_settings, SACCTMGR={"ENABLED": True})
    )
    account = unique_account("lim")
    cleanup.accounts.append(account)
    adapter.ensure_account(account, description="limits", organization="portal")

    adapter.set_gpu_limit(GpuLimit(account, "gpu", "a100", 2))
    adapter.set_gpu_limit(GpuLimit(account, "gpu", "rtx4090", 1))

    assert grp_tres_in_slurmdbd(account) == "gres/gpu:a100=2,gres/gpu:rtx4090=1"
    assert enforced_cards(account, "a100") == 2
    assert enforced_cards(account, "rtx4090") == 1

    adapter.remove_gpu_limit(account, "gpu", "a100")

    assert grp_tres_in_slurmdbd(account) == "gres/gpu:rtx4090=1"
    assert enforced_cards(account, "a100") == math.inf
    assert enforced_cards(account, "rtx4090") == 1

    adapter.remove_gpu_limit(account, "gpu", "rtx4090")  # the last entry: a bare REST clear
    # would leave slurmctld enforcing 1 card
    assert grp_tres_in_slurmdbd(account) == ""
    assert enforced_cards(account, "rtx4090") == math.inf


def test_a_finished_job_is_read_back_from_accounting(slurm, cleanup, cluster):
    cluster.require("gpu", "rtx4090", 1)
    account = unique_account("acct")
    cleanup.accounts.append(account)
    slurm.ensure_account(account, description="accounting", organization="portal")
    slurm.ensure_user_association(account, "bob", "gpu")
    window_start = datetime.now(UTC) - timedelta(seconds=5)

    job_id = slurm.submit_job(
        JobSpec(
            account=account,
            user="bob",
            partition="gpu",
            script="#!/bin/bash\nsleep 2\n",
            gpus=1,
            gres_type="rtx4090",
            name="sleep-2",
        )
    )
    cleanup.jobs.append(job_id)

    (record,) = eventually(
        lambda: slurm.jobs_from_accounting(
            window_start, datetime.now(UTC) + timedelta(minutes=1), accounts=[account]
        ),
        lambda found: len(found) == 1 and found[0].state is JobState.COMPLETED,
    )
    assert (record.job_id, record.name, record.user, record.partition) == (
        job_id,
        "sleep-2",
        "bob",
        "gpu",
    )
    assert record.gpus_requested == {"rtx4090": 1}
    assert record.gpus_allocated == {"rtx4090": 1}
    assert 2 <= record.elapsed_s <= 10
    assert record.elapsed_s == int((record.end - record.start).total_seconds())
    assert record.card_seconds == {"rtx4090": record.elapsed_s}

    # slurmctld still holds it (MinJobAge=300). slurmdbd has the job's end as soon as it ends,
    # while slurmctld may still show it COMPLETING (its nodes have not reported the end yet;
    # seen right after a cancel on 22.05, 24.11 and 26.05): wait for the state it settles in.
    live = eventually(lambda: slurm.get_job(job_id), lambda j: j.state is not JobState.COMPLETING)
    assert (live.state, live.elapsed_s, live.gpus_allocated) == (
        JobState.COMPLETED,
        record.elapsed_s,
        {"rtx4090": 1},
    )
