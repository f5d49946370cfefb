"""The sacctmgr fallback's command line and how its failures are read."""

import subprocess

import pytest

from scheduler_adapters.errors import (
    NotFound,
    SchedulerAuthError,
    SchedulerError,
    SchedulerRejected,
    SchedulerUnavailable,
)
from scheduler_adapters.slurm.sacctmgr import SacctmgrFallback


def runner(returncode=0, stdout="", stderr="", raises=None):
    seen = []

    def run(command, **kwargs):
        seen.append((command, kwargs))
        if raises is not None:
            raise raises
        return subprocess.CompletedProcess(command, returncode, stdout, stderr)

    run.seen = seen
    return run


def test_command_line():
    run = runner(stdout=" Modified account associations...\n  C = portal A = team-a of root\n")
    fallback = SacctmgrFallback(cluster="portal", executable="/usr/bin/sacctmgr", run=run)

    fallback.set_grp_tres("team-a", {"gres/gpu:a100": 2, "gres/gpu:rtx4090": -1}, operation="op")

    ((command, kwargs),) = run.seen
    assert command == [
        "/usr/bin/sacctmgr",
        "--immediate",
        "modify",
        "account",
        "where",
        "name=team-a",
        "cluster=portal",
        "set",
        "GrpTRES=gres/gpu:a100=2,gres/gpu:rtx4090=-1",
    ]
    assert kwargs["timeout"] == 30.0 and kwargs["check"] is False


def test_no_changes_run_nothing():
    run = runner()
    SacctmgrFallback(cluster="portal", run=run).set_grp_tres("team-a", {}, operation="op")
    assert run.seen == []


@pytest.mark.parametrize(
    "run, error",
    [
        (runner(1, stdout=" Nothing modified\n"), NotFound),
        (
            runner(1, stderr="sacctmgr: error: Unable to connect to database\n"),
            SchedulerUnavailable,
        ),
        (runner(1, stderr="Access/permission denied\n"), SchedulerAuthError),
        (runner(1, stderr="Unknown option: GrpTRES=bogus\n"), SchedulerRejected),
        (runner(raises=subprocess.TimeoutExpired("sacctmgr", 30)), SchedulerUnavailable),
        (runner(raises=FileNotFoundError("sacctmgr")), SchedulerError),
    ],
)
def test_failures(run, error):
    with pytest.raises(error) as caught:
        SacctmgrFallback(cluster="portal", run=run).set_grp_tres(
            "team-a", {"gres/gpu:a100": 1}, operation="set_gpu_limit"
        )
    assert caught.value.operation == "set_gpu_limit"
