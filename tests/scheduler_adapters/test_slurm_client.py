"""SlurmRestAdapter over recorded slurmrestd answers (httpx.MockTransport, no network)."""

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime

import httpx
import pytest

from scheduler_adapters.errors import (
    NotFound,
    SchedulerAuthError,
    SchedulerRejected,
    SchedulerUnavailable,
    UnexpectedResponse,
    UnsupportedApiVersion,
)
from scheduler_adapters.records import GpuLimit, JobSpec, JobState
from scheduler_adapters.slurm import transport as transport_module
from scheduler_adapters.slurm.associations import UNLIMITED_STAND_IN
from scheduler_adapters.slurm.client import SlurmRestAdapter
from scheduler_adapters.slurm.sacctmgr import SacctmgrFallback
from scheduler_adapters.slurm.transport import mint_token

V = "/slurm/v0.0.38"
DB = "/slurmdb/v0.0.38"
SENTINEL = "zz-portal-sentinel"


def spec(**overrides):
    fields = {
        "account": "fx-team",
        "user": "alice",
        "partition": "gpu",
        "script": "#!/bin/bash\nsleep 2\n",
        "gpus": 1,
        "gres_type": "a100",
    }
    return JobSpec(**(fields | overrides))


def association_payload(account, grp_tres, *, user=None, partition=None):
    total = []
    for name, count in grp_tres.items():
        kind, _, sub = name.partition("/")
        total.append({"type": kind, "name": sub or None, "id": 1, "count": count})
    return {
        "account": account,
        "cluster": "portal",
        "user": user,
        "partition": partition,
        "parent_account": "root" if user is None else None,
        "max": {"tres": {"total": total}},
    }


def associations(*entries):
    return 200, {
        "meta": {"plugin": {"type": "openapi/dbv0.0.38"}},
        "errors": [],
        "associations": list(entries),
    }


def association_route(replay, *answers):
    """Answers GET /associations by the ``account`` asked for: {account: [answers in order]}."""
    queues = {account: list(items) for account, items in answers}

    def handler(request):
        queue = queues[request.url.params["account"]]
        status, body = queue.pop(0) if len(queue) > 1 else queue[0]
        return httpx.Response(status, json=body)

    replay.on("GET", f"{DB}/associations", handler)


# --------------------------------------------------------------------------- discovery, headers


def test_version_is_discovered_from_the_openapi_document(replay, make_adapter, rec):
    replay.on("GET", "/openapi/v3", rec.answer("openapi_paths"))
    replay.on("GET", f"{V}/ping", rec.answer("ping"))

    adapter = make_adapter(api_version=None)

    assert adapter.api_version == "v0.0.38"


def test_version_is_probed_when_the_document_is_missing(replay, make_adapter, rec):
    replay.on("GET", f"{V}/ping", rec.answer("ping"))

    assert make_adapter(api_version=None).api_version == "v0.0.38"
    # newest first; slurmrestd answers 404 for a version it does not serve
    assert [r.url.path for r in replay.requests] == [
        "/openapi/v3",
        "/slurm/v0.0.45/ping",
        "/slurm/v0.0.44/ping",
        "/slurm/v0.0.43/ping",
        "/slurm/v0.0.42/ping",
        "/slurm/v0.0.41/ping",
        "/slurm/v0.0.40/ping",
        f"{V}/ping",
    ]


def test_the_newest_version_both_sides_know_is_chosen(replay, make_adapter):
    """Slurm 24.11 serves v0.0.40-v0.0.42, 25.11 v0.0.41-v0.0.44, 27.x perhaps v0.0.46."""
    served_by_24_11 = {f"/slurm/v0.0.{n}/ping/": {} for n in (40, 41, 42)}
    served_by_25_11 = {f"/slurmdb/v0.0.{n}/jobs/": {} for n in (41, 42, 43, 44)}
    newer = {f"/slurm/v0.0.{n}/ping": {} for n in (44, 45, 46)}
    replay.on(
        "GET",
        "/openapi/v3",
        (200, {"paths": served_by_24_11}),
        (200, {"paths": served_by_25_11}),
        (200, {"paths": newer}),
    )

    assert make_adapter(api_version=None).api_version == "v0.0.42"
    assert make_adapter(api_version=None).api_version == "v0.0.44"
    assert make_adapter(api_version=None).api_version == "v0.0.45"


def test_a_server_with_only_newer_versions_is_refused_clearly(replay, make_adapter):
    paths = {f"/slurm/v0.0.{n}/ping": {} for n in (46, 47)} | {"/slurmdb/v0.0.47/jobs": {}}
    replay.on("GET", "/openapi/v3", (200, {"paths": paths}))

    with pytest.raises(UnsupportedApiVersion) as caught:
        make_adapter(api_version=None).list_nodes()

    assert "serves v0.0.46, v0.0.47" in str(caught.value)
    assert "speaks v0.0.38, v0.0.40, v0.0.41, v0.0.42, v0.0.43, v0.0.44, v0.0.45" in str(
        caught.value
    )
    assert not caught.value.transient


def test_an_unknown_configured_version_is_refused_at_once(make_adapter):
    with pytest.raises(UnsupportedApiVersion, match="v0.0.39"):
        make_adapter(api_version="v0.0.39")


def test_every_request_carries_both_jwt_headers(replay, make_adapter):
    replay.on("GET", f"{V}/nodes", (200, {"errors": [], "nodes": []}))

    make_adapter().list_nodes()

    (request,) = replay.requests
    assert request.headers["X-SLURM-USER-NAME"] == "portal"
    assert request.headers["X-SLURM-USER-TOKEN"] == "token-portal-1"


def test_jobs_are_submitted_as_their_user(replay, make_adapter, rec):
    replay.on("POST", f"{V}/job/submit", rec.answer("job_submit"))

    job_id = make_adapter().submit_job(spec())

    assert job_id == 8
    (request,) = replay.requests
    assert request.headers["X-SLURM-USER-NAME"] == "alice"
    assert request.headers["X-SLURM-USER-TOKEN"] == "token-alice-1"
    assert json.loads(request.content) == rec.recording("job_submit")["request_body"] | {
        "job": rec.recording("job_submit")["request_body"]["job"]
        | {"name": "portal-job", "time_limit": 10}
    }


def test_minted_tokens_are_what_scontrol_token_writes():
    key = b"k" * 32
    token = mint_token(key, "alice", lifespan_s=600, now=1_800_000_000)

    header, claims, signature = token.split(".")

    def decode(segment):
        return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))

    assert json.loads(decode(header)) == {"alg": "HS256", "typ": "JWT"}
    assert json.loads(decode(claims)) == {
        "iat": 1_800_000_000,
        "exp": 1_800_000_600,
        "sun": "alice",
    }
    expected = hmac.new(key, f"{header}.{claims}".encode(), hashlib.sha256).digest()
    assert decode(signature) == expected


def test_minted_tokens_are_renewed_before_they_expire(replay, monkeypatch):
    replay.on("GET", f"{V}/nodes", (200, {"errors": [], "nodes": []}))
    clock = [1000.0]
    monkeypatch.setattr(transport_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(transport_module.time, "time", lambda: 1_800_000_000 + clock[0])
    adapter = SlurmRestAdapter(
        url="http://slurmrestd.test",
        user="portal",
        cluster="portal",
        jwt_key=b"k" * 32,
        token_lifespan_s=120,
        api_version="v0.0.38",
        transport=httpx.MockTransport(replay),
    )

    adapter.list_nodes()
    adapter.list_nodes()
    clock[0] += 61  # renewed a minute before expiry
    adapter.list_nodes()

    tokens = [r.headers["X-SLURM-USER-TOKEN"] for r in replay.requests]
    assert tokens[0] == tokens[1] != tokens[2]


# --------------------------------------------------------------------------- the errors list


@pytest.mark.parametrize(
    "recorded, error, numbers",
    [
        ("job_submit_bad_account", SchedulerRejected, (2045,)),
        ("job_submit_bad_gres", SchedulerRejected, (2014,)),
        ("job_submit_unknown_key", SchedulerRejected, (9001,)),
        ("slurmctld_down_job_submit", SchedulerUnavailable, (1800,)),
    ],
)
def test_submit_errors_keep_slurm_numbers(replay, make_adapter, rec, recorded, error, numbers):
    replay.on("POST", f"{V}/job/submit", rec.answer(recorded))

    with pytest.raises(error) as caught:
        make_adapter().submit_job(spec())

    assert caught.value.error_numbers == numbers
    assert caught.value.operation == "submit_job"
    assert caught.value.http_status == rec.recording(recorded)["status"]
    assert caught.value.transient is (error is SchedulerUnavailable)


def test_an_error_list_in_a_200_is_still_an_error(replay, make_adapter, rec):
    replay.on("GET", f"{DB}/jobs", rec.answer("slurmdbd_down_accounting_jobs"))

    with pytest.raises(SchedulerUnavailable) as caught:
        make_adapter().jobs_from_accounting(rec.now, rec.now)

    assert caught.value.http_status == 200
    assert caught.value.error_numbers == (7000,)


def test_nothing_found_in_accounting_is_an_empty_result(replay, make_adapter, rec):
    replay.on("GET", f"{DB}/jobs", rec.answer("accounting_jobs_none"))

    assert make_adapter().jobs_from_accounting(rec.now, rec.now) == ()


def test_accounting_jobs(replay, make_adapter, rec):
    replay.on("GET", f"{DB}/jobs", rec.answer("accounting_jobs"))
    adapter = make_adapter(time_zone="Europe/Berlin")

    jobs = adapter.jobs_from_accounting(
        datetime(2026, 11, 29, 12, 0, tzinfo=UTC),
        datetime(2026, 11, 29, 23, 30, tzinfo=UTC),
        accounts=["fx-team"],
    )

    assert [job.job_id for job in jobs] == [8, 9, 10]
    (request,) = replay.requests
    assert dict(request.url.params) == {
        "start_time": "2026-11-29T13:00:00",  # the slurmdbd host's local time
        "end_time": "2026-11-30T00:30:00",
        "skip_steps": "true",
        "account": "fx-team",
    }


def test_accounting_window_must_be_aware_and_ordered(make_adapter, rec):
    adapter = make_adapter()
    with pytest.raises(ValueError, match="aware"):
        adapter.jobs_from_accounting(datetime(2026, 1, 1), rec.now)
    with pytest.raises(ValueError, match="before"):
        adapter.jobs_from_accounting(rec.now, datetime(2026, 1, 1, tzinfo=UTC))


def test_permission_denied_is_an_auth_error_without_retry(replay, make_adapter, rec):
    replay.on("DELETE", f"{V}/job/8", rec.answer("permission_denied_cancel"))
    adapter = make_adapter()

    with pytest.raises(SchedulerAuthError) as caught:
        adapter.cancel_job(8)

    assert caught.value.error_numbers == (2002,)
    assert len(replay.requests) == 1


@pytest.mark.parametrize(
    "status, body, error",
    [
        (502, "Bad Gateway", SchedulerUnavailable),
        (503, "", SchedulerUnavailable),
        (200, "<html>proxy login</html>", UnexpectedResponse),
        (200, {"errors": {"oops": 1}}, UnexpectedResponse),
        (200, {"errors": [], "node": []}, UnexpectedResponse),
        (
            200,
            {"meta": {"plugin": {"type": "openapi/slurmctld"}}, "errors": [], "nodes": []},
            UnexpectedResponse,
        ),
    ],
)
def test_bodies_slurmrestd_would_not_send(replay, make_adapter, status, body, error):
    replay.on("GET", f"{V}/nodes", (status, body))

    with pytest.raises(error):
        make_adapter().list_nodes()


PROXY_500 = "<html><head><title>500 Internal Server Error</title></head><body>nginx</body></html>"
UNSPECIFIED = {"errors": [{"error_number": 1, "error": "Unspecified error", "source": "op"}]}
REFUSED = {
    "errors": [
        {
            "error_number": 2045,
            "error": "Invalid account or account/partition combination specified",
        }
    ]
}


@pytest.mark.parametrize(
    "body, error, transient",
    [
        (PROXY_500, SchedulerUnavailable, True),  # a proxy's page: slurmrestd may not have seen it
        (UNSPECIFIED, SchedulerUnavailable, True),  # "it failed", no refusal
        (REFUSED, SchedulerRejected, False),  # a definite refusal stays one
    ],
)
def test_a_500_is_retried_unless_it_is_a_definite_refusal(
    replay, make_adapter, body, error, transient
):
    """Issue 27 item 5: a 500 from slurmrestd (or the proxy before it) that refuses nothing is
    transient, like 502 and timeouts; a 500 naming a Slurm refusal (2045) is not."""
    replay.on("GET", f"{V}/nodes", (500, body))

    with pytest.raises(error) as caught:
        make_adapter().list_nodes()

    assert (caught.value.transient, caught.value.http_status) == (transient, 500)


def test_a_path_the_server_does_not_serve(replay, make_adapter):
    with pytest.raises(UnsupportedApiVersion, match="does not serve /slurm/v0.0.38/nodes"):
        make_adapter().list_nodes()


def test_a_job_from_another_api_version_names_the_field(replay, make_adapter):
    number = {"set": True, "infinite": False, "number": 1795968514}
    job = {"job_id": 8, "job_state": ["RUNNING"], "start_time": number, "submit_time": number}
    replay.on("GET", f"{V}/job/8", (200, {"errors": [], "jobs": [job]}))

    with pytest.raises(UnexpectedResponse, match=r"jobs\[0\].job_state"):
        make_adapter().get_job(8)


# --------------------------------------------------------------------------- tokens


def test_a_token_slurmdbd_refuses_is_renewed_once(replay, make_adapter, rec):
    association_route(
        replay,
        ("fx-team", [rec.answer("expired_token_dbd_associations"), rec.answer("associations")]),
    )
    replay.on("GET", f"{V}/partitions", rec.answer("partitions"))
    adapter = make_adapter()

    limits = adapter.get_gpu_limits("fx-team")

    assert limits == (GpuLimit("fx-team", "gpu", "a100", 1),)
    tokens = [r.headers["X-SLURM-USER-TOKEN"] for r in replay.sent("GET", f"{DB}/associations")]
    assert tokens == ["token-portal-1", "token-portal-2"]


def test_a_controller_side_token_failure_is_told_from_a_down_controller(replay, make_adapter, rec):
    replay.on("GET", f"{V}/job/8", rec.answer("expired_token_ctld_job"), rec.answer("job_running"))
    replay.on("GET", f"{DB}/tres", rec.answer("expired_token_dbd_tres"))
    adapter = make_adapter()

    job = adapter.get_job(8)

    assert job.state is JobState.RUNNING
    # -1 alone is ambiguous: slurmdbd, asked with the same token, said 1007
    assert [r.url.path for r in replay.requests] == [f"{V}/job/8", f"{DB}/tres", f"{V}/job/8"]
    assert adapter.issued_tokens == ["portal", "portal"]


def test_a_down_controller_is_unavailable_not_an_auth_failure(replay, make_adapter, rec):
    replay.on("GET", f"{V}/nodes", rec.answer("slurmctld_down_ping"))
    replay.on("GET", f"{DB}/tres", (200, {"errors": [], "tres": []}))
    adapter = make_adapter()

    with pytest.raises(SchedulerUnavailable) as caught:
        adapter.list_nodes()

    assert caught.value.error_numbers == (-1,)
    assert adapter.issued_tokens == ["portal"]


def test_a_token_refused_twice_is_an_auth_error(replay, make_adapter, rec):
    replay.on("GET", f"{DB}/jobs", rec.answer("expired_token_dbd_tres"))
    adapter = make_adapter()

    with pytest.raises(SchedulerAuthError, match="freshly issued token") as caught:
        adapter.jobs_from_accounting(rec.now, rec.now)

    assert caught.value.error_numbers == (1007,)
    assert adapter.issued_tokens == ["portal", "portal"]
    assert not caught.value.transient


def test_http_401_is_an_auth_failure(replay, make_adapter, rec):
    replay.on("GET", f"{V}/nodes", rec.answer("no_auth_headers"))

    with pytest.raises(SchedulerAuthError):
        make_adapter().list_nodes()
    assert len(replay.requests) == 2


# --------------------------------------------------------------------------- accounts and limits


def test_ensure_account_creates_record_and_association(replay, make_adapter, rec):
    replay.on("GET", f"{DB}/account/fx-team", rec.answer("account_missing"))
    replay.on("POST", f"{DB}/accounts", rec.answer("accounts_post"))
    replay.on("POST", f"{DB}/associations", rec.answer("association_add_account"))
    replay.on("GET", f"{DB}/associations", rec.answer("associations"))

    created = make_adapter().ensure_account(
        "fx-team", description="Fixture team", organization="acme"
    )

    assert created is True
    assert replay.bodies("POST", f"{DB}/accounts") == [
        rec.recording("accounts_post")["request_body"]
    ]
    assert replay.bodies("POST", f"{DB}/associations") == [
        rec.recording("association_add_account")["request_body"]
    ]


def test_ensure_account_twice_writes_nothing(replay, make_adapter, rec):
    replay.on("GET", f"{DB}/account/fx-team", rec.answer("account"))

    assert (
        make_adapter().ensure_account("fx-team", description="Fixture team", organization="acme")
        is False
    )
    assert [r.method for r in replay.requests] == ["GET"]


def test_ensure_account_updates_a_changed_description(replay, make_adapter, rec):
    replay.on("GET", f"{DB}/account/fx-team", rec.answer("account"))
    replay.on("POST", f"{DB}/accounts", rec.answer("accounts_post"))

    assert (
        make_adapter().ensure_account("fx-team", description="Team F", organization="acme") is True
    )
    assert replay.bodies("POST", f"{DB}/accounts")[0]["accounts"][0]["description"] == "Team F"
    assert replay.sent("POST", f"{DB}/associations") == []


def test_user_association_checks_the_partition_and_creates_a_missing_user(
    replay, make_adapter, rec
):
    replay.on("GET", f"{V}/partitions", rec.answer("partitions"))
    association_route(replay, ("fx-team", [associations(association_payload("fx-team", {}))]))
    replay.on("GET", f"{DB}/user/carol", rec.answer("user_missing"))
    replay.on("POST", f"{DB}/users", rec.ok())
    replay.on("POST", f"{DB}/associations", rec.ok())
    adapter = make_adapter()

    assert adapter.ensure_user_association("fx-team", "carol", "gpu") is True
    assert replay.bodies("POST", f"{DB}/users") == [{"users": [{"name": "carol"}]}]
    assert replay.bodies("POST", f"{DB}/associations") == [
        {
            "associations": [
                {"account": "fx-team", "cluster": "portal", "user": "carol", "partition": "gpu"}
            ]
        }
    ]
    with pytest.raises(NotFound) as caught:
        adapter.ensure_user_association("fx-team", "carol", "debug")
    assert (caught.value.kind, caught.value.key) == ("partition", "debug")


def test_existing_user_is_not_posted_again(replay, make_adapter, rec):
    replay.on("GET", f"{V}/partitions", rec.answer("partitions"))
    association_route(replay, ("fx-team", [associations(association_payload("fx-team", {}))]))
    replay.on("GET", f"{DB}/user/portal", (200, {"errors": [], "users": [{"name": "portal"}]}))
    replay.on("POST", f"{DB}/associations", rec.ok())

    make_adapter().ensure_user_association("fx-team", "portal", "gpu")

    assert replay.sent("POST", f"{DB}/users") == []  # a re-post could reset its admin level


def test_set_gpu_limit_sends_the_whole_list_after_touching_the_sentinel(replay, make_adapter, rec):
    before = {"gres/gpu:rtx4090": 2, "cpu": 64}
    after = before | {"gres/gpu:a100": 3}
    replay.on("GET", f"{V}/partitions", rec.answer("partitions"))
    association_route(
        replay,
        (
            "fx-team",
            [
                associations(association_payload("fx-team", before)),
                associations(association_payload("fx-team", after)),
            ],
        ),
        (SENTINEL, [associations(association_payload(SENTINEL, {}))]),
    )
    replay.on("POST", f"{DB}/associations", rec.ok())

    changed = make_adapter().set_gpu_limit(GpuLimit("fx-team", "gpu", "a100", 3))

    assert changed is True
    touch, modify = replay.bodies("POST", f"{DB}/associations")
    assert touch["associations"][0]["account"] == SENTINEL
    assert touch["associations"][0]["max"]["tres"]["total"] == [
        {"type": "gres", "name": "gpu", "count": -1}
    ]
    assert sorted(
        (t["type"], t["name"], t["count"])
        for t in modify["associations"][0]["max"]["tres"]["total"]
    ) == [("cpu", None, 64), ("gres", "gpu:a100", 3), ("gres", "gpu:rtx4090", 2)]


def test_set_gpu_limit_to_the_current_value_writes_nothing(replay, make_adapter, rec):
    replay.on("GET", f"{V}/partitions", rec.answer("partitions"))
    replay.on("GET", f"{DB}/associations", rec.answer("associations"))

    assert make_adapter().set_gpu_limit(GpuLimit("fx-team", "gpu", "a100", 1)) is False
    assert replay.sent("POST", f"{DB}/associations") == []


def test_a_dropped_limit_change_is_retried_then_reported_as_transient(replay, make_adapter, rec):
    replay.on("GET", f"{V}/partitions", rec.answer("partitions"))
    association_route(
        replay,
        ("fx-team", [rec.answer("associations")]),  # slurmdbd keeps answering a100=1
        (SENTINEL, [associations(association_payload(SENTINEL, {}))]),
    )
    replay.on("POST", f"{DB}/associations", rec.ok())

    with pytest.raises(SchedulerRejected) as caught:
        make_adapter().set_gpu_limit(GpuLimit("fx-team", "gpu", "a100", 2))

    assert caught.value.transient is True
    assert "after 3 attempt(s)" in str(caught.value)
    modifies = [
        b
        for b in replay.bodies("POST", f"{DB}/associations")
        if b["associations"][0]["account"] == "fx-team"
    ]
    assert len(modifies) == 3


def test_a_change_dropped_once_succeeds_on_the_second_attempt(replay, make_adapter, rec):
    replay.on("GET", f"{V}/partitions", rec.answer("partitions"))
    one, two = ({"gres/gpu:a100": n} for n in (1, 2))
    association_route(
        replay,
        ("fx-team", [associations(association_payload("fx-team", c)) for c in (one, one, two)]),
        (SENTINEL, [associations(association_payload(SENTINEL, {}))]),
    )
    replay.on("POST", f"{DB}/associations", rec.ok())

    assert make_adapter().set_gpu_limit(GpuLimit("fx-team", "gpu", "a100", 2)) is True
    assert len(replay.sent("POST", f"{DB}/associations")) == 4  # touch + modify, twice


def test_removing_a_limit_raises_it_for_slurmctld_before_clearing_it(replay, make_adapter, rec):
    start = {"gres/gpu:a100": 1, "gres/gpu:rtx4090": 2}
    raised = {"gres/gpu:a100": UNLIMITED_STAND_IN, "gres/gpu:rtx4090": 2}
    done = {"gres/gpu:rtx4090": 2}
    association_route(
        replay,
        (
            "fx-team",
            [associations(association_payload("fx-team", c)) for c in (start, raised, done)],
        ),
        (SENTINEL, [associations(association_payload(SENTINEL, {}))]),
    )
    replay.on("POST", f"{DB}/associations", rec.ok())

    assert make_adapter().remove_gpu_limit("fx-team", "gpu", "a100") is True

    sent = [
        {t["name"]: t["count"] for t in b["associations"][0]["max"]["tres"]["total"]}
        for b in replay.bodies("POST", f"{DB}/associations")
        if b["associations"][0]["account"] == "fx-team"
    ]
    assert sent == [
        {"gpu:a100": UNLIMITED_STAND_IN, "gpu:rtx4090": 2},
        {"gpu:a100": -1, "gpu:rtx4090": 2},
    ]


def test_removing_from_a_missing_account_is_a_no_op(replay, make_adapter, rec):
    replay.on("GET", f"{DB}/associations", rec.answer("associations_missing"))

    assert make_adapter().remove_gpu_limit("fx-missing", "gpu", "a100") is False
    assert [r.method for r in replay.requests] == ["GET"]


def test_limit_targets_are_checked(replay, make_adapter, rec):
    replay.on("GET", f"{V}/partitions", rec.answer("partitions"))
    replay.on("GET", f"{DB}/associations", rec.answer("associations_missing"))
    adapter = make_adapter()

    with pytest.raises(NotFound) as missing_partition:
        adapter.set_gpu_limit(GpuLimit("fx-team", "debug", "a100", 1))
    with pytest.raises(SchedulerRejected, match="no GPUs of type 'h100'"):
        adapter.set_gpu_limit(GpuLimit("fx-team", "gpu", "h100", 1))
    with pytest.raises(NotFound) as missing_account:
        adapter.set_gpu_limit(GpuLimit("fx-missing", "gpu", "a100", 1))
    with pytest.raises(NotFound):
        adapter.get_gpu_limits("fx-missing")

    assert missing_partition.value.kind == "partition"
    assert missing_account.value.kind == "account"
    assert replay.sent("POST", f"{DB}/associations") == []


def test_a_left_over_stand_in_is_not_reported_as_a_limit(replay, make_adapter, rec):
    replay.on("GET", f"{V}/partitions", rec.answer("partitions"))
    replay.on(
        "GET",
        f"{DB}/associations",
        associations(
            association_payload("fx-team", {"gres/gpu:a100": UNLIMITED_STAND_IN, "gres/gpu": 8})
        ),
    )

    assert make_adapter().get_gpu_limits("fx-team") == ()


def test_sacctmgr_fallback_replaces_the_rest_modify(replay, make_adapter, rec):
    commands = []

    def run(command, **kwargs):
        commands.append(command)
        return __import__("subprocess").CompletedProcess(
            command, 0, " Modified account associations...\n", ""
        )

    replay.on("GET", f"{V}/partitions", rec.answer("partitions"))
    association_route(
        replay,
        (
            "fx-team",
            [associations(association_payload("fx-team", c)) for c in ({"gres/gpu:a100": 1}, {})],
        ),
    )
    adapter = make_adapter(sacctmgr=SacctmgrFallback(cluster="portal", run=run))

    assert adapter.remove_gpu_limit("fx-team", "gpu", "a100") is True

    assert commands == [
        [
            "sacctmgr",
            "--immediate",
            "modify",
            "account",
            "where",
            "name=fx-team",
            "cluster=portal",
            "set",
            "GrpTRES=gres/gpu:a100=-1",
        ]
    ]
    assert replay.sent("POST", f"{DB}/associations") == []


# --------------------------------------------------------------------------- jobs


def test_get_job_falls_back_to_accounting(replay, make_adapter, rec):
    replay.on("GET", f"{V}/job/8", rec.answer("job_missing"))
    replay.on("GET", f"{DB}/job/8", rec.answer("accounting_job"))

    job = make_adapter().get_job(8)

    assert (job.job_id, job.state, job.elapsed_s) == (8, JobState.COMPLETED, 3)


def test_unknown_job(replay, make_adapter, rec):
    replay.on("GET", f"{V}/job/999999", rec.answer("job_missing"))
    replay.on("DELETE", f"{V}/job/999999", rec.answer("job_cancel_missing"))
    replay.on("GET", f"{DB}/job/999999", rec.answer("accounting_job_missing"))
    adapter = make_adapter()

    with pytest.raises(NotFound) as by_get:
        adapter.get_job(999999)
    with pytest.raises(NotFound) as by_cancel:
        adapter.cancel_job(999999)

    assert (by_get.value.kind, by_get.value.key) == ("job", 999999)
    assert by_cancel.value.operation == "cancel_job"


def test_cancelling_a_job_the_controller_forgot_is_a_no_op(replay, make_adapter, rec):
    replay.on("DELETE", f"{V}/job/8", rec.answer("job_cancel_missing"))
    replay.on("GET", f"{DB}/job/8", rec.answer("accounting_job"))

    assert make_adapter().cancel_job(8) is None


def test_names_slurm_would_mangle_never_leave(replay, make_adapter):
    adapter = make_adapter()
    with pytest.raises(ValueError):
        adapter.ensure_account("Team A!", description="x", organization="y")
    with pytest.raises(ValueError):
        adapter.get_gpu_limits("team a")
    assert replay.requests == []


def test_list_nodes_reads_gpus_per_gres_type(replay, make_adapter, rec):
    replay.on("GET", f"{V}/nodes", rec.answer("nodes"))

    result = make_adapter().list_nodes()

    assert result.issues == ()
    assert {
        node.hostname: ([gpu.model_name for gpu in node.gpus], node.partitions)
        for node in result.nodes
    } == {
        "gpu-a100-01": (["a100"] * 4, ("gpu",)),
        "gpu-4090-01": (["rtx4090"] * 2, ("gpu",)),
    }


def test_it_is_a_scheduler_adapter(make_adapter):
    from scheduler_adapters.base import SchedulerAdapter

    with make_adapter() as adapter:
        assert isinstance(adapter, SchedulerAdapter)
