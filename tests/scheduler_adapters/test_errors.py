"""Scheduler errors carry their data and say whether a retry can help."""

from scheduler_adapters.errors import (
    NotFound,
    RemoteError,
    SchedulerAuthError,
    SchedulerRejected,
    SchedulerUnavailable,
)


def test_rejection_keeps_slurm_numbers_and_reads_well():
    error = SchedulerRejected(
        "Slurm refused the request",
        operation="submit_job",
        errors=(
            RemoteError(None, "Unknown key", description='Unknown key "x"'),
            RemoteError(2045, "Invalid account or account/partition combination specified"),
        ),
        http_status=500,
    )

    assert error.error_numbers == (2045,)
    assert error.code == "scheduler_rejected"
    assert not error.transient
    assert str(error) == (
        'submit_job: Slurm refused the request [Unknown key (Unknown key "x"); '
        "2045: Invalid account or account/partition combination specified]"
    )


def test_transient_by_class_and_by_instance():
    assert SchedulerUnavailable("down").transient
    assert not SchedulerAuthError("no").transient
    assert SchedulerRejected("dropped", transient=True).transient


def test_not_found_names_what():
    error = NotFound("account", "team-a", operation="get_gpu_limits")

    assert (error.kind, error.key, error.code) == ("account", "team-a", "scheduler_not_found")
    assert str(error) == "get_gpu_limits: account 'team-a' not found"
