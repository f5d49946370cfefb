"""``SlurmRestAdapter``: the :class:`~scheduler_adapters.base.SchedulerAdapter` for Slurm,
over slurmrestd's REST API (https://slurm.schedmd.com/rest.html).

Admin calls (accounts, limits, cancel, reads) act as the configured ``user`` (an
AdminLevel=Administrator slurmdb user); :meth:`SlurmRestAdapter.submit_job` acts as the job's
own user, so the provider must hand out tokens for team members (or a SlurmUser token, which
slurmrestd lets act as any user named in the header).

Beside it: :mod:`.transport` (HTTP, JWT auth, API version discovery), :mod:`.replies` (the
``errors`` list and the mapping onto :mod:`scheduler_adapters.errors`), :mod:`.dialects` (the
versions spoken), :mod:`.associations` (accounts, associations, GPU limits); nodes, jobs and
reservations are here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import httpx

from scheduler_adapters.errors import NotFound, SchedulerError, UnexpectedResponse
from scheduler_adapters.records import (
    GRES_TYPE,
    AccountQos,
    GpuLimit,
    JobPlacement,
    JobQueue,
    JobRecord,
    JobSpec,
    QosSpec,
    ReservationRecord,
    ReservationSpec,
    check_name,
)
from scheduler_adapters.slurm.associations import Associations
from scheduler_adapters.slurm.nodes import parse_slurm_nodes
from scheduler_adapters.slurm.qos import QualitiesOfService
from scheduler_adapters.slurm.replies import INVALID_JOB_ID, NOTHING_FOUND
from scheduler_adapters.slurm.reservations import ScontrolReservations
from scheduler_adapters.slurm.sacctmgr import SacctmgrFallback
from scheduler_adapters.slurm.transport import RestTransport, TokenProvider
from scheduler_adapters.types import ParseResult


class SlurmRestAdapter:
    """Slurm through slurmrestd; see :mod:`.transport` for auth and :mod:`.replies` for error
    mapping.

    ``url`` is slurmrestd's base URL; ``user`` the admin identity; ``cluster`` the
    ClusterName. Give ``token_provider`` or ``jwt_key`` (bytes of the HS256 key; tokens are then
    minted for ``token_lifespan_s`` seconds and renewed before they expire). ``api_version``
    skips discovery. ``timeout_s`` bounds each read: slurmrestd itself waits about 9 s before it
    reports an unreachable controller, so keep it above that. ``parent_account`` is where team
    accounts are created; ``sentinel_account`` an empty sibling used to work around a 22.05 bug
    (see :meth:`Associations.set_gpu_limit`). ``time_zone`` is the slurmdbd host's zone, in
    which 22.05 reads accounting query times. ``sacctmgr`` routes limit changes through the
    command line when the portal runs next to the cluster; ``reservations`` (``scontrol`` there)
    makes placement shapes real as advance reservations. ``transport`` is for tests
    (``httpx.MockTransport``).
    """

    def __init__(
        self,
        *,
        url: str,
        user: str,
        cluster: str,
        token_provider: TokenProvider | None = None,
        jwt_key: bytes | None = None,
        token_lifespan_s: int = 900,
        api_version: str | None = None,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 5.0,
        parent_account: str = "root",
        sentinel_account: str = "zz-portal-sentinel",
        time_zone: str = "UTC",
        sacctmgr: SacctmgrFallback | None = None,
        reservations: ScontrolReservations | None = None,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._rest = RestTransport(
            url=url,
            user=user,
            token_provider=token_provider,
            jwt_key=jwt_key,
            token_lifespan_s=token_lifespan_s,
            api_version=api_version,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            transport=transport,
        )
        self._accounts = Associations(
            self._rest,
            cluster=cluster,
            parent_account=parent_account,
            sentinel_account=sentinel_account,
            sacctmgr=sacctmgr,
        )
        self._qos = QualitiesOfService(
            self._rest, self._accounts, cluster=cluster, sacctmgr=sacctmgr
        )
        self._time_zone = ZoneInfo(time_zone)
        self._reservations = reservations
        self._clock = clock or (lambda: datetime.now(UTC))

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        self._rest.close()

    def __enter__(self) -> SlurmRestAdapter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def api_version(self) -> str:
        """The API version in use (discovered on first use)."""
        return self._rest.dialect.VERSION

    # ------------------------------------------------------------------ operations

    def list_nodes(self) -> ParseResult:
        """``GET /slurm/<v>/nodes``, read by
        :func:`scheduler_adapters.slurm.nodes.parse_slurm_nodes` (one GPU per card of each
        node's ``gres``, model = GRES type)."""
        reply = self._rest.request("list_nodes", "GET", self._rest.dialect.NODES)
        if not isinstance(reply.payload.get("nodes"), list):
            raise UnexpectedResponse(
                f"{self._rest.dialect.VERSION} nodes response has no 'nodes' list",
                operation="list_nodes",
            )
        return parse_slurm_nodes(reply.payload)

    # ------------------------------------------------------------------ accounts and limits
    # (see scheduler_adapters/slurm/associations.py for what each does on each version)

    def ensure_account(self, account: str, *, description: str, organization: str) -> bool:
        """Create or update the account and its association under ``parent_account``; see
        :meth:`Associations.ensure_account`."""
        return self._accounts.ensure_account(
            account, description=description, organization=organization
        )

    def ensure_user_association(self, account: str, user: str, partition: str) -> bool:
        """The association (account, user, partition), creating the user if missing; see
        :meth:`Associations.ensure_user_association`."""
        return self._accounts.ensure_user_association(account, user, partition)

    def set_gpu_limit(self, limit: GpuLimit) -> bool:
        """``GrpTRES=gres/gpu:<type>=<cards>`` on the account; see
        :meth:`Associations.set_gpu_limit`."""
        return self._accounts.set_gpu_limit(limit)

    def remove_gpu_limit(self, account: str, partition: str | None, gres_type: str) -> bool:
        """Drop ``gres/gpu:<type>`` from the account's GrpTRES; see
        :meth:`Associations.remove_gpu_limit`."""
        return self._accounts.remove_gpu_limit(account, partition, gres_type)

    def set_gpu_minutes(self, account: str, gres_type: str | None, minutes: int | None) -> bool:
        """``GrpTRESMins=gres/gpu[:<type>]=<minutes>`` on the account (``None`` drops it); see
        :meth:`Associations.set_gpu_minutes`."""
        return self._accounts.set_gpu_minutes(account, gres_type, minutes)

    def get_gpu_minutes(self, account: str) -> dict[str, int]:
        """The account's GPU GrpTRESMins by TRES name; see :meth:`Associations.get_gpu_minutes`."""
        return self._accounts.get_gpu_minutes(account)

    def get_gpu_minutes_used(self, account: str) -> dict[str, float] | None:
        """Slurm's decayed GPU usage of the account in card-minutes (``None``: not readable
        here); see :meth:`Associations.get_gpu_minutes_used`."""
        return self._accounts.get_gpu_minutes_used(account)

    def get_gpu_limits(self, account: str) -> tuple[GpuLimit, ...]:
        """The account's ``gres/gpu:<type>`` limits; see :meth:`Associations.get_gpu_limits`."""
        return self._accounts.get_gpu_limits(account)

    # ------------------------------------------------------------------ QOS (workload classes)
    # (see scheduler_adapters/slurm/qos.py for the shapes on each version)

    def ensure_qos(self, spec: QosSpec) -> bool:
        """Create or update a QOS (priority, Preempt, PreemptMode), read back; see
        :meth:`QualitiesOfService.ensure_qos`."""
        return self._qos.ensure_qos(spec)

    def get_qos(self, name: str) -> QosSpec | None:
        """The QOS as slurmdbd holds it, ``None`` when there is none."""
        return self._qos.get_qos(name)

    def set_account_qos(self, wanted: AccountQos) -> bool:
        """The account association's QOS list and DefaultQOS, read back; see
        :meth:`QualitiesOfService.set_account_qos`."""
        return self._qos.set_account_qos(wanted)

    def get_account_qos(self, account: str) -> AccountQos:
        """The QOS the account's association allows and its default."""
        return self._qos.get_account_qos(account)

    def account_qos_refusal(self) -> str | None:
        """Why this cluster cannot take an account's QOS list (``None``: it can); see
        :meth:`QualitiesOfService.account_qos_refusal`."""
        return self._qos.account_qos_refusal()

    # ------------------------------------------------------------------ jobs

    def submit_job(self, spec: JobSpec) -> int:
        """``POST /slurm/<v>/job/submit`` as ``spec.user`` (its token comes from the provider)."""
        reply = self._rest.request(
            "submit_job",
            "POST",
            self._rest.dialect.JOB_SUBMIT,
            user=spec.user,
            body=self._rest.dialect.job_submit_body(spec),
        )
        return self._rest.dialect.read_submitted_job_id(reply.payload)

    def cancel_job(self, job_id: int) -> None:
        """``DELETE /slurm/<v>/job/{id}`` (SIGKILL). A job slurmctld has already forgotten
        (finished more than MinJobAge ago) is looked up in accounting: found means done."""
        operation = "cancel_job"
        reply = self._rest.request(
            operation, "DELETE", self._rest.dialect.job_path(job_id), handles={INVALID_JOB_ID}
        )
        if reply.errors:
            self._accounting_job(operation, job_id)  # NotFound when it never existed

    def get_job(self, job_id: int) -> JobRecord:
        """``GET /slurm/<v>/job/{id}``, then ``/slurmdb/<v>/job/{id}`` once slurmctld has
        forgotten it."""
        operation = "get_job"
        reply = self._rest.request(
            operation, "GET", self._rest.dialect.job_path(job_id), handles={INVALID_JOB_ID}
        )
        if not reply.errors:
            jobs = self._rest.dialect.read_controller_jobs(reply.payload, now=self._clock())
            if jobs:
                return jobs[0]
        return self._accounting_job(operation, job_id)

    # ------------------------------------------------------------------ reservations

    def create_reservation(self, spec: ReservationSpec) -> bool:
        """Reserve whole nodes for an account (``scontrol``; see
        :mod:`scheduler_adapters.slurm.reservations` for why not REST)."""
        return self._reservation_tool("create_reservation").create_reservation(spec)

    def delete_reservation(self, name: str) -> bool:
        return self._reservation_tool("delete_reservation").delete_reservation(name)

    def get_reservation(self, name: str) -> ReservationRecord | None:
        return self._reservation_tool("get_reservation").get_reservation(name)

    @property
    def reservation_time_zone(self) -> str:
        """The zone ``scontrol`` reads and writes wall-clock times in (slurmctld's; settings
        ``SCONTROL.TIME_ZONE``), where a repeating reservation keeps its hours."""
        return self._reservations.time_zone if self._reservations is not None else "UTC"

    def _reservation_tool(self, operation: str) -> ScontrolReservations:
        if self._reservations is None:
            raise SchedulerError(
                "reservations need scontrol next to the cluster: enable SCONTROL in the Slurm "
                "adapter settings (slurmrestd up to v0.0.42 cannot write reservations)",
                operation=operation,
            )
        return self._reservations

    # --------------------------------------------------------- running and accounted jobs

    def running_gpu_jobs(self, partition: str | None = None) -> tuple[JobPlacement, ...]:
        """``GET /slurm/<v>/jobs``: the jobs holding GPUs now (running, suspended or
        completing), optionally only those of ``partition``, with the cards each holds
        (node and device index); sorted by job id."""
        if partition is not None:
            check_name("partition", partition, GRES_TYPE)
        reply = self._rest.request("running_gpu_jobs", "GET", self._rest.dialect.JOBS)
        return tuple(
            sorted(
                (
                    job
                    for job in self._rest.dialect.read_job_placements(reply.payload)
                    if partition is None or job.partition == partition
                ),
                key=lambda j: j.job_id,
            )
        )

    def job_queue(self, accounts: Sequence[str] | None = None) -> JobQueue:
        """``GET /slurm/<v>/jobs`` once: the pending jobs with their reasons and the jobs
        holding cards with their expected ends, of ``accounts`` only when given (a bad name
        raises ``ValueError`` before any request)."""
        names = (
            frozenset(check_name("account", name) for name in accounts)
            if accounts is not None
            else None
        )
        reply = self._rest.request("job_queue", "GET", self._rest.dialect.JOBS)
        return self._rest.dialect.read_job_queue(reply.payload, accounts=names)

    def jobs_from_accounting(
        self, start: datetime, end: datetime, *, accounts: Sequence[str] | None = None
    ) -> tuple[JobRecord, ...]:
        """``GET /slurmdb/<v>/jobs`` for sacct's window ``-S start -E end`` (jobs in any state
        at some time in it; https://slurm.schedmd.com/sacct.html). 22.05 has no user filter
        and no usage report endpoint: card-seconds are summed from these records."""
        if start.tzinfo is None or end.tzinfo is None:
            raise ValueError("start and end must be aware datetimes")
        if end < start:
            raise ValueError("end is before start")
        names = tuple(check_name("account", name) for name in accounts) if accounts else None
        reply = self._rest.request(
            "jobs_from_accounting",
            "GET",
            self._rest.dialect.ACCOUNTING_JOBS,
            params=self._rest.dialect.accounting_jobs_params(
                start.astimezone(self._time_zone), end.astimezone(self._time_zone), names
            ),
            handles={NOTHING_FOUND},
        )
        if reply.errors:
            return ()
        return tuple(
            sorted(self._rest.dialect.read_accounting_jobs(reply.payload), key=lambda j: j.job_id)
        )

    def _accounting_job(self, operation: str, job_id: int) -> JobRecord:
        reply = self._rest.request(
            operation,
            "GET",
            self._rest.dialect.accounting_job_path(job_id),
            handles={NOTHING_FOUND},
        )
        jobs = [] if reply.errors else self._rest.dialect.read_accounting_jobs(reply.payload)
        if not jobs:
            raise NotFound("job", job_id, operation=operation)
        return jobs[0]
