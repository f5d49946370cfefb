"""The v0.0.38 JSON: bodies equal what the real slurmrestd accepted, readers read what it sent."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from scheduler_adapters.errors import UnexpectedResponse
from scheduler_adapters.records import Association, JobSpec, JobState
from scheduler_adapters.slurm import v0_0_38 as api

SUBMITTED = datetime.fromtimestamp(1795968514, tz=UTC)


def test_bodies_match_the_recorded_requests(rec):
    assert (
        api.account_body("fx-team", description="Fixture team", organization="acme")
        == rec.recording("accounts_post")["request_body"]
    )
    assert (
        api.account_association_body("fx-team", cluster="portal", parent="root")
        == rec.recording("association_add_account")["request_body"]
    )
    assert (
        api.user_association_body("fx-team", "alice", cluster="portal", partition="gpu")
        == rec.recording("association_add_user")["request_body"]
    )
    assert (
        api.grp_tres_body("fx-team", cluster="portal", grp_tres={"gres/gpu:a100": 1})
        == rec.recording("association_modify_grp_tres")["request_body"]
    )


def test_job_submit_body_matches_the_recorded_request(rec):
    spec = JobSpec(
        account="fx-team",
        user="alice",
        partition="gpu",
        script="#!/bin/bash\nsleep 2\n",
        gpus=1,
        gres_type="a100",
        name="fx-job",
        time_limit_min=5,
    )

    assert api.job_submit_body(spec) == rec.recording("job_submit")["request_body"]


def test_untyped_and_cpu_only_jobs():
    untyped = JobSpec(account="a", user="u", partition="gpu", script="#!/bin/sh\n", gpus=2)
    cpu_only = JobSpec(account="a", user="u", partition="gpu", script="#!/bin/sh\n")

    assert api.job_submit_body(untyped)["job"]["gres"] == "gpu:2"
    assert "gres" not in api.job_submit_body(cpu_only)["job"]


def test_grp_tres_body_clears_with_minus_one_and_refuses_an_empty_list():
    body = api.grp_tres_body("t", cluster="c", grp_tres={"gres/gpu:a100": -1, "cpu": 64})

    assert body["associations"][0]["max"]["tres"]["total"] == [
        {"type": "gres", "name": "gpu:a100", "count": -1},
        {"type": "cpu", "name": None, "count": 64},
    ]
    with pytest.raises(ValueError, match="crashes slurmrestd"):
        api.grp_tres_body("t", cluster="c", grp_tres={})


def test_running_job_from_the_controller(rec):
    (job,) = api.read_controller_jobs(rec.body("job_running"), now=SUBMITTED + timedelta(seconds=7))

    assert job.job_id == 8
    assert (job.account, job.user, job.partition, job.name) == ("fx-team", "alice", "gpu", "fx-job")
    assert job.state is JobState.RUNNING
    assert job.state_reason is None
    assert job.gpus_requested == {"a100": 1}
    assert job.gpus_allocated == {"a100": 1}
    assert job.start == SUBMITTED
    assert job.end is None  # end_time is the projected end (start + time limit), not a fact
    assert job.elapsed_s == 7


def test_job_held_by_the_account_limit(rec):
    (job,) = api.read_controller_jobs(rec.body("job_pending_assoc_grp_gres"), now=SUBMITTED)

    assert job.state is JobState.PENDING
    assert job.state_reason == "AssocGrpGRES"
    assert job.gpus_requested == {"a100": 1}
    assert job.gpus_allocated == {}
    assert (job.start, job.end, job.elapsed_s) == (None, None, 0)


def test_accounting_records(rec):
    completed, cancelled, failed = api.read_accounting_jobs(rec.body("accounting_jobs"))

    assert completed.job_id == 8
    assert completed.state is JobState.COMPLETED
    assert completed.gpus_allocated == {"a100": 1}
    assert completed.start == SUBMITTED
    assert completed.end == SUBMITTED + timedelta(seconds=3)
    assert completed.elapsed_s == 3
    assert completed.card_seconds == {"a100": 3}

    assert cancelled.state is JobState.CANCELLED
    assert cancelled.state_reason == "AssocGrpGRES"
    assert cancelled.gpus_requested == {"a100": 1}
    assert cancelled.gpus_allocated == {}
    assert cancelled.elapsed_s == 0

    # the submission refused with 2014 (gpu:h100) is recorded as a FAILED job with no type
    assert failed.state is JobState.FAILED
    assert failed.gpus_requested == {None: 1}
    assert failed.card_seconds == {}


def test_associations_with_grp_tres(rec):
    associations = api.read_associations(rec.body("associations"))

    # both allow the recorded QOS "normal" and name no DefaultQOS (``default.qos`` null)
    assert (
        Association("fx-team", None, None, "root", {"gres/gpu:a100": 1}, qos=("normal",))
        in associations
    )
    assert Association("fx-team", "alice", "gpu", None, {}, qos=("normal",)) in associations


def test_account_and_partitions(rec):
    assert api.read_account(rec.body("account"), cluster="portal") == ("Fixture team", "acme", True)
    assert api.read_account(rec.body("account"), cluster="other")[2] is False
    assert api.read_partition_gpus(rec.body("partitions")) == {"gpu": {"a100": 4, "rtx4090": 2}}
    assert api.read_submitted_job_id(rec.body("job_submit")) == 8
    assert api.plugin_type(rec.body("ping")) == "openapi/v0.0.38"


def test_missing_user_notice_is_recognised(rec):
    (notice,) = rec.body("association_add_account")["errors"]
    (real_error,) = rec.body("job_submit_bad_account")["errors"]

    assert api.is_missing_user_notice(notice)
    assert not api.is_missing_user_notice(real_error)


def test_accounting_query_uses_sacct_time_text():
    berlin = ZoneInfo("Europe/Berlin")
    start = datetime(2026, 11, 1, 0, 0, tzinfo=berlin)
    end = datetime(2026, 12, 1, 0, 0, tzinfo=berlin)

    assert api.accounting_jobs_params(start, end, ("team-a", "team-b")) == {
        "start_time": "2026-11-01T00:00:00",
        "end_time": "2026-12-01T00:00:00",
        "skip_steps": "true",
        "account": "team-a,team-b",
    }


def v0_0_40_job():
    """A job as v0.0.40+ prints it (https://slurm.schedmd.com/rest_api.html): state words in a
    list, numbers wrapped as {set, infinite, number}."""
    number = {"set": True, "infinite": False, "number": 1795968514}
    return {
        "meta": {"plugin": {"type": "openapi/slurmctld", "data_parser": "data_parser/v0.0.40"}},
        "errors": [],
        "jobs": [
            {
                "job_id": 8,
                "job_state": ["RUNNING"],
                "state_reason": "None",
                "start_time": number,
                "end_time": number,
                "submit_time": number,
                "tres_req_str": "gres/gpu:a100=1",
                "tres_alloc_str": "gres/gpu:a100=1",
            }
        ],
    }


def test_a_job_shaped_by_another_api_version_is_a_clear_error():
    with pytest.raises(UnexpectedResponse) as caught:
        api.read_controller_jobs(v0_0_40_job(), now=SUBMITTED)

    message = str(caught.value)
    assert "jobs[0].job_state" in message
    assert "['RUNNING']" in message
    assert "another API version" in message


@pytest.mark.parametrize(
    "payload, path",
    [
        ({"associations": [{"account": "a", "max": {"tres": {"total": {}}}}]}, "max.tres.total"),
        ({"associations": [{"account": "a"}]}, "associations[0].max.tres.total"),
        ({"jobs": [{"job_id": "8", "state": {"current": "COMPLETED"}}]}, "jobs[0]"),
        ({"jobs": {}}, "jobs"),
    ],
)
def test_other_shapes_name_the_field(payload, path):
    reader = api.read_associations if "associations" in payload else api.read_accounting_jobs
    with pytest.raises(UnexpectedResponse, match=path.replace("[", r"\[").replace("]", r"\]")):
        reader(payload)


def test_unknown_job_state_word_is_unknown_not_an_error(rec):
    body = rec.body("job_running")
    body["jobs"][0]["job_state"] = "SOMETHING_NEW"

    (job,) = api.read_controller_jobs(body, now=SUBMITTED)

    assert job.state is None


def test_job_placements_read_the_cards_each_running_job_holds(rec):
    # recorded: job 1 (2 a100) and job 2 (1 a100) on gpu-a100-01, job 3 (2 rtx4090) on
    # gpu-4090-01, job 4 pending for lack of a100 cards (scontrol showed the same IDX lists)
    placements = api.read_job_placements(rec.body("jobs_running"))
    assert [(p.job_id, p.state, p.account, p.user, p.partition) for p in placements] == [
        (1, JobState.RUNNING, "sandbox", "alice", "gpu"),
        (2, JobState.RUNNING, "sandbox", "alice", "gpu"),
        (3, JobState.RUNNING, "sandbox", "alice", "gpu"),
    ]
    slots = {p.job_id: [(s.node, s.index, s.gres_type) for s in p.slots] for p in placements}
    assert slots == {
        1: [("gpu-a100-01", 0, "a100"), ("gpu-a100-01", 1, "a100")],
        2: [("gpu-a100-01", 2, "a100")],
        3: [("gpu-4090-01", 0, "rtx4090"), ("gpu-4090-01", 1, "rtx4090")],
    }
    assert all(p.placed for p in placements)
    assert placements[0].start == datetime.fromtimestamp(1795976595, tz=UTC)
    assert placements[2].gpus_allocated == {"rtx4090": 2}


def _running(**fields):
    return {
        "jobs": [
            {
                "job_id": 7,
                "job_state": "RUNNING",
                "account": "team-a",
                "partition": "gpu",
                "start_time": 1795976595,
                "tres_alloc_str": "cpu=2,node=2,gres/gpu=4,gres/gpu:a100=4",
            }
            | fields
        ]
    }


@pytest.mark.parametrize(
    ("fields", "slots"),
    [
        (
            {"nodes": "gpu-[01-02]", "gres_detail": ["gpu:a100:2(IDX:0,3)", "gpu:a100:2(IDX:1-2)"]},
            [("gpu-01", 0), ("gpu-01", 3), ("gpu-02", 1), ("gpu-02", 2)],
        ),
        # other GRES beside the GPUs on one node
        (
            {"nodes": "gpu-01", "gres_detail": ["gpu:a100:4(IDX:0-3),mps:0"]},
            [("gpu-01", 0), ("gpu-01", 1), ("gpu-01", 2), ("gpu-01", 3)],
        ),
        # Slurm could not say which cards: never guessed
        ({"nodes": "gpu-01", "gres_detail": ["gpu:a100:4(IDX:N/A)"]}, []),
        ({"nodes": "gpu-[01-02]", "gres_detail": ["gpu:a100:4(IDX:0-3)"]}, []),
        ({"nodes": "gpu-[01-", "gres_detail": ["gpu:a100:4(IDX:0-3)"]}, []),
        ({"nodes": "gpu-01", "gres_detail": ["gpu:a100:4(IDX:0-"]}, []),
    ],
)
def test_job_placements_never_guess_cards(fields, slots):
    (placement,) = api.read_job_placements(_running(**fields))
    assert [(s.node, s.index) for s in placement.slots] == slots
    assert placement.placed is bool(slots)


def test_job_placements_skip_jobs_without_cards():
    pending = _running(job_state="PENDING", nodes="", gres_detail=[], tres_alloc_str="")
    cpu_only = _running(nodes="cpu-01", gres_detail=[], tres_alloc_str="cpu=4,node=1")
    done = _running(job_state="COMPLETED", nodes="gpu-01", gres_detail=["gpu:a100:4(IDX:0-3)"])
    for payload in (pending, cpu_only, done):
        assert api.read_job_placements(payload) == []
    with pytest.raises(UnexpectedResponse, match=r"jobs\[0\]"):
        api.read_job_placements({"jobs": ["not a job"]})
