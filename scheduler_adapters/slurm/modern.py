"""The JSON of slurmrestd's data parsers v0.0.40 to v0.0.45 (Slurm 23.11 through 26.05).

One :class:`ModernDialect` per version (``v0_0_40.py`` … each builds one); what they share is
here, what differs is an argument. Source of the shapes: the OpenAPI documents Slurm 24.11.5
(v0.0.40-v0.0.42, ``../shared/research/slurm-modern/``) and 26.05.5 (v0.0.42-v0.0.45) serve at
``/openapi/v3``, responses recorded from both (``tests/fixtures/slurm/rest_v0.0.4*/``) and
https://slurm.schedmd.com/rest_api.html. HTTP statuses moved between releases (a refused submit
is 500 on 24.11, 422 on 26.05), so errors are read from the ``errors`` list, never the status.

What changed since v0.0.38 (22.05), and what the client does about it:

- numbers are ``{set, infinite, number}`` objects in responses and accepted in requests;
- ``job_state`` (slurmctld) and ``state.current`` (slurmdbd) are lists of words;
- a partition's ``tres`` is an object (``{"configured": "cpu=16,...,gres/gpu:a100=4"}``);
- an account and its association are created in one call, ``POST accounts_association``
  (``POST /associations`` without ``user`` now fails and creates nothing, and with
  ``"user": ""`` creates an association with no parent);
- users join an account with ``POST users_association``, which also creates unknown users; a
  user association under an account without its own association answers 200 and creates
  nothing, so every write is read back;
- ``GET /account/{name}`` lists no associations, and "nothing found" is 200 with an empty list
  and a warning (v0.0.38: error 9003);
- a GrpTRES modify still replaces the whole set, but a GRES type the cluster does not account
  or a count of -1 silently clears **every** GPU limit: types are checked against ``/tres``
  before a write, and a single entry is removed by sending the others;
- the 22.05 slurmdbd bugs (a modify of the first child dropped, a clear that never reaches
  slurmctld) are gone, so no sentinel account and no two-step clear;
- the job submit body takes ``job.script``, ``job.environment`` as ``["K=V"]`` and GPUs as
  ``tres_per_node: "gres/gpu:<type>:<n>"`` (``gres`` is ignored with only a warning: the job
  would run without GPUs); ``current_working_directory`` is required;
- accounting query times are epoch seconds (no time-zone guessing);
- responses carry ``warnings``: "Ignoring unknown field" means a request this adapter built
  has a field the server does not know, which is a bug, so it raises;
- ``meta.plugin.data_parser`` names the version (``data_parser/v0.0.42``).
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
    QosSpec,
)
from scheduler_adapters.slurm.readers import (
    accounting_jobs,
    association_qos_body,
    associations,
    controller_jobs,
    grp_tres_modify_body,
    int_at,
    job_placements,
    job_queue,
    job_state_list,
    list_at,
    optional_str_at,
    partition_gpus,
    qos_body,
    qos_records,
    str_at,
    unexpected,
)


class ModernDialect:
    """The paths, request bodies and readers of one v0.0.40+ data parser.

    ``version`` is ``"v0.0.42"`` and the like; ``epoch_query_times`` whether accounting queries
    take epoch seconds (v0.0.42; v0.0.40/41 on 24.11.5 answer 9202 "Parsing of 1796155121 for
    timestamp failed" and take sacct's text formats, read in slurmrestd's zone). Attribute and
    method names are those of :mod:`scheduler_adapters.slurm.v0_0_38`, which the client speaks
    through, plus
    ``ACCOUNTS_ASSOCIATION`` / ``USERS_ASSOCIATION`` (their bodies below) and ``TRES``.
    """

    MODIFIES_ASSOCIATIONS = True
    LEGACY_ASSOCIATION_WORKAROUNDS = False
    CHECKS_TRES_BEFORE_WRITE = True

    def __init__(self, version: str, *, epoch_query_times: bool) -> None:
        self.VERSION = version
        self._epoch_query_times = epoch_query_times
        ctld, dbd = f"/slurm/{version}", f"/slurmdb/{version}"
        self._ctld, self._dbd = ctld, dbd
        self.PLUGINS = (f"data_parser/{version}",)
        self.PING = f"{ctld}/ping"
        self.NODES = f"{ctld}/nodes"
        self.PARTITIONS = f"{ctld}/partitions"
        self.JOB_SUBMIT = f"{ctld}/job/submit"
        self.JOBS = f"{ctld}/jobs"
        self.ACCOUNTS = f"{dbd}/accounts"
        self.ACCOUNTS_ASSOCIATION = f"{dbd}/accounts_association"
        self.USERS_ASSOCIATION = f"{dbd}/users_association"
        self.ASSOCIATIONS = f"{dbd}/associations"
        self.ACCOUNTING_JOBS = f"{dbd}/jobs"
        self.TRES = f"{dbd}/tres"
        self.QOS = f"{dbd}/qos"
        self.SHARES = f"{ctld}/shares"
        # 26.05's slurmdbd side answers a refused token as it answers a database that is down
        # (7000); its slurmctld says 1007 (HTTP 511) for the same token
        self.AMBIGUOUS_ERRORS = frozenset({7000})
        self.AUTH_PROBE = f"{ctld}/diag"

    def __repr__(self) -> str:
        return f"ModernDialect({self.VERSION!r})"

    # ------------------------------------------------------------------ paths

    def job_path(self, job_id: int) -> str:
        """``GET`` (slurmctld view) and ``DELETE`` (cancel) of one job."""
        return f"{self._ctld}/job/{int(job_id)}"

    def accounting_job_path(self, job_id: int) -> str:
        return f"{self._dbd}/job/{int(job_id)}"

    def account_path(self, name: str) -> str:
        return f"{self._dbd}/account/{name}"

    def qos_path(self, name: str) -> str:
        """``GET`` of one QOS; nothing found is ``{"qos": []}`` with a warning."""
        return f"{self._dbd}/qos/{name}"

    # ------------------------------------------------------------------ request bodies

    @staticmethod
    def account_body(account: str, *, description: str, organization: str) -> dict[str, Any]:
        """``POST /accounts``: an upsert of the account record only (``description`` and
        ``organization`` are required: 500 / 9200 without them)."""
        return {
            "accounts": [
                {"name": account, "description": description, "organization": organization}
            ]
        }

    @staticmethod
    def accounts_association_body(
        account: str, *, description: str, organization: str, cluster: str, parent: str
    ) -> dict[str, Any]:
        """``POST accounts_association``: the account record and its association under
        ``parent`` on ``cluster`` in one call (sacctmgr-style names inside ``association``).
        Works when the record exists already. No GrpTRES here: limits go through
        :meth:`grp_tres_body` so that every limit write is checked the same way."""
        return {
            "association_condition": {
                "accounts": [account],
                "clusters": [cluster],
                "association": {"parent": parent},
            },
            "account": {"description": description, "organization": organization},
        }

    @staticmethod
    def users_association_body(
        account: str, user: str, *, cluster: str, partition: str
    ) -> dict[str, Any]:
        """``POST users_association``: the user (created when slurmdbd has none) joins
        ``account`` on ``partition``."""
        return {
            "association_condition": {
                "users": [user],
                "accounts": [account],
                "clusters": [cluster],
                "partitions": [partition],
            },
            "user": {},
        }

    @staticmethod
    def grp_tres_body(
        account: str,
        *,
        cluster: str,
        grp_tres: Mapping[str, int],
        grp_tres_mins: Mapping[str, int] | None = None,
    ) -> dict[str, Any]:
        """``POST /associations`` modifying the account association's GrpTRES to exactly
        ``grp_tres`` and its GrpTRESMins to exactly ``grp_tres_mins`` (each list replaces its
        whole set, and a list left out is cleared). A single ``-1`` entry clears every limit
        of its list; callers send it only to remove the last one."""
        if not grp_tres and not grp_tres_mins:
            raise ValueError("GrpTRES modify needs at least one entry")
        total = [_tres_entry(name, count) for name, count in grp_tres.items()]
        minutes = [_tres_entry(name, count) for name, count in (grp_tres_mins or {}).items()]
        return grp_tres_modify_body(account, cluster, total, minutes)

    @staticmethod
    def qos_body(spec: QosSpec) -> dict[str, Any]:
        """``POST /qos``: an upsert of one QOS (``priority`` a ``{set, number}`` object; same
        body accepted by v0.0.41, v0.0.42 on 24.11.5 and v0.0.45 on 26.05.5)."""
        return qos_body(spec, "qos", wrap_numbers=True)

    @staticmethod
    def association_qos_body(
        account: str,
        *,
        cluster: str,
        qos: AccountQos,
        grp_tres: Mapping[str, int],
        grp_tres_mins: Mapping[str, int],
    ) -> dict[str, Any]:
        """``POST /associations`` setting the account association's QOS list and DefaultQOS,
        its GrpTRES / GrpTRESMins sent along (a list left out is cleared, seen on 24.11.5 and
        26.05.5; a GrpTRES write without ``qos`` keeps the QOS list)."""
        total = [_tres_entry(n, c) for n, c in grp_tres.items()]
        minutes = [_tres_entry(n, c) for n, c in grp_tres_mins.items()]
        return association_qos_body(account, cluster, qos, total, minutes)

    @staticmethod
    def job_submit_body(spec: JobSpec) -> dict[str, Any]:
        """``POST /job/submit`` (sbatch). Limits are set/number objects; GPUs per node as
        ``tres_per_node`` (``--gres=gpu:<type>:<n>``, https://slurm.schedmd.com/sbatch.html)."""
        job: dict[str, Any] = {
            "name": spec.name,
            "account": spec.account,
            "partition": spec.partition,
            "time_limit": {"set": True, "number": spec.time_limit_min},
            "memory_per_node": {"set": True, "number": spec.memory_mib},
            "current_working_directory": spec.working_directory,
            "standard_output": spec.stdout,
            "environment": [f"{key}={value}" for key, value in spec.environment.items()],
            "script": spec.script,
        }
        if spec.gpus:
            typed = f"gpu:{spec.gres_type}" if spec.gres_type else "gpu"
            job["tres_per_node"] = f"gres/{typed}:{spec.gpus}"
        if spec.reservation:
            job["reservation"] = spec.reservation
        if spec.qos:
            job["qos"] = spec.qos
        return {"job": job}

    def accounting_jobs_params(
        self, start: datetime, end: datetime, accounts: tuple[str, ...] | None
    ) -> dict[str, str]:
        """Query of ``GET /slurmdb/.../jobs``: sacct's ``-S``/``-E`` window. v0.0.42: epoch
        seconds ("Usage start (UNIX timestamp)" in the OpenAPI document), so the zone does not
        matter; v0.0.40/41: ``YYYY-MM-DDTHH:MM:SS``, so ``start``/``end`` must already be in the
        zone slurmrestd runs in (the adapter's ``time_zone``)."""
        if self._epoch_query_times:
            window = (str(int(start.timestamp())), str(int(end.timestamp())))
        else:
            window = (start.strftime("%Y-%m-%dT%H:%M:%S"), end.strftime("%Y-%m-%dT%H:%M:%S"))
        params = {"start_time": window[0], "end_time": window[1], "skip_steps": "true"}
        if accounts:
            params["account"] = ",".join(accounts)
        return params

    # ------------------------------------------------------------------ response readers

    @staticmethod
    def is_unknown_field_warning(warning: Mapping[str, Any]) -> bool:
        """A warning that a request field was ignored (the request still ran)."""
        return "Ignoring unknown field" in str(warning.get("description", ""))

    @staticmethod
    def plugin_type(payload: Mapping[str, Any]) -> str | None:
        """``meta.plugin.data_parser`` (``"data_parser/v0.0.42"``), ``None`` when absent."""
        meta = payload.get("meta")
        plugin = meta.get("plugin") if isinstance(meta, dict) else None
        value = plugin.get("data_parser") if isinstance(plugin, dict) else None
        return value if isinstance(value, str) else None

    @staticmethod
    def read_submitted_job_id(payload: Mapping[str, Any]) -> int:
        return int_at(payload, "job_id", "job_id")

    @staticmethod
    def read_account(
        payload: Mapping[str, Any], *, cluster: str
    ) -> tuple[str | None, str | None, bool | None] | None:
        """``GET /account/{name}`` -> ``(description, organization, None)``: this version lists
        no associations here, so whether the account has its own is unknown (``None``) and
        read from ``/associations``. ``None`` when no account is listed."""
        accounts = list_at(payload, "accounts", "accounts")
        if not accounts:
            return None
        entry = accounts[0]
        if not isinstance(entry, dict):
            raise unexpected("accounts[0]", "an object", entry)
        return (
            optional_str_at(entry, "description", "accounts[0].description"),
            optional_str_at(entry, "organization", "accounts[0].organization"),
            None,
        )

    @staticmethod
    def read_tres_names(payload: Mapping[str, Any]) -> set[str]:
        """``GET /tres`` -> the TRES slurmdbd accounts, as ``{"cpu", "gres/gpu:a100", ...}``."""
        names = set()
        for index, entry in enumerate(list_at(payload, "TRES", "TRES")):
            path = f"TRES[{index}]"
            if not isinstance(entry, dict):
                raise unexpected(path, "an object", entry)
            kind = str_at(entry, "type", f"{path}.type")
            name = optional_str_at(entry, "name", f"{path}.name")
            names.add(f"{kind}/{name}" if name else kind)
        return names

    @staticmethod
    def read_partition_gpus(payload: Mapping[str, Any]) -> dict[str, dict[str, int]]:
        """``GET /partitions`` -> ``{partition: {gres_type: cards}}`` from ``tres.configured``."""
        return partition_gpus(payload, partition_tres=_configured_tres)

    @staticmethod
    def read_qos(payload: Mapping[str, Any]) -> list[QosSpec]:
        """``GET /qos[/{name}]`` -> the QOS listed (key ``"qos"``)."""
        return qos_records(payload, "qos")

    @staticmethod
    def read_associations(payload: Mapping[str, Any]) -> list[Association]:
        """``GET /associations`` -> associations with their GrpTRES (``max.tres.total``);
        ``user``/``partition`` ``""`` (an account's own association) read as ``None``."""
        return associations(payload)

    @staticmethod
    def read_controller_jobs(payload: Mapping[str, Any], *, now: datetime) -> list[JobRecord]:
        """``GET /slurm/.../job/{id}`` or ``/jobs`` -> job records (``job_state`` a list)."""
        return controller_jobs(payload, now=now, job_state=job_state_list)

    @staticmethod
    def read_job_placements(payload: Mapping[str, Any]) -> list[JobPlacement]:
        """``GET /slurm/.../jobs`` -> the jobs holding cards now, with node and device index
        from ``nodes`` and ``gres_detail`` (unchanged since v0.0.38)."""
        return job_placements(payload, job_state=job_state_list)

    @staticmethod
    def read_job_queue(
        payload: Mapping[str, Any], *, accounts: frozenset[str] | None = None
    ) -> JobQueue:
        """``GET /slurm/.../jobs`` -> pending jobs with reasons and jobs holding cards with
        ends (``job_state`` a list; numbers wrapped)."""
        return job_queue(payload, job_state=job_state_list, accounts=accounts)

    @staticmethod
    def read_accounting_jobs(payload: Mapping[str, Any]) -> list[JobRecord]:
        """``GET /slurmdb/.../jobs`` or ``/job/{id}`` -> job records (``state.current`` a list;
        ``time.elapsed`` seconds; TRES lists of ``{type, name, id, count}``)."""
        return accounting_jobs(payload, job_state=job_state_list)


def _configured_tres(value: Any, path: str) -> Any:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise unexpected(path, "an object with 'configured'", value)
    return value.get("configured")


def _tres_entry(name: str, count: int) -> dict[str, Any]:
    tres_type, _, tres_name = name.partition("/")
    return {"type": tres_type, "name": tres_name, "count": int(count)}
