"""Reading (and the one request body) of slurmrestd JSON, shared by every API version's dialect.

Each helper takes the value (or the object and key) and the JSON path it came from, and raises
:class:`~scheduler_adapters.errors.UnexpectedResponse` naming that path when the field has
another shape, which is what a response from another API version looks like. Numbers may be
bare (v0.0.38) or ``{set, infinite, number}`` objects (v0.0.39 on): :mod:`.values` folds both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from scheduler_adapters.errors import UnexpectedResponse
from scheduler_adapters.records import (
    AccountQos,
    Association,
    GpuSlot,
    JobPlacement,
    JobQueue,
    JobRecord,
    JobState,
    PendingJob,
    QosSpec,
    RunningJob,
)
from scheduler_adapters.slurm.gres import GPU, parse_gres, parse_tres
from scheduler_adapters.slurm.hostlist import expand_hostlist
from scheduler_adapters.slurm.values import unwrap, unwrap_timestamp

HOLDING_GPUS = frozenset({JobState.RUNNING, JobState.SUSPENDED, JobState.COMPLETING})
"""Job states in which a job holds its allocated cards."""

StateReader = Callable[[Any, str], "JobState | None"]
"""Reads a job's state field (``job_state`` or ``state.current``) at a JSON path: a string in
v0.0.38, a list of words from v0.0.40 on."""


def unexpected(path: str, expected: str, got: Any) -> UnexpectedResponse:
    """The error for a field of the wrong shape: ``expected <path> to be <expected>``."""
    shown = repr(got)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return UnexpectedResponse(
        f"slurmrestd response: expected {path} to be {expected}, got {shown} "
        "(is the server speaking another API version?)"
    )


def dig(entry: Mapping[str, Any], keys: tuple[str, ...], path: str) -> Any:
    """``entry[k1][k2]...``; a missing level raises naming ``path``."""
    value: Any = entry
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            raise UnexpectedResponse(f"slurmrestd response has no {path}")
        value = value[key]
    return value


def list_at(payload: Mapping[str, Any], key: str, path: str) -> list[Any]:
    value = payload.get(key) if isinstance(payload, dict) else None
    if not isinstance(value, list):
        raise unexpected(path, "a list", value)
    return value


def str_at(entry: Mapping[str, Any], key: str, path: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str):
        raise unexpected(path, "a string", value)
    return value


def optional_str_at(entry: Mapping[str, Any], key: str, path: str) -> str | None:
    """A string field; ``None`` for null or ``""`` (v0.0.4x: ``""`` for 22.05's null)."""
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise unexpected(path, "a string or null", value)
    return value or None


def int_at(entry: Mapping[str, Any], key: str, path: str) -> int:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise unexpected(path, "an integer", value)
    return value


def number(value: Any, path: str) -> int | float | None:
    """A slurmrestd number (bare or ``{set, infinite, number}``); ``None`` when unset."""
    try:
        return unwrap(value)
    except ValueError as exc:
        raise unexpected(path, "a number", value) from exc


def timestamp_at(entry: Mapping[str, Any], key: str, path: str) -> datetime | None:
    """Epoch seconds (bare or wrapped) as an aware UTC datetime; 0 and unset are ``None``."""
    try:
        return unwrap_timestamp(entry.get(key))
    except ValueError as exc:
        raise unexpected(f"{path}.{key}", "epoch seconds", entry.get(key)) from exc


def reason(value: Any, path: str) -> str | None:
    """A job's state reason; ``"None"`` (Slurm's word for no reason) is ``None``."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise unexpected(path, "a string", value)
    return None if value in ("", "None") else value


def job_state_word(value: str) -> JobState | None:
    """22.05's ``job_state`` string (the base state) -> :class:`JobState`; unknown -> ``None``."""
    word = value.split()[0].upper() if value.strip() else ""
    try:
        return JobState(word)
    except ValueError:
        return None


def job_state_list(value: Any, path: str) -> JobState | None:
    """v0.0.40+'s ``job_state`` / ``state.current`` list: the base state followed by flags
    (``["PENDING"]``, ``["RUNNING", "COMPLETING"]``; job_state_string in slurm_protocol_defs.c
    puts the base state first). The COMPLETING flag wins, as 22.05's single word did; otherwise
    the first word that is a state. ``None`` when no word is one."""
    if not isinstance(value, list) or not all(isinstance(word, str) for word in value):
        raise unexpected(path, "a list of state words", value)
    words = [word.upper() for word in value]
    if "COMPLETING" in words:
        return JobState.COMPLETING
    for word in words:
        try:
            return JobState(word)
        except ValueError:
            continue
    return None


def elapsed_s(start: datetime | None, end: datetime | None, now: datetime) -> int | None:
    """Seconds a job has run up to ``end`` (or ``now`` while it runs); 0 before it started."""
    if start is None:
        return 0 if end is None else None
    return max(0, int(((end or now) - start).total_seconds()))


def gpu_counts(tres: Mapping[str, int | Decimal] | None) -> dict[str | None, int]:
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


def tres_string(value: Any, path: str) -> dict[str, Decimal] | None:
    """A TRES string (``cpu=1,gres/gpu:a100=1``) as ``{name: count}``; empty -> ``None``."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise unexpected(path, "a TRES string such as 'cpu=1,gres/gpu:a100=1'", value)
    try:
        return parse_tres(value)
    except ValueError as exc:
        raise UnexpectedResponse(f"unreadable TRES at {path}: {exc}") from exc


def tres_list(value: Any, path: str) -> dict[str, int]:
    """A TRES list of ``{type, name, count}`` as ``{"gres/gpu:a100": 1, "cpu": 4}``; entries
    Slurm did not measure (energy's -2, unset counts) are left out."""
    if not isinstance(value, list):
        raise unexpected(path, "a list of {type, name, count}", value)
    result: dict[str, int] = {}
    for index, entry in enumerate(value):
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
            raise unexpected(f"{path}[{index}]", "an object {type, name, count}", entry)
        count = number(entry.get("count"), f"{path}[{index}].count")
        if count is None or count < 0:
            continue
        name = entry.get("name")
        key = f"{entry['type']}/{name}" if name else entry["type"]
        result[key] = int(count)
    return result


def job_node_names(entry: Mapping[str, Any]) -> list[str] | None:
    """The job's nodes in allocation order, ``None`` when they cannot be read.

    ``nodes`` is a host list (``gpu-a100-[01-02]``) in every recorded answer (v0.0.38-v0.0.45);
    newer parsers describe the allocation as an object, ``{"count", "list", "allocation":
    [{"index", "name", ...}]}``, which v0.0.42+ put under ``job_resources.nodes``
    (tests/fixtures/slurm/rest_v0.0.42/job_running.json). Either is read, in the allocation's
    ``index`` order (the order of ``gres_detail``); an empty or missing ``nodes`` falls back to
    ``job_resources.nodes``.
    """
    value = entry.get("nodes")
    if not value:
        resources = entry.get("job_resources")
        value = resources.get("nodes") if isinstance(resources, Mapping) else None
    if isinstance(value, Mapping):
        allocation = value.get("allocation")
        if isinstance(allocation, list) and allocation:
            if not all(
                isinstance(a, Mapping) and isinstance(a.get("name"), str) and a["name"]
                for a in allocation
            ):
                return None
            if all(isinstance(a.get("index"), int) for a in allocation):
                allocation = sorted(allocation, key=lambda a: a["index"])
            return [a["name"] for a in allocation]
        value = value.get("list")
    if not isinstance(value, str) or not value:
        return None
    try:
        return expand_hostlist(value)
    except ValueError:
        return None


def gpu_slots(entry: Mapping[str, Any]) -> tuple[GpuSlot, ...]:
    """The cards a running job holds, from ``nodes`` (a host list, ``gpu-a100-[01-02]``) and
    ``gres_detail`` (one GRES string per node in that order, ``["gpu:a100:2(IDX:0-1)"]``, as
    ``scontrol show job -d`` prints ``GRES=``). Anything unreadable gives ``()``, so the caller
    treats the job's cards as unknown instead of guessing."""
    nodes = job_node_names(entry)
    details = entry.get("gres_detail")
    if nodes is None or not isinstance(details, list):
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


# --------------------------------------------------------------------------- whole responses


def partition_gpus(
    payload: Mapping[str, Any], *, partition_tres: Callable[[Any, str], Any]
) -> dict[str, dict[str, int]]:
    """``GET /partitions`` -> ``{partition: {gres_type: cards}}`` from each partition's TRES.

    Untyped GPUs (only ``gres/gpu=N``) are not listed: a GPU limit names a type.
    ``partition_tres(value, path)`` gives the TRES string of a partition's ``tres`` field.
    """
    result: dict[str, dict[str, int]] = {}
    for index, entry in enumerate(list_at(payload, "partitions", "partitions")):
        path = f"partitions[{index}]"
        if not isinstance(entry, dict):
            raise unexpected(path, "an object", entry)
        name = str_at(entry, "name", f"{path}.name")
        tres = tres_string(partition_tres(entry.get("tres"), f"{path}.tres"), f"{path}.tres")
        result[name] = {
            gres_type: cards
            for gres_type, cards in gpu_counts(tres).items()
            if gres_type is not None
        }
    return result


def associations(payload: Mapping[str, Any]) -> list[Association]:
    """``GET /associations`` -> associations with their ``GrpTRES`` (``max.tres.total``) and
    ``GrpTRESMins`` (``max.tres.group.minutes``, the same place from v0.0.38 to v0.0.45, seen
    on 22.05, 24.11 and 26.05; a reply without it reads as no minute limits)."""
    found = []
    for index, entry in enumerate(list_at(payload, "associations", "associations")):
        path = f"associations[{index}]"
        if not isinstance(entry, dict):
            raise unexpected(path, "an object", entry)
        total = dig(entry, ("max", "tres", "total"), f"{path}.max.tres.total")
        if not isinstance(total, list):
            raise unexpected(f"{path}.max.tres.total", "a list", total)
        group = entry["max"]["tres"].get("group") or {}
        minutes = (group.get("minutes") if isinstance(group, dict) else None) or []
        default = entry.get("default") or {}
        if not isinstance(default, dict):
            raise unexpected(f"{path}.default", "an object", default)
        found.append(
            Association(
                account=str_at(entry, "account", f"{path}.account"),
                user=optional_str_at(entry, "user", f"{path}.user"),
                partition=optional_str_at(entry, "partition", f"{path}.partition"),
                parent_account=optional_str_at(entry, "parent_account", f"{path}.parent_account"),
                grp_tres=tres_list(total, f"{path}.max.tres.total"),
                grp_tres_mins=tres_list(minutes, f"{path}.max.tres.group.minutes"),
                qos=_qos_names(entry.get("qos"), f"{path}.qos"),
                default_qos=optional_str_at(default, "qos", f"{path}.default.qos"),
            )
        )
    return found


def _qos_names(value: Any, path: str) -> tuple[str, ...]:
    """An association's ``qos``: a list of QOS names in every version from v0.0.38 (22.05.8)
    to v0.0.45 (26.05.5), seen on the test clusters; absent reads as none."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise unexpected(path, "a list of QOS names", value)
    return tuple(sorted(set(value)))


def share_usage_minutes(payload: Mapping[str, Any], account: str) -> dict[str, float]:
    """``GET /slurm/.../shares`` -> the account association's accrued usage by TRES name, in
    TRES-minutes (``tres.usage`` is TRES-seconds, decayed with ``PriorityDecayHalfLife``: the
    figure slurmctld compares with GrpTRESMins). Empty when the account has no such entry."""
    shares = payload.get("shares") if isinstance(payload, dict) else None
    entries = shares.get("shares") if isinstance(shares, dict) else None
    if not isinstance(entries, list):
        raise unexpected("shares.shares", "a list", entries)
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or entry.get("name") != account:
            continue
        if "ASSOCIATION" not in (entry.get("type") or []):
            continue  # a user called like the account
        usage = (entry.get("tres") or {}).get("usage") or []
        found: dict[str, float] = {}
        for position, item in enumerate(usage):
            path = f"shares.shares[{index}].tres.usage[{position}]"
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise unexpected(path, "an object {name, value}", item)
            seconds = number(item.get("value"), f"{path}.value")
            if seconds is not None:
                found[item["name"]] = float(seconds) / 60
        return found
    return {}


def controller_jobs(
    payload: Mapping[str, Any], *, now: datetime, job_state: StateReader
) -> list[JobRecord]:
    """``GET /slurm/.../job/{id}`` or ``/jobs`` -> job records.

    slurmctld reports a pending job's expected start and a running job's expected end in
    ``start_time``/``end_time``; only times that have happened are kept. ``elapsed_s`` is
    computed (this version has no such field) up to ``now`` while the job runs.
    """
    records = []
    for index, entry in enumerate(list_at(payload, "jobs", "jobs")):
        path = f"jobs[{index}]"
        if not isinstance(entry, dict):
            raise unexpected(path, "an object", entry)
        state = job_state(entry.get("job_state"), f"{path}.job_state")
        started = state is not None and state is not JobState.PENDING
        start = timestamp_at(entry, "start_time", path) if started else None
        end = (
            timestamp_at(entry, "end_time", path) if state is not None and state.finished else None
        )
        requested = gpu_counts(tres_string(entry.get("tres_req_str"), f"{path}.tres_req_str"))
        allocated = gpu_counts(tres_string(entry.get("tres_alloc_str"), f"{path}.tres_alloc_str"))
        records.append(
            JobRecord(
                job_id=int_at(entry, "job_id", f"{path}.job_id"),
                name=optional_str_at(entry, "name", f"{path}.name"),
                account=optional_str_at(entry, "account", f"{path}.account"),
                user=optional_str_at(entry, "user_name", f"{path}.user_name"),
                partition=optional_str_at(entry, "partition", f"{path}.partition"),
                state=state,
                state_reason=reason(entry.get("state_reason"), f"{path}.state_reason"),
                gpus_requested=requested,
                gpus_allocated=allocated if started else {},
                submit=timestamp_at(entry, "submit_time", path),
                start=start,
                end=end,
                elapsed_s=elapsed_s(start, end, now),
            )
        )
    return records


def job_placements(payload: Mapping[str, Any], *, job_state: StateReader) -> list[JobPlacement]:
    """``GET /slurm/.../jobs`` -> the jobs that hold cards now, with the cards they hold.

    ``nodes`` is a host list (``gpu-a100-[01-02]``) and ``gres_detail`` has one GRES string
    per node in that order (``["gpu:a100:2(IDX:0-1)"]``; ``scontrol show job -d`` prints the
    same as ``GRES=``). A job whose details cannot be read keeps no slots (``placed`` false),
    so the caller treats its cards as unknown instead of guessing.
    """
    placements = []
    for index, entry in enumerate(list_at(payload, "jobs", "jobs")):
        path = f"jobs[{index}]"
        if not isinstance(entry, dict):
            raise unexpected(path, "an object", entry)
        state = job_state(entry.get("job_state"), f"{path}.job_state")
        if state not in HOLDING_GPUS:
            continue
        allocated = gpu_counts(tres_string(entry.get("tres_alloc_str"), f"{path}.tres_alloc_str"))
        if not allocated:
            continue
        placements.append(
            JobPlacement(
                job_id=int_at(entry, "job_id", f"{path}.job_id"),
                account=optional_str_at(entry, "account", f"{path}.account"),
                user=optional_str_at(entry, "user_name", f"{path}.user_name"),
                partition=optional_str_at(entry, "partition", f"{path}.partition"),
                state=state,
                start=timestamp_at(entry, "start_time", path),
                gpus_allocated=allocated,
                slots=gpu_slots(entry),
            )
        )
    return placements


def job_queue(
    payload: Mapping[str, Any], *, job_state: StateReader, accounts: frozenset[str] | None = None
) -> JobQueue:
    """``GET /slurm/.../jobs`` -> the pending jobs with their reasons and the jobs holding cards
    with their expected ends, of ``accounts`` only when given (``None``: every account).

    A pending job's ``start_time`` is the backfill scheduler's estimate (0 until it made one)
    and a running job's ``end_time`` its start plus time limit (squeue ``%S`` / ``%e``);
    ``time_limit`` is minutes and unset (``{"set": false}``, or 22.05's NO_VAL) when the
    partition's default applies.
    """
    pending: list[PendingJob] = []
    running: list[RunningJob] = []
    for index, entry in enumerate(list_at(payload, "jobs", "jobs")):
        path = f"jobs[{index}]"
        if not isinstance(entry, dict):
            raise unexpected(path, "an object", entry)
        account = optional_str_at(entry, "account", f"{path}.account")
        if accounts is not None and account not in accounts:
            continue
        state = job_state(entry.get("job_state"), f"{path}.job_state")
        if state is JobState.PENDING:
            pending.append(_pending_job(entry, path, account))
        elif state in HOLDING_GPUS:
            allocated = gpu_counts(
                tres_string(entry.get("tres_alloc_str"), f"{path}.tres_alloc_str")
            )
            if allocated:
                running.append(
                    RunningJob(
                        job_id=int_at(entry, "job_id", f"{path}.job_id"),
                        account=account,
                        user=optional_str_at(entry, "user_name", f"{path}.user_name"),
                        partition=optional_str_at(entry, "partition", f"{path}.partition"),
                        gpus_allocated=allocated,
                        start=timestamp_at(entry, "start_time", path),
                        expected_end=timestamp_at(entry, "end_time", path),
                    )
                )
    return JobQueue(
        pending=tuple(sorted(pending, key=lambda j: j.job_id)),
        running=tuple(sorted(running, key=lambda j: j.job_id)),
    )


NO_VAL = 0xFFFFFFFE
"""Slurm's "not set" for 32-bit numbers (slurm.h ``NO_VAL``), which 22.05 sends bare."""


def _pending_job(entry: Mapping[str, Any], path: str, account: str | None) -> PendingJob:
    time_limit = number(entry.get("time_limit"), f"{path}.time_limit")
    nodes = number(entry.get("node_count"), f"{path}.node_count")
    priority = number(entry.get("priority"), f"{path}.priority")
    return PendingJob(
        job_id=int_at(entry, "job_id", f"{path}.job_id"),
        name=optional_str_at(entry, "name", f"{path}.name"),
        account=account,
        user=optional_str_at(entry, "user_name", f"{path}.user_name"),
        partition=optional_str_at(entry, "partition", f"{path}.partition"),
        reason=reason(entry.get("state_reason"), f"{path}.state_reason"),
        reason_detail=optional_str_at(entry, "state_description", f"{path}.state_description"),
        gpus_requested=gpu_counts(tres_string(entry.get("tres_req_str"), f"{path}.tres_req_str")),
        nodes_requested=None if nodes is None or nodes >= NO_VAL else int(nodes),
        submit=timestamp_at(entry, "submit_time", path),
        expected_start=timestamp_at(entry, "start_time", path),
        time_limit_min=None if time_limit is None or time_limit >= NO_VAL else int(time_limit),
        priority=None if priority is None else int(priority),
        qos=optional_str_at(entry, "qos", f"{path}.qos"),
        dependency=optional_str_at(entry, "dependency", f"{path}.dependency"),
        reservation=optional_str_at(entry, "resv_name", f"{path}.resv_name"),
    )


def accounting_jobs(payload: Mapping[str, Any], *, job_state: StateReader) -> list[JobRecord]:
    """``GET /slurmdb/.../jobs`` or ``/job/{id}`` -> job records.

    TRES are the lists ``tres.allocated``/``tres.requested`` of ``{type, name, count}``
    (``{"type": "gres", "name": "gpu:a100", "count": 1}``); ``time.elapsed`` is seconds.
    """
    records = []
    for index, entry in enumerate(list_at(payload, "jobs", "jobs")):
        path = f"jobs[{index}]"
        if not isinstance(entry, dict):
            raise unexpected(path, "an object", entry)
        state_block = dig(entry, ("state",), f"{path}.state")
        if not isinstance(state_block, dict):
            raise unexpected(f"{path}.state", "an object with 'current'", state_block)
        times = dig(entry, ("time",), f"{path}.time")
        if not isinstance(times, dict):
            raise unexpected(f"{path}.time", "an object", times)
        tres = dig(entry, ("tres",), f"{path}.tres")
        if not isinstance(tres, dict):
            raise unexpected(f"{path}.tres", "an object", tres)
        elapsed = number(times.get("elapsed"), f"{path}.time.elapsed")
        records.append(
            JobRecord(
                job_id=int_at(entry, "job_id", f"{path}.job_id"),
                name=optional_str_at(entry, "name", f"{path}.name"),
                account=optional_str_at(entry, "account", f"{path}.account"),
                user=optional_str_at(entry, "user", f"{path}.user"),
                partition=optional_str_at(entry, "partition", f"{path}.partition"),
                state=job_state(state_block.get("current"), f"{path}.state.current"),
                state_reason=reason(state_block.get("reason"), f"{path}.state.reason"),
                gpus_requested=gpu_counts(
                    tres_list(tres.get("requested", []), f"{path}.tres.requested")
                ),
                gpus_allocated=gpu_counts(
                    tres_list(tres.get("allocated", []), f"{path}.tres.allocated")
                ),
                submit=timestamp_at(times, "submission", f"{path}.time"),
                start=timestamp_at(times, "start", f"{path}.time"),
                end=timestamp_at(times, "end", f"{path}.time"),
                elapsed_s=None if elapsed is None else int(elapsed),
            )
        )
    return records


# --------------------------------------------------------------------------- request bodies


def grp_tres_modify_body(
    account: str,
    cluster: str,
    total: list[dict[str, Any]],
    group_minutes: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``POST /associations`` modifying the account association's GrpTRES (``max.tres.total``)
    and GrpTRESMins (``max.tres.group.minutes``), each a list of ``{type, name, count}`` that
    replaces the whole set; the same in every version from v0.0.38 to v0.0.45. ``user: ""``
    names the account's own association.

    Both lists go in every write: 24.11 and 26.05 (seen on the test clusters) clear a list the
    body leaves out, so a GrpTRES write without the minutes would drop the GrpTRESMins.
    """
    tres: dict[str, Any] = {"total": total}
    if group_minutes:
        tres["group"] = {"minutes": group_minutes}
    return {
        "associations": [
            {"account": account, "cluster": cluster, "user": "", "max": {"tres": tres}}
        ]
    }


def qos_records(payload: Mapping[str, Any], key: str) -> list[QosSpec]:
    """``GET /slurmdb/.../qos[/{name}]`` -> the QOS listed under ``key`` (``"QOS"`` in
    v0.0.38, ``"qos"`` from v0.0.40; same fields in both, seen on 22.05.8, 24.11.5 and
    26.05.5): ``priority`` bare or ``{set, number}``, ``preempt.list`` the QOS it may preempt,
    ``preempt.mode`` a list of words (``["CLUSTER"]`` when the QOS has none of its own, read as
    that word, which no :class:`QosSpec` carries, so a write follows)."""
    found = []
    for index, entry in enumerate(list_at(payload, key, key)):
        path = f"{key}[{index}]"
        if not isinstance(entry, dict):
            raise unexpected(path, "an object", entry)
        preempt = entry.get("preempt") or {}
        if not isinstance(preempt, dict):
            raise unexpected(f"{path}.preempt", "an object", preempt)
        modes = preempt.get("mode") or ["CLUSTER"]
        if not isinstance(modes, list) or not all(isinstance(m, str) for m in modes):
            raise unexpected(f"{path}.preempt.mode", "a list of words", modes)
        priority = number(entry.get("priority"), f"{path}.priority")
        found.append(
            QosSpec(
                name=str_at(entry, "name", f"{path}.name"),
                priority=int(priority or 0),
                preempts=_qos_names(preempt.get("list"), f"{path}.preempt.list"),
                preempt_mode=",".join(m.upper() for m in modes),
                description=optional_str_at(entry, "description", f"{path}.description") or "",
            )
        )
    return found


def qos_body(spec: QosSpec, key: str, *, wrap_numbers: bool) -> dict[str, Any]:
    """``POST /slurmdb/.../qos``: an upsert of one QOS (``sacctmgr add/modify qos``) under
    ``key`` (``"QOS"`` v0.0.38, ``"qos"`` later). The preempt list replaces the QOS's whole
    list (an empty one clears it)."""
    priority: Any = {"set": True, "number": spec.priority} if wrap_numbers else spec.priority
    return {
        key: [
            {
                "name": spec.name,
                "description": spec.description or spec.name,
                "priority": priority,
                "preempt": {"list": list(spec.preempts), "mode": [spec.preempt_mode]},
            }
        ]
    }


def association_qos_body(
    account: str,
    cluster: str,
    qos: AccountQos,
    total: list[dict[str, Any]],
    group_minutes: list[dict[str, Any]],
) -> dict[str, Any]:
    """``POST /associations`` setting the account association's ``QOS`` list and
    ``DefaultQOS``, with its GrpTRES/GrpTRESMins sent along unchanged: 24.11.5 and 26.05.5 clear
    a ``max`` list the body leaves out, and 22.05.8's slurmrestd crashes on a modify without
    ``max`` of an association that has TRES limits (both seen on the test clusters)."""
    body = grp_tres_modify_body(account, cluster, total, group_minutes)
    entry = body["associations"][0]
    if not total and not group_minutes:
        del entry["max"]
    entry["qos"] = list(qos.allowed)
    entry["default"] = {"qos": qos.default or ""}
    return body
