"""GrpTRESMins (a budget's remaining card-minutes) on the real Slurm tiers: written through
the adapter, read back by slurmdbd (sacctmgr) and slurmctld (``scontrol show assoc_mgr``).

What the test clusters showed (24.11.5 with v0.0.42, 26.05 with v0.0.45, 22.05.8 with
v0.0.38, December 2026):

- REST reads GrpTRESMins at ``max.tres.group.minutes`` in every version.
- A REST modify clears a list its body leaves out (24.11, 26.05): a GrpTRES write without the
  minutes dropped a GrpTRESMins of 1200, and a minutes write without ``total`` dropped the
  GrpTRES. Hence every write sends both, and the test below changes one and reads the other.
- An unknown TRES in a modify is answered 200 with no error and clears every limit, so the
  adapter checks ``/tres`` first and refuses.
- 22.05 writes it through the sacctmgr fallback only (REST modifies are dropped there).
- slurmctld counts usage against it with decay: both modern clusters run
  ``PriorityType=priority/multifactor`` with ``PriorityDecayHalfLife=7-00:00:00`` and no
  ``NoDecay`` QOS flag, so usage older than the period still counts, halved per week (the
  portal's remaining minutes are therefore a ceiling Slurm may reach early, never late);
  22.05's test cluster runs ``priority/basic``, which stores the limit but keeps no usage.
"""

import re
import subprocess
import uuid

import pytest
from integration.slurm.slurm_cluster import build_adapter, sacctmgr, slurm_command

from scheduler_adapters.errors import SchedulerRejected
from scheduler_adapters.records import GpuLimit

pytestmark = pytest.mark.integration


def in_slurmdbd(account: str) -> tuple[str, str]:
    """``(GrpTRES, GrpTRESMins)`` of the account's own association as sacctmgr prints them."""
    line = sacctmgr(
        "show", "assoc", "where", f"account={account}", "user=", "format=grptres,grptresmins"
    )
    tres, _, minutes = line.partition("|")
    return tres, minutes


def enforced_minutes(account: str, tres: str) -> str:
    """The GrpTRESMins slurmctld holds for ``tres``: a number or ``N`` (none)."""
    done = subprocess.run(
        slurm_command("scontrol", "show", "assoc_mgr", f"accounts={account}", "flags=assoc"),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    lines = done.stdout.splitlines()
    for index, line in enumerate(lines):
        if f"Account={account} UserName= " in line:
            for detail in lines[index + 1 :]:
                if detail.strip().startswith("GrpTRESMins="):
                    match = re.search(rf"(?:^|[=,]){re.escape(tres)}=(\w+)\(", detail.strip())
                    assert match, detail
                    return match[1]
    raise AssertionError(f"slurmctld has no association for {account}: {done.stdout}")


@pytest.mark.parametrize("through", ["rest", "sacctmgr"])
def test_budget_minutes_are_written_kept_and_read_back(
    slurm, slurm_settings, cleanup, cluster, through
):
    cluster.require("gpu", "a100", 1)
    cluster.require("gpu", "rtx4090", 1)
    adapter = (
        slurm if through == "rest" else build_adapter(slurm_settings, SACCTMGR={"ENABLED": True})
    )
    account = f"hgrpt_{uuid.uuid4().hex[:10]}"
    cleanup.accounts.append(account)
    adapter.ensure_account(account, description="hgrpt budget", organization="portal")
    adapter.set_gpu_limit(GpuLimit(account, "gpu", "a100", 2))
    if through == "rest" and adapter.api_version == "v0.0.38":
        # 22.05 drops REST modifies; without the fallback the portal alone enforces the budget
        with pytest.raises(SchedulerRejected, match="sacctmgr"):
            adapter.set_gpu_minutes(account, "a100", 120_000)
        assert in_slurmdbd(account) == ("gres/gpu:a100=2", "")
        return

    # 2,000 card-hours left = 120,000 card-minutes
    assert adapter.set_gpu_minutes(account, "a100", 120_000) is True
    assert in_slurmdbd(account) == ("gres/gpu:a100=2", "gres/gpu:a100=120000")
    assert enforced_minutes(account, "gres/gpu:a100") == "120000"
    assert adapter.get_gpu_minutes(account) == {"gres/gpu:a100": 120_000}
    assert adapter.set_gpu_minutes(account, "a100", 120_000) is False  # unchanged: no write

    # a GrpTRES write keeps the minutes (a REST body without them would clear them)
    adapter.set_gpu_limit(GpuLimit(account, "gpu", "rtx4090", 1))
    assert in_slurmdbd(account) == (
        "gres/gpu:a100=2,gres/gpu:rtx4090=1",
        "gres/gpu:a100=120000",
    )

    # a new period: 1,500 card-hours = 90,000 minutes; a second type alongside
    adapter.set_gpu_minutes(account, "a100", 90_000)
    adapter.set_gpu_minutes(account, "rtx4090", 600)
    assert in_slurmdbd(account)[1] == "gres/gpu:a100=90000,gres/gpu:rtx4090=600"
    assert enforced_minutes(account, "gres/gpu:a100") == "90000"

    # a TRES the cluster does not account is refused and changes nothing
    with pytest.raises(SchedulerRejected):
        adapter.set_gpu_minutes(account, "hgrptnope", 5)
    assert in_slurmdbd(account) == (
        "gres/gpu:a100=2,gres/gpu:rtx4090=1",
        "gres/gpu:a100=90000,gres/gpu:rtx4090=600",
    )

    # dropping both minute limits keeps GrpTRES
    assert adapter.set_gpu_minutes(account, "a100", None) is True
    assert adapter.set_gpu_minutes(account, "rtx4090", None) is True
    assert in_slurmdbd(account) == ("gres/gpu:a100=2,gres/gpu:rtx4090=1", "")
    assert enforced_minutes(account, "gres/gpu:a100") == "N"


def test_the_usage_slurm_counts_is_read(slurm, cleanup):
    """sshare's usage of a fresh account is 0 card-minutes on every GPU TRES (24.11, 26.05);
    22.05's slurmrestd has no shares endpoint, so it is unknown (``None``)."""
    account = f"hgrpt_{uuid.uuid4().hex[:10]}"
    cleanup.accounts.append(account)
    slurm.ensure_account(account, description="hgrpt usage", organization="portal")
    used = slurm.get_gpu_minutes_used(account)
    if slurm.api_version == "v0.0.38":
        assert used is None
        return
    assert used is not None and used.get("gres/gpu:a100") == 0.0
    assert set(used.values()) == {0.0}
