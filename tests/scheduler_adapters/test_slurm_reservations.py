"""Reservations: the scontrol command lines the real adapter runs, its reading of scontrol's
answers, and the fake that mirrors it (the real cluster: tests/integration/slurm/)."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta

import pytest

from scheduler_adapters.errors import (
    SchedulerAuthError,
    SchedulerError,
    SchedulerRejected,
    SchedulerUnavailable,
)
from scheduler_adapters.fake import FakeScheduler
from scheduler_adapters.records import JobSpec, JobState, ReservationSpec
from scheduler_adapters.registry import build_scheduler_adapter, slurm_settings_from_env
from scheduler_adapters.slurm.reservations import ScontrolReservations

START = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
END = START + timedelta(days=2)
# what `scontrol show reservation N --oneliner` prints (24.11 layout, one line)
SHOWN = (
    "ReservationName=alloc-17 StartTime=2026-12-07T10:00:00 EndTime=2026-12-09T10:00:00 "
    "Duration=2-00:00:00 Nodes=gpu-a100-[01-02] NodeCnt=2 CoreCnt=16 Features=(null) "
    "PartitionName=gpu Flags= TRES=cpu=16 Users=(null) Groups=(null) Accounts=team-nlp "
    "Licenses=(null) State=INACTIVE BurstBuffer=(null) MaxStartDelay=(null)"
)


class Runner:
    """Stands in for subprocess.run: answers each call in turn, records the command lines."""

    def __init__(self, *answers: tuple[int, str]) -> None:
        self.answers = list(answers)
        self.commands: list[list[str]] = []

    def __call__(self, command, **kwargs):
        self.commands.append(command)
        assert kwargs["capture_output"] and kwargs["text"] and kwargs["check"] is False
        code, out = self.answers.pop(0)
        return subprocess.CompletedProcess(command, code, out, "")


def spec(**overrides) -> ReservationSpec:
    values = dict(
        name="alloc-17",
        account="team-nlp",
        nodes=("gpu-a100-01", "gpu-a100-02"),
        starts_at=START,
        ends_at=END,
        partition="gpu",
    )
    return ReservationSpec(**(values | overrides))


def tool(runner: Runner) -> ScontrolReservations:
    return ScontrolReservations(
        prefix=("chroot", "/opt/portal-slurm-modern"), time_zone="Europe/Berlin", run=runner
    )


def test_create_runs_scontrol_with_wall_clock_times_in_the_cluster_zone():
    runner = Runner((1, "Reservation alloc-17 not found"), (0, "Reservation created: alloc-17"))
    assert tool(runner).create_reservation(spec()) is True
    assert runner.commands[0] == [
        "chroot", "/opt/portal-slurm-modern", "scontrol", "show", "reservation", "alloc-17",
        "--oneliner",
    ]  # fmt: skip
    # 09:00 UTC on 7 December is 10:00 in Berlin (CET, UTC+1)
    assert runner.commands[1] == [
        "chroot", "/opt/portal-slurm-modern", "scontrol", "create", "reservation",
        "ReservationName=alloc-17", "Accounts=team-nlp", "Nodes=gpu-a100-01,gpu-a100-02",
        "StartTime=2026-12-07T10:00:00", "EndTime=2026-12-09T10:00:00", "PartitionName=gpu",
    ]  # fmt: skip


def test_create_again_with_the_same_values_changes_nothing():
    runner = Runner((0, SHOWN))
    assert tool(runner).create_reservation(spec()) is False
    assert len(runner.commands) == 1  # read only


def test_a_name_taken_with_other_values_is_refused():
    runner = Runner((0, SHOWN))
    with pytest.raises(SchedulerRejected, match="exists with other values"):
        tool(runner).create_reservation(spec(account="team-vision"))


def test_read_back_expands_the_hostlist_and_reads_times_in_the_cluster_zone():
    record = tool(Runner((0, SHOWN))).get_reservation("alloc-17")
    assert record.nodes == ("gpu-a100-01", "gpu-a100-02")
    assert record.accounts == ("team-nlp",)
    assert record.starts_at == START and record.ends_at == END
    assert (record.partition, record.state) == ("gpu", "INACTIVE")
    assert tool(Runner((1, "Reservation zz not found"))).get_reservation("zz") is None


def test_delete_is_idempotent():
    runner = Runner((0, SHOWN), (0, ""))
    assert tool(runner).delete_reservation("alloc-17") is True
    assert runner.commands[1][-2:] == ["delete", "ReservationName=alloc-17"]
    missing = Runner((1, "Reservation alloc-17 not found"))
    assert tool(missing).delete_reservation("alloc-17") is False


def test_delete_of_a_reservation_jobs_still_use_ends_it_now():
    # slurmctld's answer while a job runs in it (seen on 22.05, 24.11 and 26.05)
    busy = "delete_reservation ReservationName=alloc-17: Requested reservation is in use"
    runner = Runner((0, SHOWN), (1, busy), (0, "Reservation updated."))
    assert tool(runner).delete_reservation("alloc-17") is True
    assert runner.commands[2][-3:] == ["update", "ReservationName=alloc-17", "EndTime=now"]
    refused = Runner((0, SHOWN), (1, "Error: Access/permission denied"))
    with pytest.raises(SchedulerAuthError):
        tool(refused).delete_reservation("alloc-17")
    assert len(refused.commands) == 2  # no update after another refusal


# slurmctld's answers to an end at or before the start, and to a new start once started, as
# 24.11.5 and 26.05.5 print them, and 22.05.8 (both lines, exit 1; the reservation unchanged)
TOO_EARLY = "slurm_update error: Invalid time specified"
TOO_EARLY_22 = (
    "Error updating the reservation: Invalid time specified\n"
    "slurm_update error: Invalid time specified"
)
STARTED = "slurm_update error: Reservation already started"
BUSY = "delete_reservation ReservationName=alloc-17: Requested reservation is in use"


@pytest.mark.parametrize("too_early", [TOO_EARLY, TOO_EARLY_22])
def test_in_its_first_second_a_reservation_in_use_ends_a_second_after_its_start(too_early):
    runner = Runner((0, SHOWN), (1, BUSY), (1, too_early), (0, "Reservation updated."))
    assert tool(runner).delete_reservation("alloc-17") is True
    assert [c[-1] for c in runner.commands[2:]] == ["EndTime=now", "EndTime=now+1"]


@pytest.mark.parametrize("too_early", [TOO_EARLY, TOO_EARLY_22])
def test_a_reservation_in_use_before_its_start_is_moved_to_the_coming_second(too_early):
    runner = Runner(
        (0, SHOWN), (1, BUSY), (1, too_early), (1, too_early), (0, "Reservation updated.")
    )
    assert tool(runner).delete_reservation("alloc-17") is True
    assert runner.commands[4][-3:] == ["ReservationName=alloc-17", "StartTime=now", "EndTime=now+1"]


def test_a_reservation_that_starts_while_it_is_being_ended_ends_a_second_later():
    runner = Runner(
        (0, SHOWN), (1, BUSY), (1, TOO_EARLY), (1, TOO_EARLY), (1, STARTED),
        (0, "Reservation updated."),
    )  # fmt: skip
    assert tool(runner).delete_reservation("alloc-17") is True
    assert runner.commands[5][-2:] == ["ReservationName=alloc-17", "EndTime=now+1"]


def test_ending_stops_at_a_refusal_that_is_not_about_its_timing_or_after_every_way():
    denied = Runner((0, SHOWN), (1, BUSY), (1, "Error: Access/permission denied"))
    with pytest.raises(SchedulerAuthError):
        tool(denied).delete_reservation("alloc-17")
    assert len(denied.commands) == 3
    other = Runner((0, SHOWN), (1, BUSY), (1, TOO_EARLY), (1, "slurm_update error: Invalid node"))
    with pytest.raises(SchedulerRejected, match="Invalid node"):
        tool(other).delete_reservation("alloc-17")
    assert len(other.commands) == 4
    refused = Runner((0, SHOWN), (1, BUSY), *[(1, TOO_EARLY)] * 4)
    with pytest.raises(SchedulerRejected, match="Invalid time specified"):
        tool(refused).delete_reservation("alloc-17")
    assert len(refused.commands) == 6  # show, delete and four updates, then no more


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ("Error creating the reservation: Requested nodes are busy", SchedulerRejected),
        ("Error creating the reservation: Access/permission denied", SchedulerAuthError),
        ("slurm_load_reservations error: Unable to contact slurm controller", SchedulerUnavailable),
    ],
)
def test_scontrol_failures_become_adapter_errors(answer, error):
    runner = Runner((1, "Reservation alloc-17 not found"), (1, answer))
    with pytest.raises(error):
        tool(runner).create_reservation(spec())


def test_missing_scontrol_and_timeouts():
    def missing(command, **kwargs):
        raise FileNotFoundError(command[0])

    def slow(command, **kwargs):
        raise subprocess.TimeoutExpired(command, 30)

    with pytest.raises(SchedulerError, match="not installed"):
        ScontrolReservations(run=missing).get_reservation("x")
    with pytest.raises(SchedulerUnavailable):
        ScontrolReservations(run=slow).get_reservation("x")


@pytest.mark.parametrize(
    "overrides",
    [
        {"nodes": ()},
        {"nodes": ("b", "a")},
        {"nodes": ("a", "a")},
        {"ends_at": START},
        {"starts_at": START.replace(tzinfo=None)},
        {"name": "bad name"},
        {"nodes": ("gpu;rm",)},
    ],
)
def test_bad_reservation_specs_are_refused_before_anything_runs(overrides):
    with pytest.raises(ValueError):
        spec(**overrides)


def test_the_rest_adapter_refuses_reservations_without_scontrol_and_env_turns_it_on():
    env = {
        "SLURMRESTD_URL": "http://127.0.0.1:1",
        "SLURM_ADMIN_USER": "portal",
        "SLURM_CLUSTER": "portal",
        "SLURM_JWT": "token",
    }
    plain = build_scheduler_adapter(slurm_settings_from_env(env))
    with pytest.raises(SchedulerError, match="enable SCONTROL"):
        plain.get_reservation("x")
    chrooted = slurm_settings_from_env(env | {"SLURM_MODERN_ROOT": "/opt/portal-slurm-modern"})
    assert chrooted["SCONTROL"] == {"ENABLED": True, "PREFIX": "chroot /opt/portal-slurm-modern"}
    assert build_scheduler_adapter(chrooted)._reservations is not None


def test_job_specs_carry_the_reservation_into_both_submit_dialects():
    from scheduler_adapters.slurm import v0_0_38, v0_0_42

    job = JobSpec(
        account="team-nlp", user="alice", partition="gpu", script="#!/bin/sh\n", gpus=4,
        gres_type="a100", reservation="alloc-17",
    )  # fmt: skip
    assert v0_0_42.DIALECT.job_submit_body(job)["job"]["reservation"] == "alloc-17"
    assert v0_0_38.job_submit_body(job)["job"]["reservation"] == "alloc-17"


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def test_fake_reservation_holds_the_node_for_its_account_inside_the_window():
    clock = Clock(START - timedelta(hours=1))
    fake = FakeScheduler({"gpu": {"a100": 4}}, clock=clock)
    for account in ("team-nlp", "team-vision"):
        fake.ensure_account(account, description=account, organization="org")
        fake.ensure_user_association(account, "alice", "gpu")
    reservation = spec(nodes=("fake-gpu-a100",))
    assert fake.create_reservation(reservation) is True
    assert fake.create_reservation(reservation) is False  # idempotent
    with pytest.raises(SchedulerRejected, match="exists with other values"):
        fake.create_reservation(spec(nodes=("fake-gpu-a100",), ends_at=END + timedelta(hours=1)))
    with pytest.raises(SchedulerRejected, match="Requested nodes are busy"):
        fake.create_reservation(spec(name="other", nodes=("fake-gpu-a100",)))
    with pytest.raises(SchedulerRejected, match="Invalid node name"):
        fake.create_reservation(spec(name="x", nodes=("gpu-a100-01",)))

    def job(account: str, reservation: str | None) -> int:
        return fake.submit_job(
            JobSpec(account=account, user="alice", partition="gpu", script="#!/bin/sh\n",
                    gpus=4, gres_type="a100", reservation=reservation, time_limit_min=600)
        )  # fmt: skip

    inside = job("team-nlp", "alloc-17")
    assert fake.get_job(inside).state is JobState.PENDING  # window not open yet
    assert fake.get_job(inside).state_reason == "Reservation"
    with pytest.raises(SchedulerRejected, match="Access denied"):
        job("team-vision", "alloc-17")
    with pytest.raises(SchedulerRejected, match="reservation is invalid"):
        job("team-nlp", "nope")
    assert fake.get_reservation("alloc-17").state == "INACTIVE"
    clock.now = START + timedelta(minutes=1)
    outsider = job("team-vision", None)
    assert fake.get_job(inside).state is JobState.RUNNING
    assert fake.get_reservation("alloc-17").state == "ACTIVE"
    assert fake.get_job(outsider).state is JobState.PENDING  # the reserved node is held
    fake.cancel_job(inside)
    assert fake.delete_reservation("alloc-17") is True
    assert fake.delete_reservation("alloc-17") is False
    assert fake.get_job(outsider).state is JobState.RUNNING


def test_fake_ends_a_reservation_a_running_job_uses_and_purges_it_when_the_job_ends():
    clock = Clock(START + timedelta(minutes=1))
    fake = FakeScheduler({"gpu": {"a100": 4}}, clock=clock)
    for account in ("team-nlp", "team-vision"):
        fake.ensure_account(account, description=account, organization="org")
        fake.ensure_user_association(account, "alice", "gpu")
    fake.create_reservation(spec(nodes=("fake-gpu-a100",)))
    shape = dict(user="alice", partition="gpu", script="#!/bin/sh\n", gpus=4, gres_type="a100")
    inside = fake.submit_job(JobSpec(account="team-nlp", reservation="alloc-17", **shape))
    outsider = fake.submit_job(JobSpec(account="team-vision", **shape))
    assert fake.get_job(inside).state is JobState.RUNNING

    assert fake.delete_reservation("alloc-17") is True
    ended = fake.get_reservation("alloc-17")
    assert (ended.ends_at, ended.state) == (START + timedelta(minutes=1), "INACTIVE")
    assert fake.get_job(inside).state is JobState.RUNNING  # ending it cancels no job
    assert fake.get_job(outsider).state is JobState.PENDING  # the cards are still in use
    fake.cancel_job(inside)
    assert fake.get_reservation("alloc-17") is None
    assert fake.get_job(outsider).state is JobState.RUNNING


def fake_with_two_accounts(clock: Clock) -> FakeScheduler:
    fake = FakeScheduler({"gpu": {"a100": 4}}, clock=clock)
    for account in ("team-nlp", "team-vision"):
        fake.ensure_account(account, description=account, organization="org")
        fake.ensure_user_association(account, "alice", "gpu")
    return fake


HALF = dict(user="alice", partition="gpu", script="#!/bin/sh\n", gpus=2, gres_type="a100")


def test_fake_ends_a_reservation_released_in_its_first_second_one_second_after_its_start():
    """slurmctld refuses EndTime=now while now is the start's second; the adapter ends it at
    start + 1 s (what 22.05, 24.11 and 26.05 accepted), so the fake does too."""
    clock = Clock(START + timedelta(milliseconds=400))
    fake = fake_with_two_accounts(clock)
    fake.create_reservation(spec(nodes=("fake-gpu-a100",)))
    inside = fake.submit_job(JobSpec(account="team-nlp", reservation="alloc-17", **HALF))
    assert fake.get_job(inside).state is JobState.RUNNING

    assert fake.delete_reservation("alloc-17") is True
    ended = fake.get_reservation("alloc-17")
    assert (ended.starts_at, ended.ends_at) == (START, START + timedelta(seconds=1))
    outsider = fake.submit_job(JobSpec(account="team-vision", **HALF))
    assert fake.get_job(outsider).state_reason == "Resources"  # held for 0.6 s more
    clock.now = START + timedelta(seconds=1)
    assert fake.get_job(outsider).state is JobState.RUNNING  # on the two cards left free
    assert fake.get_reservation("alloc-17").state == "INACTIVE"
    assert fake.get_job(inside).state is JobState.RUNNING  # ending it cancels no job
    fake.cancel_job(inside)
    assert fake.get_reservation("alloc-17") is None


def test_fake_moves_a_reservation_released_before_its_start_with_a_job_waiting_to_now():
    """A pending job ties the reservation too (slurmctld: "in use"); before the start no end is
    accepted, so the window becomes the coming second and nothing is held at the planned one."""
    clock = Clock(START - timedelta(hours=1, milliseconds=-250))  # 07:59:00.250 UTC
    fake = fake_with_two_accounts(clock)
    fake.create_reservation(spec(nodes=("fake-gpu-a100",)))
    waiting = fake.submit_job(
        JobSpec(account="team-nlp", reservation="alloc-17", time_limit_min=600, **HALF)
    )
    assert fake.get_job(waiting).state_reason == "Reservation"

    assert fake.delete_reservation("alloc-17") is True
    moved = fake.get_reservation("alloc-17")
    assert (moved.starts_at, moved.ends_at) == (
        datetime(2026, 12, 7, 8, 0, tzinfo=UTC),
        datetime(2026, 12, 7, 8, 0, 1, tzinfo=UTC),
    )
    fake.cancel_job(waiting)
    clock.now = datetime(2026, 12, 7, 8, 0, 1, tzinfo=UTC)
    assert fake.get_reservation("alloc-17") is None
    # the planned window is free for anyone
    clock.now = START + timedelta(minutes=1)
    whole = fake.submit_job(JobSpec(account="team-vision", **(HALF | {"gpus": 4})))
    assert fake.get_job(whole).state is JobState.RUNNING


def test_fake_keeps_an_ended_reservation_a_job_still_waits_for_until_that_job_goes():
    clock = Clock(START + timedelta(minutes=5))
    fake = fake_with_two_accounts(clock)
    fake.create_reservation(spec(nodes=("fake-gpu-a100",)))
    first = fake.submit_job(JobSpec(account="team-nlp", reservation="alloc-17", **HALF))
    second = fake.submit_job(
        JobSpec(account="team-nlp", reservation="alloc-17", **(HALF | {"gpus": 4}))
    )
    assert fake.get_job(second).state_reason == "Resources"
    assert fake.delete_reservation("alloc-17") is True  # ended at 09:05
    clock.now = START + timedelta(minutes=6)
    fake.cancel_job(first)
    ended = fake.get_reservation("alloc-17")  # the pending job still ties it
    assert (ended.ends_at, ended.state) == (START + timedelta(minutes=5), "INACTIVE")
    assert fake.get_job(second).state_reason == "Reservation"
    fake.cancel_job(second)
    assert fake.get_reservation("alloc-17") is None


# A repeating reservation as 24.11 shows it after slurmctld moved it forward a day: the
# window of 7 December 10:00-11:00 Berlin is now 8 December's.
SHOWN_DAILY = (
    "ReservationName=recur-3 StartTime=2026-12-08T10:00:00 EndTime=2026-12-08T11:00:00 "
    "Duration=01:00:00 Nodes=gpu-a100-01 NodeCnt=1 CoreCnt=8 Features=(null) "
    "PartitionName=gpu Flags=DAILY,SPEC_NODES TRES=cpu=8 Users=(null) Groups=(null) "
    "Accounts=team-nlp Licenses=(null) State=INACTIVE BurstBuffer=(null) MaxStartDelay=(null)"
)


def test_a_repeating_reservation_is_created_with_its_flag_and_read_back():
    runner = Runner((1, "Reservation recur-3 not found"), (0, "Reservation created: recur-3"))
    daily = spec(name="recur-3", nodes=("gpu-a100-01",), ends_at=START + timedelta(hours=1),
                 repeat="DAILY")  # fmt: skip
    assert tool(runner).create_reservation(daily) is True
    assert runner.commands[1][-2:] == ["PartitionName=gpu", "Flags=DAILY"]
    record = tool(Runner((0, SHOWN_DAILY))).get_reservation("recur-3")
    assert record.flags == ("DAILY", "SPEC_NODES") and record.repeat == "DAILY"
    # 10:00 Berlin on 8 December is 09:00 UTC, a day after the spec's start
    assert record.starts_at == START + timedelta(days=1)


def test_a_repeating_reservation_moved_forward_is_the_same_one():
    daily = spec(name="recur-3", nodes=("gpu-a100-01",), ends_at=START + timedelta(hours=1),
                 repeat="DAILY")  # fmt: skip
    assert tool(Runner((0, SHOWN_DAILY))).create_reservation(daily) is False
    weekly = spec(name="recur-3", nodes=("gpu-a100-01",), ends_at=START + timedelta(hours=1),
                  repeat="WEEKLY")  # fmt: skip
    with pytest.raises(SchedulerRejected):
        tool(Runner((0, SHOWN_DAILY))).create_reservation(weekly)
    two_hours = spec(name="recur-3", nodes=("gpu-a100-01",), ends_at=START + timedelta(hours=2),
                     repeat="DAILY")  # fmt: skip
    with pytest.raises(SchedulerRejected):
        tool(Runner((0, SHOWN_DAILY))).create_reservation(two_hours)


def test_a_spec_repeats_only_as_slurm_can():
    with pytest.raises(ValueError, match="repeats DAILY, WEEKDAY, WEEKLY"):
        spec(repeat="HOURLY")


# A maintenance reservation as 24.11 shows it (Flags in slurmctld's order).
SHOWN_MAINT = (
    "ReservationName=maint-4-1 StartTime=2026-12-07T10:00:00 EndTime=2026-12-09T10:00:00 "
    "Duration=2-00:00:00 Nodes=gpu-a100-01 NodeCnt=1 CoreCnt=8 Features=(null) "
    "PartitionName=(null) Flags=MAINT,IGNORE_JOBS,SPEC_NODES TRES=cpu=8 Users=(null) "
    "Groups=(null) Accounts=root Licenses=(null) State=INACTIVE BurstBuffer=(null)"
)


def test_a_maintenance_reservation_is_written_with_maint_and_read_back():
    runner = Runner((1, "Reservation maint-4-1 not found"), (0, "Reservation created: maint-4-1"))
    maint = spec(name="maint-4-1", account="root", nodes=("gpu-a100-01",), partition=None,
                 maintenance=True)  # fmt: skip
    assert tool(runner).create_reservation(maint) is True
    assert runner.commands[1][-1] == "Flags=MAINT,IGNORE_JOBS"
    record = tool(Runner((0, SHOWN_MAINT))).get_reservation("maint-4-1")
    assert (record.maintenance, record.repeat, record.accounts) == (True, None, ("root",))
    assert tool(Runner((0, SHOWN_MAINT))).create_reservation(maint) is False  # the same one
    with pytest.raises(ValueError, match="does not repeat"):
        spec(maintenance=True, repeat="DAILY")


def test_fake_lets_a_maintenance_reservation_overlap_another():
    """slurmctld lets a MAINT reservation use nodes another reservation holds."""
    fake = FakeScheduler({"gpu": {"a100": 4}}, clock=Clock(START - timedelta(hours=1)))
    fake.ensure_account("team-nlp", description="nlp", organization="org")
    fake.ensure_account("root", description="root", organization="org")
    assert fake.create_reservation(spec(nodes=("fake-gpu-a100",))) is True
    maint = spec(name="maint-1", account="root", nodes=("fake-gpu-a100",), maintenance=True)
    assert fake.create_reservation(maint) is True
    assert fake.get_reservation("maint-1").maintenance is True


# what 26.05.5 printed for a reservation created with QOS= (one line)
SHOWN_WITH_QOS = SHOWN.replace("Accounts=team-nlp", "QOS=portal-production Accounts=team-nlp")


def test_a_reservation_admits_only_its_qos_where_slurm_takes_it():
    runner = Runner((1, "Reservation alloc-17 not found"), (0, "Reservation created: alloc-17"))
    assert tool(runner).create_reservation(spec(qos=("portal-production",))) is True
    assert runner.commands[1][-1] == "QOS=portal-production"
    record = tool(Runner((0, SHOWN_WITH_QOS))).get_reservation("alloc-17")
    assert record.qos == ("portal-production",)
    # 24.11's show has no QOS= at all: unknown, not "any"
    assert tool(Runner((0, SHOWN))).get_reservation("alloc-17").qos is None
    # the same reservation with another QOS is another reservation
    with pytest.raises(SchedulerRejected, match="exists with other values"):
        tool(Runner((0, SHOWN_WITH_QOS))).create_reservation(spec(qos=("portal-batch",)))


def test_qos_refused_as_an_unknown_parameter_creates_nothing_and_says_so():
    """22.05.8 and 24.11.5: ``scontrol: error: Unknown parameter QOS=... No reservation
    created.`` (exit 1), seen on both."""
    from scheduler_adapters.errors import ReservationQosUnsupported

    refused = "scontrol: error: Unknown parameter QOS=portal-production.  No reservation created."
    runner = Runner((1, "Reservation alloc-17 not found"), (1, refused))
    with pytest.raises(ReservationQosUnsupported, match="take no QOS"):
        tool(runner).create_reservation(spec(qos=("portal-production",)))
    # a reservation a 24.11 made without QOS is the same one when asked again with it
    assert tool(Runner((0, SHOWN))).create_reservation(spec(qos=("portal-production",))) is False


def test_reservation_qos_names_are_checked_before_anything_runs():
    with pytest.raises(ValueError):
        spec(qos=("portal-production", "portal-batch"))  # not sorted
    with pytest.raises(ValueError):
        spec(qos=("bad name",))
