"""FakeScheduler's own behaviour: its scheduler, clock and failure switches (the behaviour it
shares with Slurm is in contract/)."""

from datetime import UTC, datetime, timedelta

import pytest

from scheduler_adapters.base import SchedulerAdapter
from scheduler_adapters.errors import (
    NotFound,
    SchedulerAuthError,
    SchedulerRejected,
    SchedulerUnavailable,
)
from scheduler_adapters.fake import FakeScheduler
from scheduler_adapters.records import GpuLimit, JobSpec, JobState

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def fake(clock) -> FakeScheduler:
    scheduler = FakeScheduler({"gpu": {"a100": 4, "rtx4090": 2}}, clock=clock)
    scheduler.ensure_account("team-a", description="A", organization="acme")
    scheduler.ensure_user_association("team-a", "alice", "gpu")
    return scheduler


def job(gpus=1, gres_type="a100", minutes=10):
    return JobSpec(
        account="team-a",
        user="alice",
        partition="gpu",
        script="#!/bin/sh\nsleep 60\n",
        gpus=gpus,
        gres_type=gres_type,
        time_limit_min=minutes,
    )


def test_it_is_a_scheduler_adapter(fake):
    assert isinstance(fake, SchedulerAdapter)


def test_jobs_wait_for_free_cards_then_run_until_their_time_limit(fake, clock):
    first = fake.submit_job(job(gpus=4, minutes=30))
    second = fake.submit_job(job(gpus=1))

    assert fake.get_job(first).state is JobState.RUNNING
    assert (fake.get_job(second).state, fake.get_job(second).state_reason) == (
        JobState.PENDING,
        "Resources",
    )

    clock.advance(minutes=31)
    timed_out = fake.get_job(first)

    assert timed_out.state is JobState.TIMEOUT
    assert timed_out.end == T0 + timedelta(minutes=30)
    assert timed_out.elapsed_s == 1800
    assert timed_out.card_seconds == {"a100": 7200}
    assert fake.get_job(second).state is JobState.RUNNING


def test_finish_job_and_accounting_window(fake, clock):
    job_id = fake.submit_job(job(gpus=2))
    clock.advance(seconds=90)
    fake.finish_job(job_id)

    (record,) = fake.jobs_from_accounting(T0, T0 + timedelta(hours=1), accounts=["team-a"])

    assert (record.state, record.elapsed_s, record.card_seconds) == (
        JobState.COMPLETED,
        90,
        {"a100": 180},
    )
    assert fake.jobs_from_accounting(T0 + timedelta(hours=1), T0 + timedelta(hours=2)) == ()
    assert fake.jobs_from_accounting(T0, T0 + timedelta(hours=1), accounts=["team-b"]) == ()


def test_untyped_requests_get_a_type_that_fits(fake):
    job_id = fake.submit_job(job(gpus=3, gres_type=None))

    record = fake.get_job(job_id)

    assert record.gpus_requested == {None: 3}
    assert record.gpus_allocated == {"a100": 3}


def test_limit_holds_jobs_of_its_account_only(fake):
    fake.ensure_account("team-b", description="B", organization="acme")
    fake.ensure_user_association("team-b", "alice", "gpu")
    fake.set_gpu_limit(GpuLimit("team-a", "gpu", "a100", 1))

    held = [fake.submit_job(job()) for _ in range(2)][1]
    other = fake.submit_job(JobSpec(**{**job().__dict__, "account": "team-b"}))

    assert fake.get_job(held).state_reason == "AssocGrpGRES"
    assert fake.get_job(other).state is JobState.RUNNING


@pytest.mark.parametrize("switch", ["down", "timeout"])
def test_down_and_timeout_are_transient_and_change_nothing(fake, switch):
    setattr(fake, switch, True)

    with pytest.raises(SchedulerUnavailable) as caught:
        fake.set_gpu_limit(GpuLimit("team-a", "gpu", "a100", 1))

    assert caught.value.transient
    setattr(fake, switch, False)
    assert fake.get_gpu_limits("team-a") == ()


def test_an_expired_token_is_renewed_like_the_real_adapter(fake):
    fake.expire_token()

    assert fake.set_gpu_limit(GpuLimit("team-a", "gpu", "a100", 1)) is True
    assert fake.token_renewals == 1


def test_broken_auth_is_permanent(fake):
    fake.auth_broken = True

    with pytest.raises(SchedulerAuthError) as caught:
        fake.get_gpu_limits("team-a")

    assert not caught.value.transient


def test_reject_next_fails_one_call_with_the_number(fake):
    fake.reject_next(2045, "Invalid account or account/partition combination specified")

    with pytest.raises(SchedulerRejected) as caught:
        fake.submit_job(job())

    assert caught.value.error_numbers == (2045,)
    assert caught.value.operation == "submit_job"
    assert fake.jobs == {}
    assert fake.submit_job(job()) == 1


def test_fail_next_raises_the_given_error(fake):
    fake.fail_next(NotFound("account", "team-a"))

    with pytest.raises(NotFound):
        fake.list_nodes()
    assert fake.list_nodes().nodes


def test_calls_are_recorded(fake):
    fake.calls.clear()
    fake.set_gpu_limit(GpuLimit("team-a", "gpu", "a100", 1))
    fake.set_gpu_limit(GpuLimit("team-a", "gpu", "a100", 1))

    assert fake.calls == ["set_gpu_limit", "set_gpu_limit"]
