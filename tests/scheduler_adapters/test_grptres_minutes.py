"""GrpTRESMins in the Slurm adapter's wire shapes: the read (``max.tres.group.minutes``), the
modify body (both lists, as a list left out is cleared) and the sacctmgr command line. The
real servers' behaviour is in tests/integration/slurm/test_grptres_minutes.py."""

import subprocess

from scheduler_adapters.slurm import v0_0_38
from scheduler_adapters.slurm.modern import ModernDialect
from scheduler_adapters.slurm.readers import associations
from scheduler_adapters.slurm.sacctmgr import SacctmgrFallback

# trimmed from a 24.11.5 GET /slurmdb/v0.0.42/associations after
# `sacctmgr modify account ... set GrpTRES=gres/gpu:a100=2 GrpTRESMins=gres/gpu:a100=1200`
REPLY = {
    "associations": [
        {
            "account": "hgrpt_a",
            "user": "",
            "partition": "",
            "parent_account": "root",
            "max": {
                "tres": {
                    "total": [{"type": "gres", "name": "gpu:a100", "id": 1002, "count": 2}],
                    "group": {
                        "minutes": [
                            {"type": "gres", "name": "gpu:a100", "id": 1002, "count": 1200}
                        ],
                        "active": [],
                    },
                    "minutes": {"total": [], "per": {"job": []}},
                    "per": {"job": [], "node": []},
                }
            },
        }
    ]
}


def test_the_minutes_are_read_next_to_grp_tres():
    (found,) = associations(REPLY)
    assert found.grp_tres == {"gres/gpu:a100": 2}
    assert found.grp_tres_mins == {"gres/gpu:a100": 1200}


def test_a_reply_without_group_minutes_reads_as_none():
    reply = {"associations": [dict(REPLY["associations"][0], max={"tres": {"total": []}})]}
    (found,) = associations(reply)
    assert found.grp_tres_mins == {}


def test_the_modify_body_carries_both_lists():
    body = ModernDialect.grp_tres_body(
        "hgrpt_a",
        cluster="portal",
        grp_tres={"gres/gpu:a100": 2},
        grp_tres_mins={"gres/gpu:a100": 120_000},
    )
    assert body == {
        "associations": [
            {
                "account": "hgrpt_a",
                "cluster": "portal",
                "user": "",
                "max": {
                    "tres": {
                        "total": [{"type": "gres", "name": "gpu:a100", "count": 2}],
                        "group": {
                            "minutes": [{"type": "gres", "name": "gpu:a100", "count": 120_000}]
                        },
                    }
                },
            }
        ]
    }
    # only minutes: total goes as an empty list (it would be cleared when left out anyway)
    only = ModernDialect.grp_tres_body(
        "hgrpt_a", cluster="portal", grp_tres={}, grp_tres_mins={"gres/gpu": 60}
    )
    assert only["associations"][0]["max"]["tres"] == {
        "total": [],
        "group": {"minutes": [{"type": "gres", "name": "gpu", "count": 60}]},
    }
    # v0.0.38 (legacy REST GrpTRES writes) carries the minutes along unchanged
    legacy = v0_0_38.grp_tres_body(
        "hgrpt_a", cluster="portal", grp_tres={"gres/gpu:a100": 2}, grp_tres_mins={"gres/gpu": 60}
    )
    assert legacy["associations"][0]["max"]["tres"]["group"] == {
        "minutes": [{"type": "gres", "name": "gpu", "count": 60}]
    }


def test_sacctmgr_sets_both_in_one_command():
    seen = []

    def run(command, **kwargs):
        seen.append(command)
        return subprocess.CompletedProcess(command, 0, " Modified account associations...\n", "")

    fallback = SacctmgrFallback(cluster="portal", run=run)
    fallback.set_grp_tres(
        "hgrpt_a", {}, operation="op", minutes={"gres/gpu:a100": 90_000, "gres/gpu:l4": -1}
    )
    assert seen == [
        [
            "sacctmgr", "--immediate", "modify", "account", "where", "name=hgrpt_a",
            "cluster=portal", "set", "GrpTRESMins=gres/gpu:a100=90000,gres/gpu:l4=-1",
        ]
    ]  # fmt: skip
