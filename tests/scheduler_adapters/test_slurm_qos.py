"""QOS bodies and readers per API version (issue #36), against replies recorded from the test
clusters (22.05.8 v0.0.38, 24.11.5 v0.0.42, 26.05.5 v0.0.45), and the fake's refusals."""

from __future__ import annotations

import subprocess

import pytest

from scheduler_adapters.errors import NotFound, SchedulerRejected
from scheduler_adapters.fake import FakeScheduler
from scheduler_adapters.records import AccountQos, QosSpec
from scheduler_adapters.slurm import v0_0_38
from scheduler_adapters.slurm.dialects import DIALECTS
from scheduler_adapters.slurm.sacctmgr import SacctmgrFallback

PROD = QosSpec("hqos-probe-p", 1000, ("hqos-probe-b",), "REQUEUE", description="probe")

# GET /slurmdb/v0.0.38/qos/hqos-probe-p on 22.05.8 (limits left out)
REPLY_38 = {
    "errors": [],
    "QOS": [
        {
            "description": "probe",
            "flags": [],
            "id": 4,
            "name": "hqos-probe-p",
            "preempt": {"list": ["hqos-probe-b"], "mode": ["REQUEUE"], "exempt_time": None},
            "priority": 1000,
            "usage_factor": 1.0,
            "usage_threshold": None,
        }
    ],
}
# the same on 24.11.5 (v0.0.42) and 26.05.5 (v0.0.45): numbers are {set, infinite, number}
REPLY_4X = {
    "errors": [],
    "warnings": [],
    "qos": [
        {
            "description": "probe",
            "flags": [],
            "id": 4,
            "name": "hqos-probe-p",
            "preempt": {
                "list": ["hqos-probe-b"],
                "mode": ["REQUEUE"],
                "exempt_time": {"set": False, "infinite": True, "number": 0},
            },
            "priority": {"set": True, "infinite": False, "number": 1000},
            "usage_factor": {"set": True, "infinite": False, "number": 1.0},
            "usage_threshold": {"set": False, "infinite": True, "number": 0.0},
        }
    ],
}


def test_v0_0_38_qos_body_and_reader():
    assert v0_0_38.qos_body(PROD) == {
        "QOS": [
            {
                "name": "hqos-probe-p",
                "description": "probe",
                "priority": 1000,
                "preempt": {"list": ["hqos-probe-b"], "mode": ["REQUEUE"]},
            }
        ]
    }
    assert v0_0_38.read_qos(REPLY_38) == [PROD]
    assert v0_0_38.QOS == "/slurmdb/v0.0.38/qos"


@pytest.mark.parametrize("version", ["v0.0.41", "v0.0.42", "v0.0.45"])
def test_modern_qos_body_and_reader(version):
    dialect = DIALECTS[version]
    body = dialect.qos_body(PROD)
    assert body["qos"][0]["priority"] == {"set": True, "number": 1000}
    assert body["qos"][0]["preempt"] == {"list": ["hqos-probe-b"], "mode": ["REQUEUE"]}
    assert dialect.read_qos(REPLY_4X) == [PROD]
    assert dialect.qos_path("x") == f"/slurmdb/{version}/qos/x"


def test_a_qos_without_a_mode_of_its_own_reads_as_cluster_and_is_not_writable():
    reply = {"QOS": [{"name": "normal", "priority": 0, "preempt": {"list": [], "mode": []}}]}
    (normal,) = v0_0_38.read_qos(reply)
    assert normal.preempt_mode == "CLUSTER"
    with pytest.raises(ValueError, match="one of CANCEL, REQUEUE"):
        normal.check_writable()


def test_association_qos_bodies_send_the_limits_along():
    wanted = AccountQos("team-a", ("hqos-b", "hqos-p"), "hqos-b")
    modern = DIALECTS["v0.0.42"].association_qos_body(
        "team-a", cluster="portal", qos=wanted, grp_tres={"gres/gpu:a100": 3}, grp_tres_mins={}
    )
    entry = modern["associations"][0]
    assert entry["qos"] == ["hqos-b", "hqos-p"] and entry["default"] == {"qos": "hqos-b"}
    assert entry["max"]["tres"]["total"] == [{"type": "gres", "name": "gpu:a100", "count": 3}]
    bare = DIALECTS["v0.0.42"].association_qos_body(
        "team-a", cluster="portal", qos=wanted, grp_tres={}, grp_tres_mins={}
    )
    assert "max" not in bare["associations"][0]
    # 22.05 crashes on a modify without max: a harmless gres/gpu clear stands in
    legacy = v0_0_38.association_qos_body(
        "team-a", cluster="portal", qos=wanted, grp_tres={}, grp_tres_mins={}
    )
    assert legacy["associations"][0]["max"]["tres"]["total"] == [
        {"type": "gres", "name": "gpu", "count": -1}
    ]


def test_specs_refuse_what_slurm_would_store_wrongly():
    with pytest.raises(ValueError, match="itself"):
        QosSpec("hqos-a", 1, ("hqos-a",))
    with pytest.raises(ValueError, match="sorted"):
        QosSpec("hqos-a", 1, ("hqos-c", "hqos-b"))
    with pytest.raises(ValueError, match="priority"):
        QosSpec("hqos-a", -1)
    with pytest.raises(ValueError, match="QOS name"):
        QosSpec("Prod QOS!", 1)
    with pytest.raises(ValueError, match="default QOS"):
        AccountQos("team-a", ("hqos-a",), "hqos-b")


def test_the_fake_refuses_what_slurmdbd_refuses():
    fake = FakeScheduler()
    with pytest.raises(NotFound):  # the QOS it preempts does not exist yet
        fake.ensure_qos(PROD)
    assert fake.ensure_qos(QosSpec("hqos-probe-b", 10, (), "CANCEL")) is True
    assert fake.ensure_qos(PROD) is True
    assert fake.ensure_qos(PROD) is False
    with pytest.raises(NotFound):  # no such account
        fake.set_account_qos(AccountQos("team-a", ("hqos-probe-p",)))
    fake.ensure_account("team-a", description="A", organization="a")
    assert fake.get_account_qos("team-a") == AccountQos("team-a", ("normal",))
    with pytest.raises(NotFound):  # no such QOS
        fake.set_account_qos(AccountQos("team-a", ("hqos-none",)))
    assert fake.set_account_qos(AccountQos("team-a", ("hqos-probe-p",), "hqos-probe-p")) is True
    assert fake.get_account_qos("team-a").default == "hqos-probe-p"


# --------------------------------------------------------------------------- the client, replayed

DB38 = "/slurmdb/v0.0.38"
META38 = {"meta": {"plugin": {"type": "openapi/dbv0.0.38"}}, "errors": []}


def _qos_reply(*entries):
    return 200, META38 | {"QOS": list(entries)}


def _qos_entry(name, priority, preempts=(), mode="REQUEUE"):
    return {
        "name": name,
        "description": name,
        "priority": priority,
        "preempt": {"list": list(preempts), "mode": [mode]},
    }


def _assoc_reply(qos, default, grp_tres=None):
    total = [
        {"type": "gres", "name": n.removeprefix("gres/"), "count": c}
        for n, c in (grp_tres or {}).items()
    ]
    entry = {
        "account": "fx-team",
        "cluster": "portal",
        "user": None,
        "partition": None,
        "parent_account": "root",
        "max": {"tres": {"total": total}},
        "qos": list(qos),
        "default": {"qos": default},
    }
    return 200, META38 | {"associations": [entry]}


def test_ensure_qos_posts_then_reads_back(replay, make_adapter):
    replay.on(
        "GET",
        f"{DB38}/qos/hqos-probe-p",
        _qos_reply(),  # first read: none
        _qos_reply(_qos_entry("hqos-probe-p", 1000, ["hqos-probe-b"])),  # read back
    )
    replay.on("GET", f"{DB38}/qos/hqos-probe-b", _qos_reply(_qos_entry("hqos-probe-b", 10)))
    replay.on("POST", f"{DB38}/qos", (200, META38))

    assert make_adapter().ensure_qos(PROD) is True
    assert replay.bodies("POST", f"{DB38}/qos") == [v0_0_38.qos_body(PROD)]


def test_ensure_qos_raises_when_slurmdbd_shows_something_else(replay, make_adapter):
    replay.on(
        "GET",
        f"{DB38}/qos/hqos-probe-p",
        _qos_reply(),
        _qos_reply(_qos_entry("hqos-probe-p", 1000, [])),  # the preempt list did not stick
    )
    replay.on("GET", f"{DB38}/qos/hqos-probe-b", _qos_reply(_qos_entry("hqos-probe-b", 10)))
    replay.on("POST", f"{DB38}/qos", (200, META38))

    with pytest.raises(SchedulerRejected, match="accepted QOS 'hqos-probe-p' but shows"):
        make_adapter().ensure_qos(PROD)


def test_account_qos_on_22_05_goes_through_sacctmgr_or_is_refused(replay, make_adapter):
    replay.on("GET", f"{DB38}/qos/hqos-probe-p", _qos_reply(_qos_entry("hqos-probe-p", 1000)))
    replay.on(
        "GET",
        f"{DB38}/associations",
        _assoc_reply(["normal"], None, {"gres/gpu:a100": 2}),
        _assoc_reply(["normal"], None, {"gres/gpu:a100": 2}),  # the refused attempt's read
        _assoc_reply(["hqos-probe-p"], "hqos-probe-p", {"gres/gpu:a100": 2}),
    )
    wanted = AccountQos("fx-team", ("hqos-probe-p",), "hqos-probe-p")

    with pytest.raises(SchedulerRejected, match="enable the sacctmgr fallback"):
        make_adapter().set_account_qos(wanted)
    assert replay.sent("POST", f"{DB38}/associations") == []  # nothing half-applied

    commands = []

    def run(command, **kwargs):
        commands.append(command)
        return subprocess.CompletedProcess(command, 0, " Modified account associations...\n", "")

    adapter = make_adapter(sacctmgr=SacctmgrFallback(cluster="portal", run=run))
    assert adapter.set_account_qos(wanted) is True
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
            "QOS=hqos-probe-p",
            "DefaultQOS=hqos-probe-p",
        ]
    ]
