"""The JSON of slurmrestd's OpenAPI plugins ``v0.0.38`` / ``dbv0.0.38`` (Slurm 22.05).

Everything version-specific lives here: paths, request bodies and the reading of responses.
:class:`~scheduler_adapters.slurm.client.SlurmRestAdapter` speaks only through these names,
so another version is one more module with the same names (see ``DIALECTS`` in
``dialects.py``). Source of the shapes: the OpenAPI document that 22.05.8 serves at
``/openapi/v3`` (https://slurm.schedmd.com/rest_api.html for the versions after it), and
responses recorded from a real 22.05.8 in ``tests/fixtures/slurm/``.

Readers raise :class:`~scheduler_adapters.errors.UnexpectedResponse` naming the JSON path when
a field has another shape, which is what a response from another API version looks like.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from scheduler_adapters.records import (
    AccountQos,
    Association,
    JobPlacement,
    JobQueue,
    JobRecord,
    JobSpec,
    JobState,
    QosSpec,
)
from scheduler_adapters.slurm.readers import (
    accounting_jobs,
    associations,
    controller_jobs,
    grp_tres_modify_body,
    int_at,
    job_placements,
    job_queue,
    job_state_word,
    list_at,
    optional_str_at,
    partition_gpus,
    qos_records,
    unexpected,
)
from scheduler_adapters.slurm.readers import (
    association_qos_body as _association_qos_body,
)
from scheduler_adapters.slurm.readers import qos_body as _qos_body

VERSION = "v0.0.38"
CTLD = f"/slurm/{VERSION}"
DBD = f"/slurmdb/{VERSION}"
PLUGINS = (f"openapi/{VERSION}", f"openapi/db{VERSION}")

PING = f"{CTLD}/ping"
NODES = f"{CTLD}/nodes"
PARTITIONS = f"{CTLD}/partitions"
JOB_SUBMIT = f"{CTLD}/job/submit"
JOBS = f"{CTLD}/jobs"
ACCOUNTS = f"{DBD}/accounts"
USERS = f"{DBD}/users"
ASSOCIATIONS = f"{DBD}/associations"
ACCOUNTING_JOBS = f"{DBD}/jobs"
QOS = f"{DBD}/qos"
# What slurmctld-side calls report both for a refused token and for a controller that is down;
# the cheapest authenticated slurmdbd call tells them apart (a refused token gives 1007 there).
AMBIGUOUS_ERRORS = frozenset({-1, 5005})
AUTH_PROBE = f"{DBD}/tres"

# dbv0.0.37 POST /associations never modifies; dbv0.0.38 does (with the pitfalls below).
MODIFIES_ASSOCIATIONS = True
# 22.05.8's slurmdbd drops a modify of its parent's first child and a REST clear may never
# reach slurmctld: the client keeps a sentinel account and clears in two steps (associations.py)
LEGACY_ASSOCIATION_WORKAROUNDS = True
# an unknown GRES type in a GrpTRES write is an error here, not a silent clear
CHECKS_TRES_BEFORE_WRITE = False
# no one-call account + association, no users_association: two calls each (see associations.py)
ACCOUNTS_ASSOCIATION = None
SHARES = None  # sshare over REST came with 23.02 (v0.0.39)
USERS_ASSOCIATION = None


def job_path(job_id: int) -> str:
    """``GET`` (slurmctld view) and ``DELETE`` (cancel, SIGKILL) of one job."""
    return f"{CTLD}/job/{int(job_id)}"


def accounting_job_path(job_id: int) -> str:
    return f"{DBD}/job/{int(job_id)}"


def account_path(name: str) -> str:
    return f"{DBD}/account/{name}"


def user_path(name: str) -> str:
    return f"{DBD}/user/{name}"


def qos_path(name: str) -> str:
    """``GET`` of one QOS; nothing found is ``{"QOS": []}`` without an error (22.05.8)."""
    return f"{DBD}/qos/{name}"


# --------------------------------------------------------------------------- request bodies


def account_body(account: str, *, description: str, organization: str) -> dict[str, Any]:
    """``POST /accounts``: an upsert of the account record only (no association)."""
    return {
        "accounts": [{"name": account, "description": description, "organization": organization}]
    }


def account_association_body(account: str, *, cluster: str, parent: str) -> dict[str, Any]:
    """``POST /associations`` creating an account's own association.

    ``user`` is left out on purpose: with ``"user": ""`` 22.05 creates the association with
    parent_id 0, outside the tree. Leaving it out makes slurmrestd answer with the harmless
    error "Missing required field 'user'" (see :func:`is_missing_user_notice`).
    """
    return {"associations": [{"account": account, "cluster": cluster, "parent_account": parent}]}


def user_body(user: str) -> dict[str, Any]:
    """``POST /users``: an upsert; ``default.account`` is ignored by 22.05."""
    return {"users": [{"name": user}]}


def user_association_body(
    account: str, user: str, *, cluster: str, partition: str
) -> dict[str, Any]:
    return {
        "associations": [
            {"account": account, "cluster": cluster, "user": user, "partition": partition}
        ]
    }


def grp_tres_body(
    account: str,
    *,
    cluster: str,
    grp_tres: Mapping[str, int],
    grp_tres_mins: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """``POST /associations`` modifying an account association's ``GrpTRES`` (and, sent along
    unchanged so that nothing else moves, its ``GrpTRESMins``, ``max.tres.group.minutes``).

    The list replaces the whole set, so ``grp_tres`` must hold every TRES that keeps a limit;
    a count of -1 clears one. Two 22.05.8 crashes of slurmrestd shape this: an empty ``total``
    list, and a modify without ``max`` of an association that has TRES limits. Callers send
    -1 entries instead of an empty list.
    """
    if not grp_tres:
        raise ValueError(
            "GrpTRES modify needs at least one entry (an empty list crashes slurmrestd)"
        )
    total = [_tres_entry(name, count) for name, count in grp_tres.items()]
    minutes = [_tres_entry(name, count) for name, count in (grp_tres_mins or {}).items()]
    return grp_tres_modify_body(account, cluster, total, minutes)


def qos_body(spec: QosSpec) -> dict[str, Any]:
    """``POST /qos``: an upsert of one QOS. The list key is ``"QOS"`` here (``"qos"`` answers
    9200 "Unable to resolve path", seen on 22.05.8) and ``priority`` a bare integer."""
    return _qos_body(spec, "QOS", wrap_numbers=False)


def association_qos_body(
    account: str,
    *,
    cluster: str,
    qos: AccountQos,
    grp_tres: Mapping[str, int],
    grp_tres_mins: Mapping[str, int],
) -> dict[str, Any]:
    """``POST /associations`` setting the account association's QOS list and DefaultQOS.
    ``max`` always goes along (22.05.8's slurmrestd crashes on a modify without it of an
    association with TRES limits); with no GrpTRES a harmless ``gres/gpu`` clear (-1) stands in
    for the list, as an empty one crashes it too."""
    total = [_tres_entry(n, c) for n, c in (dict(grp_tres) or {"gres/gpu": -1}).items()]
    minutes = [_tres_entry(n, c) for n, c in grp_tres_mins.items()]
    return _association_qos_body(account, cluster, qos, total, minutes)


def _tres_entry(name: str, count: int) -> dict[str, Any]:
    tres_type, _, tres_name = name.partition("/")
    return {"type": tres_type, "name": tres_name or None, "count": int(count)}


def job_submit_body(spec: JobSpec) -> dict[str, Any]:
    """``POST /job/submit`` (sbatch). 22.05 requires ``environment`` (error 2127 without it)."""
    job: dict[str, Any] = {
        "name": spec.name,
        "account": spec.account,
        "partition": spec.partition,
        "time_limit": spec.time_limit_min,
        "memory_per_node": spec.memory_mib,
        "current_working_directory": spec.working_directory,
        "standard_output": spec.stdout,
        "environment": dict(spec.environment),
    }
    if spec.gpus:
        job["gres"] = f"gpu:{spec.gres_type}:{spec.gpus}" if spec.gres_type else f"gpu:{spec.gpus}"
    if spec.reservation:
        job["reservation"] = spec.reservation
    if spec.qos:
        job["qos"] = spec.qos
    return {"script": spec.script, "job": job}


def accounting_jobs_params(
    start: datetime, end: datetime, accounts: tuple[str, ...] | None
) -> dict[str, str]:
    """Query of ``GET /slurmdb/.../jobs``: sacct's ``-S``/``-E`` window.

    ``start``/``end`` must already be in the slurmdbd host's local time: 22.05 takes only
    sacct's text formats (an epoch number gives error 9000), read in that zone.
    """
    params = {
        "start_time": start.strftime("%Y-%m-%dT%H:%M:%S"),
        "end_time": end.strftime("%Y-%m-%dT%H:%M:%S"),
        "skip_steps": "true",
    }
    if accounts:
        params["account"] = ",".join(accounts)
    return params


# --------------------------------------------------------------------------- response readers


def is_missing_user_notice(error: Mapping[str, Any]) -> bool:
    """The harmless notice 22.05 gives when an account association is created without user."""
    return error.get("source") == "_parser_run" and "Missing required field 'user'" in str(
        error.get("description", "")
    )


def plugin_type(payload: Mapping[str, Any]) -> str | None:
    """``meta.plugin.type`` (``"openapi/v0.0.38"``), ``None`` when absent."""
    meta = payload.get("meta")
    plugin = meta.get("plugin") if isinstance(meta, dict) else None
    value = plugin.get("type") if isinstance(plugin, dict) else None
    return value if isinstance(value, str) else None


def read_submitted_job_id(payload: Mapping[str, Any]) -> int:
    return int_at(payload, "job_id", "job_id")


def read_account(
    payload: Mapping[str, Any], *, cluster: str
) -> tuple[str | None, str | None, bool] | None:
    """``GET /account/{name}`` -> ``(description, organization, has its own association on
    cluster)``; ``None`` when no account is listed."""
    accounts = list_at(payload, "accounts", "accounts")
    if not accounts:
        return None
    entry = accounts[0]
    if not isinstance(entry, dict):
        raise unexpected("accounts[0]", "an object", entry)
    associations = entry.get("associations") or []
    if not isinstance(associations, list):
        raise unexpected("accounts[0].associations", "a list", associations)
    own = any(
        isinstance(a, dict) and a.get("cluster") == cluster and not a.get("user")
        for a in associations
    )
    return (
        optional_str_at(entry, "description", "accounts[0].description"),
        optional_str_at(entry, "organization", "accounts[0].organization"),
        own,
    )


def _job_state(value: Any, path: str) -> JobState | None:
    if not isinstance(value, str):
        raise unexpected(path, "a job state string", value)
    return job_state_word(value)


def _partition_tres(value: Any, path: str) -> Any:
    return value  # a TRES string in 22.05


def read_partition_gpus(payload: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """``GET /partitions`` -> ``{partition: {gres_type: cards}}`` (``tres`` is a string)."""
    return partition_gpus(payload, partition_tres=_partition_tres)


def read_qos(payload: Mapping[str, Any]) -> list[QosSpec]:
    """``GET /qos[/{name}]`` -> the QOS listed (key ``"QOS"``)."""
    return qos_records(payload, "QOS")


def read_associations(payload: Mapping[str, Any]) -> list[Association]:
    """``GET /associations`` -> associations with their ``GrpTRES`` (``max.tres.total``)."""
    return associations(payload)


def read_controller_jobs(payload: Mapping[str, Any], *, now: datetime) -> list[JobRecord]:
    """``GET /slurm/.../job/{id}`` or ``/jobs`` -> job records (``job_state`` a string)."""
    return controller_jobs(payload, now=now, job_state=_job_state)


def read_job_placements(payload: Mapping[str, Any]) -> list[JobPlacement]:
    """``GET /slurm/.../jobs`` -> the jobs that hold cards now, with the cards they hold."""
    return job_placements(payload, job_state=_job_state)


def read_job_queue(
    payload: Mapping[str, Any], *, accounts: frozenset[str] | None = None
) -> JobQueue:
    """``GET /slurm/.../jobs`` -> pending jobs with reasons and jobs holding cards with ends."""
    return job_queue(payload, job_state=_job_state, accounts=accounts)


def read_accounting_jobs(payload: Mapping[str, Any]) -> list[JobRecord]:
    """``GET /slurmdb/.../jobs`` or ``/job/{id}`` -> job records (``state.current`` a string)."""
    return accounting_jobs(payload, job_state=_job_state)
