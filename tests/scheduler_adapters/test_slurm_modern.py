"""The v0.0.40-v0.0.45 dialects and the adapter over them, against answers real slurmrestds
gave: Slurm 24.11.5 for v0.0.40-42, 26.05.5 for v0.0.43-45 (``tests/fixtures/slurm/rest_<v>/``,
recorded by ``scripts/record_slurm.py``; see the README there). The same scenario runs on every
version."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from scheduler_adapters.errors import (
    NotFound,
    SchedulerAuthError,
    SchedulerRejected,
    SchedulerUnavailable,
    UnexpectedResponse,
    UnsupportedApiVersion,
)
from scheduler_adapters.records import GpuLimit, GpuSlot, JobSpec, JobState
from scheduler_adapters.slurm.dialects import DIALECTS
from scheduler_adapters.slurm.readers import job_node_names

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "slurm"
VERSIONS = ("v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45")
RELEASE = {"v0.0.40": "24.11.5", "v0.0.41": "24.11.5", "v0.0.42": "24.11.5"}
# the jobs of each recording: job_submit (1 × a100, sleep 3) ran on gpu-a100-01 card 0;
# job_submit_over_cap (2 × a100) pended on the account's GrpTRES=gres/gpu:a100=1, was cancelled


class Recorded:
    def __init__(self, version: str) -> None:
        self.version = version
        self.dir = FIXTURES / f"rest_{version}"

    def recording(self, name: str) -> dict[str, Any]:
        return json.loads((self.dir / f"{name}.json").read_text(encoding="utf-8"))

    def answer(self, name: str) -> tuple[int, Any]:
        record = self.recording(name)
        return record["status"], record["body"]

    def body(self, name: str) -> Any:
        return self.recording(name)["body"]

    def job_id(self, name: str) -> int:
        return self.body(name)["job_id"]

    def started(self) -> datetime:
        """When job_submit started, from the raw number in the recording."""
        raw = self.body("job_running")["jobs"][0]["start_time"]
        assert raw["set"] is True and raw["infinite"] is False
        return datetime.fromtimestamp(raw["number"], tz=UTC)


@pytest.fixture(params=VERSIONS)
def version(request) -> str:
    return request.param


@pytest.fixture
def recorded(version) -> Recorded:
    return Recorded(version)


@pytest.fixture
def dialect(version):
    return DIALECTS[version]


def paths(version: str) -> tuple[str, str]:
    return f"/slurm/{version}", f"/slurmdb/{version}"


def spec(**overrides: Any) -> JobSpec:
    fields = {
        "account": "fx-team",
        "user": "alice",
        "partition": "gpu",
        "script": "#!/bin/bash\nsleep 3\n",
        "gpus": 1,
        "gres_type": "a100",
        "name": "job_submit",
        "time_limit_min": 5,
    }
    return JobSpec(**(fields | overrides))


# --------------------------------------------------------------------------- bodies


def test_bodies_equal_what_the_real_slurmrestd_accepted(recorded, dialect):
    assert (
        dialect.accounts_association_body(
            "fx-team",
            description="Fixture team",
            organization="acme",
            cluster="portal",
            parent="root",
        )  # fmt: skip
        == recorded.recording("accounts_association")["request_body"]
    )
    assert (
        dialect.users_association_body("fx-team", "alice", cluster="portal", partition="gpu")
        == recorded.recording("users_association")["request_body"]
    )
    assert (
        dialect.grp_tres_body("fx-team", cluster="portal", grp_tres={"gres/gpu:a100": 1})
        == recorded.recording("association_modify_grp_tres")["request_body"]
    )
    assert dialect.job_submit_body(spec()) == recorded.recording("job_submit")["request_body"]
    assert recorded.body("job_submit")["errors"] == []
    assert recorded.body("job_submit")["warnings"] == []


def test_untyped_gpus_and_cpu_only_jobs(dialect):
    untyped = dialect.job_submit_body(spec(gres_type=None, gpus=2))["job"]
    cpu_only = dialect.job_submit_body(spec(gpus=0))["job"]

    assert untyped["tres_per_node"] == "gres/gpu:2"
    assert "tres_per_node" not in cpu_only
    assert "gres" not in untyped  # ignored by v0.0.40+: the job would run without GPUs


def test_accounting_window_is_epoch_seconds_only_where_the_server_takes_them(recorded, dialect):
    start = datetime(2026, 12, 1, 20, 0, tzinfo=UTC)
    end = datetime(2026, 12, 1, 21, 0, tzinfo=UTC)
    params = dialect.accounting_jobs_params(start, end, ("fx-team",))
    epoch = recorded.recording("accounting_jobs_epoch_time")

    if recorded.version not in ("v0.0.40", "v0.0.41"):
        assert params["start_time"] == "1796155200"  # 2026-12-01T20:00Z
        assert epoch["status"] == 200
    else:
        assert params["start_time"] == "2026-12-01T20:00:00"
        assert epoch["status"] == 422
        assert [e["error_number"] for e in epoch["body"]["errors"]] == [9202, 9000]
        assert recorded.recording("accounting_jobs_text_time")["status"] == 200
    assert params["account"] == "fx-team"


# --------------------------------------------------------------------------- readers


def test_partitions_nodes_and_tres(recorded, dialect):
    assert dialect.read_partition_gpus(recorded.body("partitions")) == {
        "gpu": {"a100": 4, "rtx4090": 2}
    }
    assert {"gres/gpu:a100", "gres/gpu:rtx4090", "cpu"} <= dialect.read_tres_names(
        recorded.body("tres")
    )
    assert dialect.plugin_type(recorded.body("nodes")) == f"data_parser/{recorded.version}"


def test_accounts_and_associations(recorded, dialect):
    assert dialect.read_account(recorded.body("account"), cluster="portal") == (
        "Fixture team",
        "acme",
        None,
    )
    assert dialect.read_account(recorded.body("account_renamed"), cluster="portal")[0] == (
        "Fixture team, renamed"
    )
    assert dialect.read_account(recorded.body("account_missing"), cluster="portal") is None
    assert dialect.read_associations(recorded.body("associations_missing")) == []

    found = {
        (a.user, a.partition): a for a in dialect.read_associations(recorded.body("associations"))
    }
    assert set(found) == {(None, None), ("alice", "gpu")}
    assert found[None, None].parent_account == "root"
    assert dict(found[None, None].grp_tres) == {"gres/gpu:a100": 1}
    assert dict(found["alice", "gpu"].grp_tres) == {}


def test_an_association_whose_default_is_no_object_is_an_unexpected_response(recorded, dialect):
    """The recorded associations with the first one's ``default`` a bare string (no
    ``{"qos": ...}``): read as an answer of another shape, named, not an AttributeError."""
    body = recorded.body("associations")
    body["associations"][0]["default"] = "normal"

    with pytest.raises(UnexpectedResponse, match=r"associations\[0\]\.default"):
        dialect.read_associations(body)


def test_a_partition_that_is_no_object_is_an_unexpected_response(recorded, dialect):
    """``partitions`` holding a bare name where an object belongs: an answer of another shape,
    named by its place, not an AttributeError."""
    body = recorded.body("partitions")
    body["partitions"].insert(0, "gpu")

    with pytest.raises(UnexpectedResponse, match=r"partitions\[0\]"):
        dialect.read_partition_gpus(body)


def test_running_and_pending_jobs(recorded, dialect):
    now = recorded.started() + timedelta(seconds=2)
    (running,) = dialect.read_controller_jobs(recorded.body("job_running"), now=now)
    (pending,) = dialect.read_controller_jobs(recorded.body("job_pending_assoc_grp_gres"), now=now)

    assert (running.state, running.account, running.user) == (
        JobState.RUNNING,
        "fx-team",
        "alice",
    )
    assert running.gpus_allocated == {"a100": 1}
    assert running.job_id == recorded.job_id("job_submit")
    assert running.start == recorded.started()
    assert running.end is None  # the expected end of a running job is not a fact
    assert running.elapsed_s == 2
    assert pending.job_id == recorded.job_id("job_submit_over_cap")
    assert pending.state is JobState.PENDING
    assert pending.state_reason == "AssocGrpGRES"
    assert pending.gpus_requested == {"a100": 2}
    assert pending.gpus_allocated == {}
    assert pending.start is None


def test_running_jobs_hold_the_cards_gres_detail_names(recorded, dialect):
    placements = dialect.read_job_placements(recorded.body("jobs"))

    (job,) = [p for p in placements if p.account == "fx-team"]
    assert job.job_id == recorded.job_id("job_submit")
    assert job.state is JobState.RUNNING
    assert job.slots == (GpuSlot("gpu-a100-01", 0, "a100"),)
    assert [p.state for p in placements] == [JobState.RUNNING]  # the one job then running


def test_a_finished_job_from_accounting(recorded, dialect, version):
    (job,) = dialect.read_accounting_jobs(recorded.body("accounting_job"))

    assert job.job_id == recorded.job_id("job_submit")
    assert job.state is JobState.COMPLETED
    assert job.gpus_allocated == {"a100": 1}
    assert job.start == recorded.started()
    # sleep 3, in whole seconds as each recording's slurmdbd counted it (time.elapsed)
    assert job.elapsed_s == {"v0.0.40": 4, "v0.0.44": 4}.get(version, 3)
    assert (job.end - job.start).total_seconds() == job.elapsed_s


# --------------------------------------------------------------------------- the adapter


def test_an_account_is_created_with_its_association_in_one_call(
    replay, make_adapter, recorded, version
):
    ctld, dbd = paths(version)
    replay.on("GET", f"{dbd}/account/fx-team", recorded.answer("account_missing"))
    replay.on(
        "GET",
        f"{dbd}/associations",
        recorded.answer("associations_missing"),
        recorded.answer("associations_account_only"),
    )
    replay.on("POST", f"{dbd}/accounts_association", recorded.answer("accounts_association"))

    changed = make_adapter(api_version=version).ensure_account(
        "fx-team", description="Fixture team", organization="acme"
    )

    assert changed is True
    assert replay.bodies("POST", f"{dbd}/accounts_association") == [
        recorded.recording("accounts_association")["request_body"]
    ]
    assert replay.sent("POST", f"{dbd}/accounts") == []
    assert replay.sent("POST", f"{dbd}/associations") == []  # not the 22.05 recipe


def test_an_existing_account_only_gets_its_description_updated(
    replay, make_adapter, recorded, version
):
    _, dbd = paths(version)
    replay.on("GET", f"{dbd}/account/fx-team", recorded.answer("account"))
    replay.on("GET", f"{dbd}/associations", recorded.answer("associations_account_only"))
    replay.on("POST", f"{dbd}/accounts", recorded.answer("accounts_post"))
    adapter = make_adapter(api_version=version)

    assert (
        adapter.ensure_account("fx-team", description="Fixture team", organization="acme") is False
    )
    assert adapter.ensure_account(
        "fx-team", description="Fixture team, renamed", organization="acme"
    )
    assert replay.bodies("POST", f"{dbd}/accounts") == [
        recorded.recording("accounts_post")["request_body"]
    ]
    assert replay.sent("POST", f"{dbd}/accounts_association") == []


def test_a_user_joins_through_users_association_and_is_read_back(
    replay, make_adapter, recorded, version
):
    ctld, dbd = paths(version)
    replay.on("GET", f"{ctld}/partitions", recorded.answer("partitions"))
    replay.on(
        "GET",
        f"{dbd}/associations",
        recorded.answer("associations_account_only"),
        recorded.answer("associations"),
    )
    replay.on("POST", f"{dbd}/users_association", recorded.answer("users_association"))

    assert make_adapter(api_version=version).ensure_user_association("fx-team", "alice", "gpu")
    assert replay.bodies("POST", f"{dbd}/users_association") == [
        recorded.recording("users_association")["request_body"]
    ]


def test_a_user_association_slurmdbd_silently_did_not_make_is_an_error(
    replay, make_adapter, recorded, version
):
    ctld, dbd = paths(version)
    replay.on("GET", f"{ctld}/partitions", recorded.answer("partitions"))
    replay.on("GET", f"{dbd}/associations", recorded.answer("associations_account_only"))
    replay.on("POST", f"{dbd}/users_association", recorded.answer("users_association_again"))

    with pytest.raises(SchedulerRejected, match="does not show the association"):
        make_adapter(api_version=version).ensure_user_association("fx-team", "alice", "gpu")


def test_a_limit_is_written_and_read_back(replay, make_adapter, recorded, version):
    ctld, dbd = paths(version)
    replay.on("GET", f"{ctld}/partitions", recorded.answer("partitions"))
    replay.on("GET", f"{dbd}/tres", recorded.answer("tres"))
    replay.on(
        "GET",
        f"{dbd}/associations",
        recorded.answer("associations_account_only"),
        recorded.answer("associations"),
    )
    replay.on("POST", f"{dbd}/associations", recorded.answer("association_modify_grp_tres"))

    assert make_adapter(api_version=version).set_gpu_limit(GpuLimit("fx-team", "gpu", "a100", 1))
    assert replay.bodies("POST", f"{dbd}/associations") == [
        recorded.recording("association_modify_grp_tres")["request_body"]
    ]


def test_a_type_the_cluster_does_not_account_is_refused_before_anything_is_written(
    replay, make_adapter, recorded, version
):
    """On 24.11 such a write answers 200 and clears every GPU limit of the account."""
    ctld, dbd = paths(version)
    partitions = recorded.body("partitions")
    configured = partitions["partitions"][0]["tres"]["configured"]
    partitions["partitions"][0]["tres"]["configured"] = configured + ",gres/gpu:h100=8"
    replay.on("GET", f"{ctld}/partitions", (200, partitions))
    replay.on("GET", f"{dbd}/tres", recorded.answer("tres"))
    replay.on("GET", f"{dbd}/associations", recorded.answer("associations"))

    with pytest.raises(SchedulerRejected, match="does not account TRES 'gres/gpu:h100'"):
        make_adapter(api_version=version).set_gpu_limit(GpuLimit("fx-team", "gpu", "h100", 2))
    assert replay.sent("POST", f"{dbd}/associations") == []


def association_answer(recorded: Recorded, grp_tres: dict[str, int]) -> tuple[int, Any]:
    body = recorded.body("associations_account_only")
    total = []
    for name, count in grp_tres.items():
        kind, _, sub = name.partition("/")
        total.append({"type": kind, "name": sub, "id": 1000 + len(total), "count": count})
    body["associations"][0]["max"]["tres"]["total"] = total
    return 200, body


def test_removing_one_of_two_limits_sends_the_other(replay, make_adapter, recorded, version):
    _, dbd = paths(version)
    both = {"gres/gpu:a100": 2, "gres/gpu:rtx4090": 1}
    replay.on(
        "GET",
        f"{dbd}/associations",
        association_answer(recorded, both),
        association_answer(recorded, {"gres/gpu:rtx4090": 1}),
    )
    replay.on("POST", f"{dbd}/associations", recorded.answer("association_modify_grp_tres"))

    assert make_adapter(api_version=version).remove_gpu_limit("fx-team", "gpu", "a100")
    (body,) = replay.bodies("POST", f"{dbd}/associations")
    assert body["associations"][0]["max"]["tres"]["total"] == [
        {"type": "gres", "name": "gpu:rtx4090", "count": 1}
    ]


def test_removing_the_last_limit_sends_one_clear(replay, make_adapter, recorded, version):
    _, dbd = paths(version)
    replay.on(
        "GET",
        f"{dbd}/associations",
        association_answer(recorded, {"gres/gpu:a100": 2}),
        association_answer(recorded, {}),
    )
    replay.on("POST", f"{dbd}/associations", recorded.answer("association_modify_grp_tres"))

    assert make_adapter(api_version=version).remove_gpu_limit("fx-team", "gpu", "a100")
    (body,) = replay.bodies("POST", f"{dbd}/associations")  # no sentinel, no two-step dance
    assert body["associations"][0]["max"]["tres"]["total"] == [
        {"type": "gres", "name": "gpu:a100", "count": -1}
    ]


def test_a_job_is_submitted_queried_and_cancelled(replay, make_adapter, recorded, version):
    ctld, _ = paths(version)
    pending = recorded.job_id("job_submit_over_cap")
    replay.on("POST", f"{ctld}/job/submit", recorded.answer("job_submit"))
    replay.on("GET", f"{ctld}/job/{pending}", recorded.answer("job_pending_assoc_grp_gres"))
    replay.on("DELETE", f"{ctld}/job/{pending}", recorded.answer("job_cancel"))
    adapter = make_adapter(api_version=version)

    assert adapter.submit_job(spec()) == recorded.job_id("job_submit")
    assert adapter.get_job(pending).state_reason == "AssocGrpGRES"
    adapter.cancel_job(pending)
    assert [r.headers["X-SLURM-USER-NAME"] for r in replay.sent("POST", f"{ctld}/job/submit")] == [
        "alice"
    ]


def test_an_unknown_job_is_looked_up_in_accounting_then_not_found(
    replay, make_adapter, recorded, version
):
    ctld, dbd = paths(version)
    replay.on("GET", f"{ctld}/job/999999", recorded.answer("job_missing"))  # HTTP 404 + 2017
    empty = recorded.body("accounting_job") | {"jobs": []}
    replay.on("GET", f"{dbd}/job/999999", (200, empty))

    with pytest.raises(NotFound):
        make_adapter(api_version=version).get_job(999999)


def test_a_field_the_server_ignores_is_an_error_not_a_job_without_gpus(
    replay, make_adapter, recorded, version
):
    ctld, _ = paths(version)
    replay.on("POST", f"{ctld}/job/submit", recorded.answer("job_submit_unknown_key"))

    with pytest.raises(UnexpectedResponse, match='Ignoring unknown field "gres"'):
        make_adapter(api_version=version).submit_job(spec())


def test_rejections_keep_their_slurm_numbers(replay, make_adapter, recorded, version):
    ctld, dbd = paths(version)
    replay.on("POST", f"{ctld}/job/submit", recorded.answer("job_submit_bad_account"))

    with pytest.raises(SchedulerRejected) as caught:
        make_adapter(api_version=version).submit_job(spec(account="no-such-team"))

    assert caught.value.error_numbers == (2045,)
    assert caught.value.http_status == recorded.recording("job_submit_bad_account")["status"]
    # recorded from 24.11 (v0.0.40-v0.0.42): 500; from 26.05 (v0.0.43-v0.0.45): 422
    assert caught.value.http_status == (500 if version in VERSIONS[:3] else 422)


@pytest.mark.parametrize("side", ["ctld", "dbd"])
def test_a_refused_token_is_renewed_once_then_an_auth_error(
    replay, make_adapter, recorded, version, side
):
    """slurmctld says 511 + 1007; slurmdbd says 502 + 7000 "... authentication error", which
    without its description would read as a database that is down."""
    ctld, dbd = paths(version)
    if side == "ctld":
        replay.on("GET", f"{ctld}/nodes", recorded.answer("bad_token_ctld_diag"))
        call = "list_nodes"
    else:
        replay.on("GET", f"{dbd}/associations", recorded.answer("bad_token_dbd_tres"))
        # 26.05 gives a bare 7000 there, so the adapter asks slurmctld with the same token
        replay.on("GET", f"{ctld}/diag", recorded.answer("bad_token_ctld_diag"))
        call = "get_gpu_limits"
    adapter = make_adapter(api_version=version)

    with pytest.raises(SchedulerAuthError) as caught:
        getattr(adapter, call)(*(() if call == "list_nodes" else ("fx-team",)))

    assert not caught.value.transient
    assert adapter.issued_tokens == ["portal", "portal"]


def test_a_missing_token_is_refused(replay, make_adapter, recorded, version):
    ctld, _ = paths(version)
    replay.on("GET", f"{ctld}/nodes", recorded.answer("no_auth_headers"))  # 401 text/plain

    with pytest.raises(SchedulerAuthError):
        make_adapter(api_version=version).list_nodes()


def test_permission_denied_is_an_auth_error(replay, make_adapter, recorded, version):
    _, dbd = paths(version)
    replay.on("GET", f"{dbd}/account/fx-alice", recorded.answer("account_missing"))
    replay.on("GET", f"{dbd}/associations", recorded.answer("associations_missing"))
    replay.on("POST", f"{dbd}/accounts_association", recorded.answer("permission_denied"))

    with pytest.raises(SchedulerAuthError, match="permission denied"):
        make_adapter(api_version=version).ensure_account(
            "fx-alice", description="x", organization="x"
        )


def test_22_05s_version_is_not_served_and_discovery_picks_the_newest(replay, make_adapter, rec):
    replay.on("GET", "/openapi/v3", Recorded("v0.0.42").answer("openapi_paths"))
    replay.on("GET", "/slurm/v0.0.38/nodes", Recorded("v0.0.42").answer("version_not_served"))

    assert make_adapter(api_version=None).api_version == "v0.0.42"
    with pytest.raises(UnsupportedApiVersion, match="does not serve /slurm/v0.0.38/nodes"):
        make_adapter(api_version="v0.0.38").list_nodes()


def test_every_recording_was_made_by_the_version_it_is_filed_under(recorded):
    for path in sorted(recorded.dir.glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        body = record["body"]
        if not isinstance(body, dict) or "meta" not in body:
            continue
        release = RELEASE.get(recorded.version, "26.05.5")
        if path.name.startswith("slurm-26.05_"):
            release = "26.05.5"
        assert body["meta"]["plugin"]["data_parser"] == f"data_parser/{recorded.version}", path
        assert body["meta"]["slurm"]["release"] == release, path


@pytest.mark.parametrize(
    ("recording", "method", "path", "call"),
    [
        ("slurmctld_down_nodes", "GET", "/slurm/v0.0.42/nodes", "list_nodes"),
        ("slurmctld_down_job_submit", "POST", "/slurm/v0.0.42/job/submit", "submit_job"),
        ("slurmdbd_down_associations", "GET", "/slurmdb/v0.0.42/associations", "get_gpu_limits"),
    ],
)
def test_a_daemon_that_is_down_is_transient_not_an_auth_error(
    replay, make_adapter, recording, method, path, call
):
    """Recorded with slurmctld (1800, after slurmrestd's own 9 s wait) or slurmdbd (7000 without
    "authentication error") stopped: retried later, the token is not blamed."""
    replay.on(method, path, Recorded("v0.0.42").answer(recording))
    replay.on("GET", "/slurm/v0.0.42/diag", Recorded("v0.0.42").answer("diag"))
    adapter = make_adapter(api_version="v0.0.42")
    arguments = {"list_nodes": (), "submit_job": (spec(),), "get_gpu_limits": ("fx-team",)}

    with pytest.raises(SchedulerUnavailable) as caught:
        getattr(adapter, call)(*arguments[call])

    assert caught.value.transient
    assert caught.value.http_status == 502
    assert adapter.issued_tokens == ["alice" if call == "submit_job" else "portal"]


def test_26_05_refuses_a_token_on_the_slurmdbd_side_as_if_it_were_down(replay, make_adapter):
    """26.05.5 answers 502 + a bare 7000 for a token its slurmdbd refuses; slurmctld, asked with
    the same token, says 511 + 1007: a fresh token is tried once, then an auth error."""
    answers = Recorded("v0.0.42")
    replay.on(
        "GET", "/slurmdb/v0.0.42/associations", answers.answer("slurm-26.05_bad_token_dbd_tres")
    )
    replay.on("GET", "/slurm/v0.0.42/diag", answers.answer("slurm-26.05_bad_token_ctld_diag"))
    adapter = make_adapter(api_version="v0.0.42")

    with pytest.raises(SchedulerAuthError):
        adapter.get_gpu_limits("fx-team")

    assert adapter.issued_tokens == ["portal", "portal"]
    assert len(replay.sent("GET", "/slurm/v0.0.42/diag")) == 2


def test_a_token_probe_answer_that_cannot_be_read_leaves_the_first_answer_standing(
    replay, make_adapter
):
    """slurmdbd answers a bare 7000 and slurmctld, asked whether it takes the token, answers
    with an ``errors`` that is no list: the token is not taken as refused (nothing says so),
    and the first answer is what the caller gets -- a scheduler error, not a TypeError."""
    answers = Recorded("v0.0.42")
    replay.on(
        "GET", "/slurmdb/v0.0.42/associations", answers.answer("slurm-26.05_bad_token_dbd_tres")
    )
    replay.on("GET", "/slurm/v0.0.42/diag", (502, {"errors": 5, "warnings": []}))
    adapter = make_adapter(api_version="v0.0.42")

    with pytest.raises(SchedulerUnavailable) as caught:
        adapter.get_gpu_limits("fx-team")

    assert caught.value.error_numbers == (7000,)
    assert adapter.issued_tokens == ["portal"]  # no token renewed on an unreadable probe


def test_26_05_rejects_with_422_and_keeps_the_number(replay, make_adapter):
    replay.on("POST", "/slurm/v0.0.42/job/submit",
              Recorded("v0.0.42").answer("slurm-26.05_job_submit_bad_account"))  # fmt: skip

    with pytest.raises(SchedulerRejected) as caught:
        make_adapter(api_version="v0.0.42").submit_job(spec(account="no-such-team"))

    assert (caught.value.http_status, caught.value.error_numbers) == (422, (2045,))


def test_a_job_whose_nodes_is_an_allocation_object_keeps_its_cards():
    """Issue 38: ``nodes`` as the allocation object (``{"count", "list", "allocation": [...]}``,
    the shape v0.0.42 gives under ``job_resources.nodes``) is read like the host list.

    tests/fixtures/slurm/job_running_nodes_allocation_v0.0.42.json is the recorded job 88
    (1 x a100 on gpu-a100-01, ``gres_detail`` ``gpu:a100:1(IDX:0)``) with that object in
    ``nodes``: its one card is gpu-a100-01's device 0, as from the host list.
    """
    payload = json.loads((FIXTURES / "job_running_nodes_allocation_v0.0.42.json").read_text())[
        "body"
    ]
    assert isinstance(payload["jobs"][0]["nodes"], dict)

    (placement,) = DIALECTS["v0.0.42"].read_job_placements(payload)

    assert placement.job_id == 88
    assert placement.slots == (GpuSlot("gpu-a100-01", 0, "a100"),)


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        ("gpu-a100-[01-02]", ["gpu-a100-01", "gpu-a100-02"]),
        (
            {"count": 2, "list": "gpu-[01-02]", "allocation": [
                {"index": 1, "name": "gpu-02"}, {"index": 0, "name": "gpu-01"}]},
            ["gpu-01", "gpu-02"],
        ),
        ({"count": 2, "list": "gpu-[01-02]"}, ["gpu-01", "gpu-02"]),
        ({"count": 1, "allocation": [{"index": 0}]}, None),
        ({"count": 0}, None),
        (None, None),
    ],
)  # fmt: skip
def test_job_node_names(nodes, expected):
    assert job_node_names({"nodes": nodes}) == expected


def test_an_empty_nodes_falls_back_to_job_resources():
    entry = {"nodes": "", "job_resources": {"nodes": {"list": "gpu-a100-01"}}}

    assert job_node_names(entry) == ["gpu-a100-01"]


def with_mig_gres(recorded: Recorded, gres_type: str, count: int) -> tuple[Any, Any]:
    """The recorded ``/partitions`` and ``/tres`` answers of a cluster whose node also reports
    ``count`` MIG slices as GRES type ``gres_type`` (issue 38). The local Slurm tiers cannot
    report MIG GRES (no MIG hardware for NVML AutoDetect, and a typed gres.conf entry would
    change the shared clusters), so the recorded answers are extended in the shapes their own
    data parser wrote them (``meta.plugin.data_parser``; SchedMD/slurm
    ``src/plugins/data_parser/v0.0.4x/parsers.c`` dumps both): ``tres.configured`` a TRES
    string and ``/tres`` a list of ``{type, name, id, count}``, a MIG type entered exactly as
    the recorded typed GRES is (``gres/gpu:a100=4``, ``{"type": "gres", "name": "gpu:a100"}``):
    Slurm names a typed GRES's TRES ``gres/<name>:<type>`` whatever the type string is."""
    partitions = recorded.body("partitions")
    configured = partitions["partitions"][0]["tres"]["configured"]
    partitions["partitions"][0]["tres"]["configured"] = f"{configured},gres/gpu:{gres_type}={count}"
    tres = recorded.body("tres")
    tres["TRES"].append({"type": "gres", "name": f"gpu:{gres_type}", "id": 1099, "count": 0})
    return partitions, tres


@pytest.mark.parametrize("gres_type", ["1g.10gb", "nvidia_a100_80gb_pcie_1g.10gb"])
def test_a_limit_on_mig_slices_is_written_and_read_back(
    replay, make_adapter, recorded, version, gres_type
):
    """GrpTRES on a MIG GRES type: the cap goes into the account's TRES list like a card type's
    (``gres/gpu:1g.10gb=3`` next to nothing else) and is read back."""
    ctld, dbd = paths(version)
    partitions, tres = with_mig_gres(recorded, gres_type, 7)
    replay.on("GET", f"{ctld}/partitions", (200, partitions))
    replay.on("GET", f"{dbd}/tres", (200, tres))
    replay.on(
        "GET",
        f"{dbd}/associations",
        recorded.answer("associations_account_only"),
        association_answer(recorded, {f"gres/gpu:{gres_type}": 3}),
    )
    replay.on("POST", f"{dbd}/associations", recorded.answer("association_modify_grp_tres"))

    adapter = make_adapter(api_version=version)
    assert adapter.set_gpu_limit(GpuLimit("fx-team", "gpu", gres_type, 3))
    (body,) = [b for b in replay.bodies("POST", f"{dbd}/associations") if b]
    [association] = [a for a in body["associations"] if a["account"] == "fx-team"]
    sent = {(t["type"], t["name"], t["count"]) for t in association["max"]["tres"]["total"]}
    assert ("gres", f"gpu:{gres_type}", 3) in sent
    assert {(lim.gres_type, lim.cards) for lim in adapter.get_gpu_limits("fx-team")} >= {
        (gres_type, 3)
    }
