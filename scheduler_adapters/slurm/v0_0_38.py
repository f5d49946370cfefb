"""The JSON of slurmrestd's OpenAPI plugins ``v0.0.38`` / ``dbv0.0.38`` (Slurm 22.05).

Everything version-specific lives here: paths, request bodies and the reading of responses.
:class:`~scheduler_adapters.slurm.client.SlurmRestAdapter` speaks only through these names,
so another version is one more module with the same names (see ``SlurmDialect`` in
``client.py``). Source of the shapes: the OpenAPI document that 22.05.8 serves at
``/openapi/v3`` (https://slurm.schedmd.com/rest_api.html for the versions after it), and
responses recorded from a real 22.05.8 in ``tests/fixtures/slurm/``.

Readers raise :class:`~scheduler_adapters.errors.UnexpectedResponse` naming the JSON path when
a field has another shape, which is what a response from another API version looks like.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from scheduler_adapters.errors import UnexpectedResponse
from scheduler_adapters.records import (
    Association,
    GpuSlot,
    JobPlacement,
    JobRecord,
    JobSpec,
    JobState,
)
from scheduler_adapters.slurm.gres import GPU, parse_gres, parse_tres
from scheduler_adapters.slurm.hostlist import expand_hostlist
from scheduler_adapters.slurm.values import unwrap, unwrap_timestamp

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
# Cheapest authenticated slurmdbd call: a token slurmdbd refuses gives error 1007 here.
AUTH_PROBE = f"{DBD}/tres"

# dbv0.0.37 POST /associations never modifies; dbv0.0.38 does (with the pitfalls below).
MODIFIES_ASSOCIATIONS = True


def job_path(job_id: int) -> str:
    """``GET`` (slurmctld view) and ``DELETE`` (cancel, SIGKILL) of one job."""
    return f"{CTLD}/job/{int(job_id)}"


def accounting_job_path(job_id: int) -> str:
    return f"{DBD}/job/{int(job_id)}"


def account_path(name: str) -> str:
    return f"{DBD}/account/{name}"


def user_path(name: str) -> str:
    return f"{DBD}/user/{name}"


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


def grp_tres_body(account: str, *, cluster: str, grp_tres: Mapping[str, int]) -> dict[str, Any]:
    """``POST /associations`` modifying an account association's ``GrpTRES``.

    The list replaces the whole set, so ``grp_tres`` must hold every TRES that keeps a limit;
    a count of -1 clears one. Two 22.05.8 crashes of slurmrestd shape this: an empty ``total``
    list, and a modify without ``max`` of an association that has TRES limits. Callers send
    -1 entries instead of an empty list.
    """
    if not grp_tres:
        raise ValueError(
            "GrpTRES modify needs at least one entry (an empty list crashes slurmrestd)"
        )
    return {
        "associations": [
            {
                "account": account,
                "cluster": cluster,
                "user": "",
                "max": {
                    "tres": {
                        "total": [_tres_entry(name, count) for name, count in grp_tres.items()]
                    }
                },
            }
        ]
    }


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
    return _int(payload, "job_id", "job_id")


def read_account(
    payload: Mapping[str, Any], *, cluster: str
) -> tuple[str | None, str | None, bool] | None:
    """``GET /account/{name}`` -> ``(description, organization, has its own association on
    cluster)``; ``None`` when no account is listed."""
    accounts = _list(payload, "accounts", "accounts")
    if not accounts:
        return None
    entry = accounts[0]
    if not isinstance(entry, dict):
        raise _unexpected("accounts[0]", "an object", entry)
    associations = entry.get("associations") or []
    if not isinstance(associations, list):
        raise _unexpected("accounts[0].associations", "a list", associations)
    own = any(
        isinstance(a, dict) and a.get("cluster") == cluster and not a.get("user")
        for a in associations
    )
    return (
        _optional_str(entry, "description", "accounts[0].description"),
        _optional_str(entry, "organization", "accounts[0].organization"),
        own,
    )


def read_partition_gpus(payload: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """``GET /partitions`` -> ``{partition: {gres_type: cards}}`` from each partition's TRES.

    Untyped GPUs (only ``gres/gpu=N``) are not listed: a GPU limit names a type.
    """
    result: dict[str, dict[str, int]] = {}
    for index, entry in enumerate(_list(payload, "partitions", "partitions")):
        path = f"partitions[{index}]"
        name = _str(entry, "name", f"{path}.name")
        tres = _tres_string(entry.get("tres"), f"{path}.tres")
        result[name] = {
            gres_type: cards
            for gres_type, cards in _gpu_counts(tres).items()
            if gres_type is not None
        }
    return result


def read_associations(payload: Mapping[str, Any]) -> list[Association]:
    """``GET /associations`` -> associations with their ``GrpTRES`` (``max.tres.total``)."""
    associations = []
    for index, entry in enumerate(_list(payload, "associations", "associations")):
        path = f"associations[{index}]"
        if not isinstance(entry, dict):
            raise _unexpected(path, "an object", entry)
        total = _dig(entry, ("max", "tres", "total"), f"{path}.max.tres.total")
        if not isinstance(total, list):
            raise _unexpected(f"{path}.max.tres.total", "a list", total)
        associations.append(
            Association(
                account=_str(entry, "account", f"{path}.account"),
                user=_optional_str(entry, "user", f"{path}.user"),
                partition=_optional_str(entry, "partition", f"{path}.partition"),
                parent_account=_optional_str(entry, "parent_account", f"{path}.parent_account"),
                grp_tres=_tres_list(total, f"{path}.max.tres.total"),
            )
        )
    return associations


def read_controller_jobs(payload: Mapping[str, Any], *, now: datetime) -> list[JobRecord]:
    """``GET /slurm/.../job/{id}`` or ``/jobs`` -> job records.

    slurmctld reports a pending job's expected start and a running job's expected end in
    ``start_time``/``end_time``; only times that have happened are kept. ``elapsed_s`` is
    computed (this version has no such field) up to ``now`` while the job runs.
    """
    records = []
    for index, entry in enumerate(_list(payload, "jobs", "jobs")):
        path = f"jobs[{index}]"
        if not isinstance(entry, dict):
            raise _unexpected(path, "an object", entry)
        state = _job_state(_str(entry, "job_state", f"{path}.job_state"))
        started = state is not None and state is not JobState.PENDING
        start = _timestamp(entry, "start_time", path) if started else None
        end = _timestamp(entry, "end_time", path) if state is not None and state.finished else None
        requested = _gpu_counts(_tres_string(entry.get("tres_req_str"), f"{path}.tres_req_str"))
        allocated = _gpu_counts(_tres_string(entry.get("tres_alloc_str"), f"{path}.tres_alloc_str"))
        records.append(
            JobRecord(
                job_id=_int(entry, "job_id", f"{path}.job_id"),
                name=_optional_str(entry, "name", f"{path}.name"),
                account=_optional_str(entry, "account", f"{path}.account"),
                user=_optional_str(entry, "user_name", f"{path}.user_name"),
                partition=_optional_str(entry, "partition", f"{path}.partition"),
                state=state,
                state_reason=_reason(entry.get("state_reason"), f"{path}.state_reason"),
                gpus_requested=requested,
                gpus_allocated=allocated if started else {},
                submit=_timestamp(entry, "submit_time", path),
                start=start,
                end=end,
                elapsed_s=_elapsed(start, end, now),
            )
        )
    return records


_HOLDING_GPUS = {JobState.RUNNING, JobState.SUSPENDED, JobState.COMPLETING}


def read_job_placements(payload: Mapping[str, Any]) -> list[JobPlacement]:
    """``GET /slurm/.../jobs`` -> the jobs that hold cards now, with the cards they hold.

    ``nodes`` is a host list (``gpu-a100-[01-02]``) and ``gres_detail`` has one GRES string
    per node in that order (``["gpu:a100:2(IDX:0-1)"]``; ``scontrol show job -d`` prints the
    same as ``GRES=``). A job whose details cannot be read keeps no slots (``placed`` false),
    so the caller treats its cards as unknown instead of guessing.
    """
    placements = []
    for index, entry in enumerate(_list(payload, "jobs", "jobs")):
        path = f"jobs[{index}]"
        if not isinstance(entry, dict):
            raise _unexpected(path, "an object", entry)
        state = _job_state(_str(entry, "job_state", f"{path}.job_state"))
        if state not in _HOLDING_GPUS:
            continue
        allocated = _gpu_counts(_tres_string(entry.get("tres_alloc_str"), f"{path}.tres_alloc_str"))
        if not allocated:
            continue
        placements.append(
            JobPlacement(
                job_id=_int(entry, "job_id", f"{path}.job_id"),
                account=_optional_str(entry, "account", f"{path}.account"),
                user=_optional_str(entry, "user_name", f"{path}.user_name"),
                partition=_optional_str(entry, "partition", f"{path}.partition"),
                state=state,
                start=_timestamp(entry, "start_time", path),
                gpus_allocated=allocated,
                slots=_slots(entry, path),
            )
        )
    return placements


def _slots(entry: Mapping[str, Any], path: str) -> tuple[GpuSlot, ...]:
    nodes_text = entry.get("nodes")
    details = entry.get("gres_detail")
    if not isinstance(nodes_text, str) or not isinstance(details, list):
        return ()
    try:
        nodes = expand_hostlist(nodes_text)
    except ValueError:
        return ()
    if len(nodes) != len(details):
        return ()
    slots = []
    for node, detail in zip(nodes, details, strict=True):
        items = parse_gres(detail) if isinstance(detail, str) else None
        if items is None:
            return ()
        for item in items:
            if item.name != GPU:
                continue
            if item.indexes is None or len(item.indexes) != item.count:
                return ()
            slots.extend(GpuSlot(node, device, item.type) for device in item.indexes)
    return tuple(slots)


def read_accounting_jobs(payload: Mapping[str, Any]) -> list[JobRecord]:
    """``GET /slurmdb/.../jobs`` or ``/job/{id}`` -> job records.

    TRES are the lists ``tres.allocated``/``tres.requested`` of ``{type, name, count}``
    (``{"type": "gres", "name": "gpu:a100", "count": 1}``); ``time.elapsed`` is seconds.
    """
    records = []
    for index, entry in enumerate(_list(payload, "jobs", "jobs")):
        path = f"jobs[{index}]"
        if not isinstance(entry, dict):
            raise _unexpected(path, "an object", entry)
        state_block = _dig(entry, ("state",), f"{path}.state")
        if not isinstance(state_block, dict):
            raise _unexpected(f"{path}.state", "an object with 'current'", state_block)
        times = _dig(entry, ("time",), f"{path}.time")
        if not isinstance(times, dict):
            raise _unexpected(f"{path}.time", "an object", times)
        tres = _dig(entry, ("tres",), f"{path}.tres")
        if not isinstance(tres, dict):
            raise _unexpected(f"{path}.tres", "an object", tres)
        elapsed = _number(times.get("elapsed"), f"{path}.time.elapsed")
        records.append(
            JobRecord(
                job_id=_int(entry, "job_id", f"{path}.job_id"),
                name=_optional_str(entry, "name", f"{path}.name"),
                account=_optional_str(entry, "account", f"{path}.account"),
                user=_optional_str(entry, "user", f"{path}.user"),
                partition=_optional_str(entry, "partition", f"{path}.partition"),
                state=_job_state(_str(state_block, "current", f"{path}.state.current")),
                state_reason=_reason(state_block.get("reason"), f"{path}.state.reason"),
                gpus_requested=_gpu_counts(
                    _tres_list(tres.get("requested", []), f"{path}.tres.requested")
                ),
                gpus_allocated=_gpu_counts(
                    _tres_list(tres.get("allocated", []), f"{path}.tres.allocated")
                ),
                submit=_timestamp(times, "submission", f"{path}.time"),
                start=_timestamp(times, "start", f"{path}.time"),
                end=_timestamp(times, "end", f"{path}.time"),
                elapsed_s=None if elapsed is None else int(elapsed),
            )
        )
    return records


# --------------------------------------------------------------------------- helpers


def _gpu_counts(tres: Mapping[str, int | Decimal] | None) -> dict[str | None, int]:
    """``{"gres/gpu": 3, "gres/gpu:a100": 2}`` -> ``{"a100": 2, None: 1}``."""
    if not tres:
        return {}
    typed = {
        name.removeprefix("gres/gpu:"): int(count)
        for name, count in tres.items()
        if name.startswith("gres/gpu:") and count
    }
    total = int(tres.get("gres/gpu", 0) or 0)
    untyped = total - sum(typed.values())
    if untyped > 0:
        typed[None] = untyped
    return typed


def _tres_string(value: Any, path: str) -> dict[str, Decimal] | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise _unexpected(path, "a TRES string such as 'cpu=1,gres/gpu:a100=1'", value)
    try:
        return parse_tres(value)
    except ValueError as exc:
        raise UnexpectedResponse(f"{VERSION}: unreadable TRES at {path}: {exc}") from exc


def _tres_list(value: Any, path: str) -> dict[str, int]:
    if not isinstance(value, list):
        raise _unexpected(path, "a list of {type, name, count}", value)
    result: dict[str, int] = {}
    for index, entry in enumerate(value):
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
            raise _unexpected(f"{path}[{index}]", "an object {type, name, count}", entry)
        count = _number(entry.get("count"), f"{path}[{index}].count")
        if count is None:
            continue  # energy and other TRES Slurm did not measure
        name = entry.get("name")
        key = f"{entry['type']}/{name}" if name else entry["type"]
        result[key] = int(count)
    return result


def _job_state(value: str) -> JobState | None:
    # 22.05 prints the base state; "CANCELLED by 0" style suffixes are sacct's, not REST's.
    word = value.split()[0].upper() if value.strip() else ""
    try:
        return JobState(word)
    except ValueError:
        return None


def _reason(value: Any, path: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _unexpected(path, "a string", value)
    return None if value in ("", "None") else value


def _elapsed(start: datetime | None, end: datetime | None, now: datetime) -> int | None:
    if start is None:
        return 0 if end is None else None
    return max(0, int(((end or now) - start).total_seconds()))


def _timestamp(entry: Mapping[str, Any], key: str, path: str) -> datetime | None:
    try:
        return unwrap_timestamp(entry.get(key))
    except ValueError as exc:
        raise _unexpected(f"{path}.{key}", "epoch seconds", entry.get(key)) from exc


def _number(value: Any, path: str) -> int | float | None:
    try:
        return unwrap(value)
    except ValueError as exc:
        raise _unexpected(path, "a number", value) from exc


def _dig(entry: Mapping[str, Any], keys: tuple[str, ...], path: str) -> Any:
    value: Any = entry
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            raise UnexpectedResponse(f"{VERSION}: response has no {path}")
        value = value[key]
    return value


def _list(payload: Mapping[str, Any], key: str, path: str) -> list[Any]:
    value = payload.get(key) if isinstance(payload, dict) else None
    if not isinstance(value, list):
        raise _unexpected(path, "a list", value)
    return value


def _str(entry: Mapping[str, Any], key: str, path: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str):
        raise _unexpected(path, "a string", value)
    return value


def _optional_str(entry: Mapping[str, Any], key: str, path: str) -> str | None:
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _unexpected(path, "a string or null", value)
    return value or None


def _int(entry: Mapping[str, Any], key: str, path: str) -> int:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _unexpected(path, "an integer", value)
    return value


def _unexpected(path: str, expected: str, got: Any) -> UnexpectedResponse:
    shown = repr(got)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return UnexpectedResponse(
        f"{VERSION} response: expected {path} to be {expected}, got {shown} "
        "(is the server speaking another API version?)"
    )
