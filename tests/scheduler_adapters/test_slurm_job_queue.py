"""``SlurmRestAdapter.job_queue`` over the answers real slurmrestds gave to ``GET /jobs``
(``tests/fixtures/slurm/rest_<v>/``: Slurm 22.05 for v0.0.38, 24.11.5 for v0.0.40-42, 26.05.5
for v0.0.43-45). In each modern recording the account ``fx-team`` (GrpTRES gres/gpu:a100=1)
runs ``job_submit`` (1 x a100, time limit 5 min) while ``job_submit_over_cap`` (2 x a100)
pends on ``AssocGrpGRES``; the 22.05 one has three running ``sandbox`` jobs and a fourth
pending on ``Resources`` with a backfill estimate."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from scheduler_adapters.errors import UnexpectedResponse
from scheduler_adapters.slurm.client import SlurmRestAdapter

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "slurm"
MODERN = ("v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45")


def adapter_for(version: str, body: dict) -> SlurmRestAdapter:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path == f"/slurm/{version}/jobs":
            return httpx.Response(200, json=body)
        return httpx.Response(500, json={"errors": [{"error": f"unexpected {request.url}"}]})

    return SlurmRestAdapter(
        url="http://slurmrestd.test",
        user="portal",
        cluster="portal",
        token_provider=lambda user: "token",
        api_version=version,
        transport=httpx.MockTransport(answer),
    )


def recorded(version: str, name: str) -> dict:
    return json.loads((FIXTURES / f"rest_{version}" / f"{name}.json").read_text())["body"]


def epoch(value) -> datetime:
    number = value["number"] if isinstance(value, dict) else value
    return datetime.fromtimestamp(number, tz=UTC)


@pytest.mark.parametrize("version", MODERN)
def test_the_capped_job_pends_and_the_running_job_holds_the_cap(version):
    body = recorded(version, "jobs")
    raw = {job["job_id"]: job for job in body["jobs"]}
    running_id = max(i for i, j in raw.items() if j["job_state"] == ["RUNNING"])
    pending_id = max(i for i, j in raw.items() if j["job_state"] == ["PENDING"])
    with adapter_for(version, body) as adapter:
        queue = adapter.job_queue(accounts=["fx-team"])

    assert [job.job_id for job in queue.pending] == [pending_id]
    pending = queue.pending[0]
    assert pending.reason == "AssocGrpGRES"
    assert pending.reason_detail is None  # state_description ""
    assert pending.gpus_requested == {"a100": 2}
    assert pending.expected_start is None  # start_time 0: no estimate
    assert pending.time_limit_min == 5
    assert (pending.user, pending.partition, pending.qos) == ("alice", "gpu", "normal")

    assert [job.job_id for job in queue.running] == [running_id]
    running = queue.running[0]
    assert running.gpus_allocated == {"a100": 1}
    # end_time is start + the 5-minute limit: both read from the raw numbers here
    started = epoch(raw[running_id]["start_time"])
    assert running.start == started
    assert running.expected_end == started + timedelta(minutes=5)


@pytest.mark.parametrize("version", MODERN)
def test_other_accounts_are_left_out(version):
    with adapter_for(version, recorded(version, "jobs")) as adapter:
        queue = adapter.job_queue(accounts=["nobody-here"])
    assert queue.pending == () and queue.running == ()


def test_v0_0_38_resources_with_a_backfill_estimate():
    body = recorded("v0.0.38", "jobs_running")
    with adapter_for("v0.0.38", body) as adapter:
        queue = adapter.job_queue()
    assert [job.job_id for job in queue.running] == [1, 2, 3]
    assert [dict(job.gpus_allocated) for job in queue.running] == [
        {"a100": 2}, {"a100": 1}, {"rtx4090": 2},
    ]  # fmt: skip
    (pending,) = queue.pending
    assert (pending.job_id, pending.reason, dict(pending.gpus_requested)) == (
        4, "Resources", {"a100": 4},
    )  # fmt: skip
    assert pending.expected_start == datetime(
        2027, 11, 29, 18, 25, 3, tzinfo=UTC
    )  # epoch 1827512703
    assert pending.time_limit_min is None  # null: the partition's limit


def test_a_bad_account_name_is_refused_before_any_request():
    with adapter_for("v0.0.45", {"jobs": []}) as adapter, pytest.raises(ValueError):
        adapter.job_queue(accounts=["Team A!"])


def test_a_job_list_of_another_shape_names_the_field():
    body = {"jobs": [{"job_id": 1, "job_state": "PENDING", "account": "a"}]}
    with (
        adapter_for("v0.0.45", body) as adapter,
        pytest.raises(UnexpectedResponse, match="job_state"),
    ):
        adapter.job_queue()
