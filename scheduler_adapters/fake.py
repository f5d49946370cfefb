"""``FakeScheduler``: an in-memory :class:`~scheduler_adapters.base.SchedulerAdapter` that
behaves like the Slurm adapter, for fast unit tests.

Same idempotency, same errors (with the Slurm error numbers the real cluster gives), and a
small scheduler: on every call, running jobs past their time limit end as TIMEOUT and pending
jobs start in id order when their account's GPU limit (reason ``AssocGrpGRES``) and the
partition's free cards (reason ``Resources``) allow. Jobs run until cancelled, until
:meth:`FakeScheduler.finish_job`, or until their time limit passes on ``clock``.

Failure switches, for the errors a caller must survive:

- ``down = True``: every call raises :class:`SchedulerUnavailable` (connection refused);
- ``timeout = True``: every call raises :class:`SchedulerUnavailable` (timed out);
- ``expire_token()``: the next call meets an expired token; like the real adapter it renews it
  once and succeeds (``token_renewals`` counts this);
- ``auth_broken = True``: every call raises :class:`SchedulerAuthError` (renewing did not help);
- ``reject_next(number, text)``: the next call answers HTTP 500 with that Slurm error, read as
  the real adapter reads it (:func:`scheduler_adapters.slurm.replies.classify`): most numbers
  are :class:`SchedulerRejected`, an unspecified one (-1, 1) is :class:`SchedulerUnavailable`;
- ``fail_next(error)``: the next call raises ``error``.

``calls`` lists the operations called, in order, for idempotency assertions.

Reservations (:class:`~scheduler_adapters.base.ReservationAdapter`, what ``scontrol`` does for
the real adapter) are kept on the fake nodes by name (``fake-<partition>-<type>``): a job
submitted with ``reservation`` starts only inside the window and only for an account the
reservation names; while a reservation is active, other jobs cannot use its node's cards.
Deleting one a job is tied to (running, or pending for it: slurmctld's "in use") ends it
instead, as the real adapter's ``scontrol`` does: now, or one second after its start when
"now" (whole seconds, as slurmctld keeps them) is its first second, or, when it has not
started, over the coming second (slurmctld refuses an end at or before the start; see
:mod:`scheduler_adapters.slurm.reservations`). It is purged once it has ended and no job is
tied to it; a job pending for it then waits on (reason ``Reservation``).
Errors carry scontrol's/slurmctld's words without a number, as the command line gives them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from scheduler_adapters.errors import (
    NotFound,
    RemoteError,
    ReservationQosUnsupported,
    SchedulerAuthError,
    SchedulerError,
    SchedulerRejected,
    SchedulerUnavailable,
)
from scheduler_adapters.records import (
    GRES_TYPE,
    AccountQos,
    GpuLimit,
    GpuSlot,
    JobPlacement,
    JobQueue,
    JobRecord,
    JobSpec,
    JobState,
    PendingJob,
    QosSpec,
    ReservationRecord,
    ReservationSpec,
    RunningJob,
    check_name,
)
from scheduler_adapters.slurm.replies import classify
from scheduler_adapters.types import (
    GpuHealth,
    GpuSnapshot,
    InventorySource,
    NodeSnapshot,
    NodeState,
    ParseResult,
)

DEFAULT_PARTITIONS: Mapping[str, Mapping[str, int]] = {"gpu": {"a100": 4, "rtx4090": 2}}
"""Partition ``gpu`` with 4 a100 and 2 rtx4090: the a100 and rtx4090 nodes of the test clusters
(``scripts/services/slurm.sh``, ``slurm-modern.sh``), which also have an 8-card h100 node."""

_REJECTIONS = {
    2000: "Invalid partition name specified",
    2014: "Requested node configuration is not available",
    2045: "Invalid account or account/partition combination specified",
}


@dataclass
class _Account:
    description: str
    organization: str
    grp_tres: dict[str, int] = field(default_factory=dict)
    grp_tres_mins: dict[str, int] = field(default_factory=dict)
    qos: tuple[str, ...] = ("normal",)  # what slurmdbd gives a new account
    default_qos: str | None = None


@dataclass
class _Job:
    spec: JobSpec
    job_id: int
    gres_type: str | None  # the type it gets: requested, or the first that fits when untyped
    state: JobState
    reason: str | None
    submit: datetime
    start: datetime | None = None
    end: datetime | None = None
    indexes: tuple[int, ...] = ()  # device indexes on its node, from when it starts


class FakeScheduler:
    """In-memory Slurm-like scheduler. ``partitions`` maps partition -> GRES type -> cards
    (one fake node ``fake-<partition>-<type>`` per partition and type, whose free cards a
    starting job takes lowest index first); ``clock`` returns aware datetimes."""

    def __init__(
        self,
        partitions: Mapping[str, Mapping[str, int]] = DEFAULT_PARTITIONS,
        *,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.partitions = {name: dict(types) for name, types in partitions.items()}
        self.clock = clock or (lambda: datetime.now(UTC))
        self.accounts: dict[str, _Account] = {}
        self.minutes_used: dict[str, dict[str, float]] = {}  # account -> TRES -> card-minutes
        self.associations: set[tuple[str, str, str]] = set()
        self.jobs: dict[int, _Job] = {}
        self.reservations: dict[str, ReservationRecord] = {}
        self.qos: dict[str, QosSpec] = {"normal": QosSpec("normal", 0, (), "CLUSTER")}
        # set by tests: the reason a 22.05 without the sacctmgr fallback gives (see the real
        # adapter's account_qos_refusal); set_account_qos then refuses with it
        self.account_qos_refused: str | None = None
        # reservations take QOS= (26.05); False: refused as an unknown parameter (22.05, 24.11)
        self.reservation_qos = True
        self.calls: list[str] = []
        self.down = False
        self.timeout = False
        self.auth_broken = False
        self.token_renewals = 0
        self._token_expired = False
        self._next_failure: SchedulerError | None = None
        self._next_job_id = 1
        self._closed = False

    # ------------------------------------------------------------------ failure switches

    def expire_token(self) -> None:
        self._token_expired = True

    def reject_next(self, number: int, text: str = "rejected by the fake") -> None:
        # read as the real adapter reads a 500 carrying that number: 1 or -1 is no refusal
        self._next_failure = classify("", (RemoteError(number, text),), 500)

    def fail_next(self, error: SchedulerError) -> None:
        self._next_failure = error

    def finish_job(self, job_id: int, state: JobState = JobState.COMPLETED) -> None:
        """End a running job as if its script exited (test hook, not part of the Protocol)."""
        self._advance()
        job = self.jobs[job_id]
        if job.state is JobState.RUNNING:
            job.state, job.reason, job.end = state, None, self.clock()
        self._advance()

    # ------------------------------------------------------------------ Protocol

    def list_nodes(self) -> ParseResult:
        self._enter("list_nodes")
        nodes = []
        for partition, types in sorted(self.partitions.items()):
            for gres_type, cards in sorted(types.items()):
                nodes.append(
                    NodeSnapshot(
                        hostname=f"fake-{partition}-{gres_type}",
                        source=InventorySource.SLURM,
                        gpus=tuple(
                            GpuSnapshot(index=i, model_name=gres_type, health=GpuHealth.UNKNOWN)
                            for i in range(cards)
                        ),
                        state=NodeState.UP,
                        partitions=(partition,),
                    )
                )
        return ParseResult(nodes=tuple(nodes))

    def ensure_account(self, account: str, *, description: str, organization: str) -> bool:
        check_name("account", account)
        self._enter("ensure_account")
        existing = self.accounts.get(account)
        if existing is None:
            self.accounts[account] = _Account(description, organization)
            return True
        if (existing.description, existing.organization) == (description, organization):
            return False
        existing.description, existing.organization = description, organization
        return True

    def ensure_user_association(self, account: str, user: str, partition: str) -> bool:
        check_name("account", account)
        check_name("user", user)
        check_name("partition", partition, GRES_TYPE)
        operation = "ensure_user_association"
        self._enter(operation)
        if partition not in self.partitions:
            raise NotFound("partition", partition, operation=operation)
        if account not in self.accounts:
            raise NotFound("account", account, operation=operation)
        key = (account, user, partition)
        if key in self.associations:
            return False
        self.associations.add(key)
        return True

    def set_gpu_limit(self, limit: GpuLimit) -> bool:
        operation = "set_gpu_limit"
        self._enter(operation)
        if limit.partition is not None:
            if limit.partition not in self.partitions:
                raise NotFound("partition", limit.partition, operation=operation)
            if limit.gres_type not in self.partitions[limit.partition]:
                raise SchedulerRejected(
                    f"partition {limit.partition!r} has no GPUs of type {limit.gres_type!r}",
                    operation=operation,
                )
        elif not any(limit.gres_type in types for types in self.partitions.values()):
            # the real adapter checks the cluster's accounted TRES (/tres) before writing
            raise SchedulerRejected(
                f"cluster does not account TRES 'gres/gpu:{limit.gres_type}'",
                operation=operation,
            )
        account = self.accounts.get(limit.account)
        if account is None:
            raise NotFound("account", limit.account, operation=operation)
        key = f"gres/gpu:{limit.gres_type}"
        if account.grp_tres.get(key) == limit.cards:
            return False
        account.grp_tres[key] = limit.cards
        self._advance()
        return True

    def remove_gpu_limit(self, account: str, partition: str | None, gres_type: str) -> bool:
        check_name("account", account)
        check_name("GRES type", gres_type, GRES_TYPE)
        self._enter("remove_gpu_limit")
        found = self.accounts.get(account)
        if found is None or found.grp_tres.pop(f"gres/gpu:{gres_type}", None) is None:
            return False
        self._advance()
        return True

    def set_gpu_minutes(self, account: str, gres_type: str | None, minutes: int | None) -> bool:
        operation = "set_gpu_minutes"
        check_name("account", account)
        self._enter(operation)
        found = self.accounts.get(account)
        if found is None:
            raise NotFound("account", account, operation=operation)
        key = "gres/gpu" if gres_type is None else f"gres/gpu:{gres_type}"
        if minutes is None:
            if found.grp_tres_mins.pop(key, None) is None:
                return False
            self._advance()
            return True
        if gres_type is not None and not any(gres_type in t for t in self.partitions.values()):
            raise SchedulerRejected(f"cluster does not account TRES {key!r}", operation=operation)
        if found.grp_tres_mins.get(key) == minutes:
            return False
        found.grp_tres_mins[key] = int(minutes)
        self._advance()
        return True

    def get_gpu_minutes(self, account: str) -> dict[str, int]:
        check_name("account", account)
        self._enter("get_gpu_minutes")
        found = self.accounts.get(account)
        if found is None:
            raise NotFound("account", account, operation="get_gpu_minutes")
        return dict(found.grp_tres_mins)

    def get_gpu_minutes_used(self, account: str) -> dict[str, float] | None:
        """``minutes_used[account]``, set by tests: the fake keeps no usage of its own."""
        check_name("account", account)
        self._enter("get_gpu_minutes_used")
        return dict(self.minutes_used.get(account, {}))

    def ensure_qos(self, spec: QosSpec) -> bool:
        """As the real adapter: the QOS it preempts must exist (NotFound), the preempt mode
        must be one the portal writes (ValueError); ``True`` when something changed."""
        spec.check_writable()
        operation = "ensure_qos"
        self._enter(operation)
        for other in spec.preempts:
            if other not in self.qos:
                raise NotFound("QOS", other, operation=operation)
        found = self.qos.get(spec.name)
        if found is not None and (found.priority, found.preempts, found.preempt_mode) == (
            spec.priority,
            spec.preempts,
            spec.preempt_mode,
        ):
            return False
        self.qos[spec.name] = spec
        return True

    def get_qos(self, name: str) -> QosSpec | None:
        check_name("QOS", name)
        self._enter("get_qos")
        return self.qos.get(name)

    def set_account_qos(self, wanted: AccountQos) -> bool:
        operation = "set_account_qos"
        self._enter(operation)
        for name in wanted.allowed:
            if name not in self.qos:
                raise NotFound("QOS", name, operation=operation)
        account = self.accounts.get(wanted.account)
        if account is None:
            raise NotFound("account", wanted.account, operation=operation)
        if (account.qos, account.default_qos) == (wanted.allowed, wanted.default):
            return False
        if self.account_qos_refused is not None:
            raise SchedulerRejected(self.account_qos_refused, operation=operation)
        account.qos, account.default_qos = wanted.allowed, wanted.default
        return True

    def _default_qos(self, account: str) -> str:
        found = self.accounts.get(account)
        return (found.default_qos if found else None) or "normal"

    def account_qos_refusal(self) -> str | None:
        return self.account_qos_refused

    def get_account_qos(self, account: str) -> AccountQos:
        check_name("account", account)
        self._enter("get_account_qos")
        found = self.accounts.get(account)
        if found is None:
            raise NotFound("account", account, operation="get_account_qos")
        return AccountQos(account, found.qos, found.default_qos)

    def get_gpu_limits(self, account: str) -> tuple[GpuLimit, ...]:
        check_name("account", account)
        operation = "get_gpu_limits"
        self._enter(operation)
        found = self.accounts.get(account)
        if found is None:
            raise NotFound("account", account, operation=operation)
        limits = []
        for name, cards in sorted(found.grp_tres.items()):
            gres_type = name.removeprefix("gres/gpu:")
            offering = [p for p, types in self.partitions.items() if gres_type in types]
            limits.append(
                GpuLimit(account, offering[0] if len(offering) == 1 else None, gres_type, cards)
            )
        return tuple(limits)

    def create_reservation(self, spec: ReservationSpec) -> bool:
        operation = "create_reservation"
        self._enter(operation)
        known = {f"fake-{p}-{t}" for p, types in self.partitions.items() for t in types}
        unknown = [node for node in spec.nodes if node not in known]
        if unknown:
            raise self._refusal(operation, f"Invalid node name specified: {','.join(unknown)}")
        if spec.account not in self.accounts:
            raise self._refusal(operation, "Invalid account or account/partition combination")
        record = ReservationRecord(
            name=spec.name,
            accounts=(spec.account,),
            nodes=spec.nodes,
            starts_at=spec.starts_at.replace(microsecond=0),
            ends_at=spec.ends_at.replace(microsecond=0),
            partition=spec.partition,
            state=None,
            flags=spec.flags,
            qos=spec.qos if self.reservation_qos else None,
        )
        existing = self.reservations.get(spec.name)
        if existing is not None:
            if existing == record:
                return False
            raise self._refusal(operation, f"reservation {spec.name} exists with other values")
        if spec.qos and not self.reservation_qos:
            raise ReservationQosUnsupported(
                "this Slurm's reservations take no QOS (Unknown parameter QOS=, fake)",
                operation=operation,
            )
        for other in self.reservations.values():
            overlapping = other.starts_at < record.ends_at and record.starts_at < other.ends_at
            maint = record.maintenance or other.maintenance  # MAINT may overlap (scontrol)
            if overlapping and not maint and set(other.nodes) & set(record.nodes):
                raise self._refusal(operation, "Requested nodes are busy")
        self.reservations[spec.name] = record
        self._advance()
        return True

    def delete_reservation(self, name: str) -> bool:
        self._enter("delete_reservation")
        record = self.reservations.get(name)
        if record is None:
            return False
        if self._in_use(name):  # slurmctld: "Requested reservation is in use"
            now = self.clock().replace(microsecond=0)
            second = timedelta(seconds=1)
            if now > record.starts_at:  # EndTime=now
                ended = replace(record, ends_at=min(record.ends_at, now))
            elif now == record.starts_at:  # its first second: EndTime=now+1
                ended = replace(record, ends_at=now + second)
            else:  # not started: StartTime=now EndTime=now+1
                ended = replace(record, starts_at=now, ends_at=now + second)
            self.reservations[name] = ended
        else:
            del self.reservations[name]
        self._advance()
        return True

    def get_reservation(self, name: str) -> ReservationRecord | None:
        self._enter("get_reservation")
        record = self.reservations.get(name)
        if record is None:
            return None
        return replace(record, state="ACTIVE" if self._active(record) else "INACTIVE")

    def submit_job(self, spec: JobSpec) -> int:
        operation = "submit_job"
        self._enter(operation)
        if spec.partition not in self.partitions:
            raise self._rejection(operation, 2000)
        if spec.reservation is not None:
            reservation = self.reservations.get(spec.reservation)
            if reservation is None:
                raise self._refusal(operation, "Requested reservation is invalid")
            if spec.account not in reservation.accounts:
                raise self._refusal(operation, "Access denied to requested reservation")
            if reservation.qos and (spec.qos or self._default_qos(spec.account)) not in (
                reservation.qos
            ):  # 26.05: account AND QOS must both be admitted ("Problem using reservation")
                raise self._refusal(operation, "Problem using reservation")
        if spec.account not in self.accounts or (
            (spec.account, spec.user, spec.partition) not in self.associations
        ):
            raise self._rejection(operation, 2045)
        types = self.partitions[spec.partition]
        if spec.gpus and (
            (spec.gres_type is not None and spec.gpus > types.get(spec.gres_type, 0))
            or (spec.gres_type is None and spec.gpus > max(types.values(), default=0))
        ):
            raise self._rejection(operation, 2014)
        job_id = self._next_job_id
        self._next_job_id += 1
        gres_type = spec.gres_type
        if spec.gpus and gres_type is None:
            gres_type = next(t for t, cards in sorted(types.items()) if cards >= spec.gpus)
        self.jobs[job_id] = _Job(spec, job_id, gres_type, JobState.PENDING, None, self.clock())
        self._advance()
        return job_id

    def cancel_job(self, job_id: int) -> None:
        operation = "cancel_job"
        self._enter(operation)
        job = self.jobs.get(job_id)
        if job is None:
            raise NotFound("job", job_id, operation=operation)
        if not job.state.finished:
            job.state, job.reason, job.end = JobState.CANCELLED, None, self.clock()
        self._advance()

    def get_job(self, job_id: int) -> JobRecord:
        operation = "get_job"
        self._enter(operation)
        job = self.jobs.get(job_id)
        if job is None:
            raise NotFound("job", job_id, operation=operation)
        return self._record(job)

    def running_gpu_jobs(self, partition: str | None = None) -> tuple[JobPlacement, ...]:
        if partition is not None:
            check_name("partition", partition, GRES_TYPE)
        self._enter("running_gpu_jobs")
        return tuple(
            JobPlacement(
                job_id=job.job_id,
                account=job.spec.account,
                user=job.spec.user,
                partition=job.spec.partition,
                state=job.state,
                start=job.start,
                gpus_allocated={job.gres_type: job.spec.gpus},
                slots=tuple(
                    GpuSlot(f"fake-{job.spec.partition}-{job.gres_type}", index, job.gres_type)
                    for index in job.indexes
                ),
            )
            for job_id, job in sorted(self.jobs.items())
            if job.state is JobState.RUNNING
            and job.spec.gpus
            and (partition is None or job.spec.partition == partition)
        )

    def job_queue(self, accounts: Sequence[str] | None = None) -> JobQueue:
        """Pending jobs with their reason and running GPU jobs with their expected end (start
        + time limit), of ``accounts`` when given; what the fake does not model (QOS, priority,
        the backfill estimate) is ``None``, never a made-up value."""
        names = (
            frozenset(check_name("account", name) for name in accounts)
            if accounts is not None
            else None
        )
        self._enter("job_queue")
        pending, running = [], []
        for job_id, job in sorted(self.jobs.items()):
            spec = job.spec
            if names is not None and spec.account not in names:
                continue
            if job.state is JobState.PENDING:
                pending.append(
                    PendingJob(
                        job_id=job_id,
                        name=spec.name,
                        account=spec.account,
                        user=spec.user,
                        partition=spec.partition,
                        reason=job.reason,
                        reason_detail=None,
                        gpus_requested={job.gres_type: spec.gpus} if spec.gpus else {},
                        nodes_requested=1,
                        submit=job.submit,
                        expected_start=None,
                        time_limit_min=spec.time_limit_min,
                        priority=None,
                        qos=None,
                        dependency=None,
                        reservation=spec.reservation,
                    )
                )
            elif job.state is JobState.RUNNING and spec.gpus and job.start is not None:
                running.append(
                    RunningJob(
                        job_id=job_id,
                        account=spec.account,
                        user=spec.user,
                        partition=spec.partition,
                        gpus_allocated={job.gres_type: spec.gpus},
                        start=job.start,
                        expected_end=job.start + timedelta(minutes=spec.time_limit_min),
                    )
                )
        return JobQueue(pending=tuple(pending), running=tuple(running))

    def jobs_from_accounting(
        self, start: datetime, end: datetime, *, accounts: Sequence[str] | None = None
    ) -> tuple[JobRecord, ...]:
        if start.tzinfo is None or end.tzinfo is None:
            raise ValueError("start and end must be aware datetimes")
        if end < start:
            raise ValueError("end is before start")
        names = {check_name("account", name) for name in accounts} if accounts else None
        self._enter("jobs_from_accounting")
        return tuple(
            self._record(job)
            for job_id, job in sorted(self.jobs.items())
            if job.submit <= end
            and (job.end is None or job.end >= start)
            and (names is None or job.spec.account in names)
        )

    def close(self) -> None:
        self._closed = True

    # ------------------------------------------------------------------ internals

    def _enter(self, operation: str) -> None:
        self.calls.append(operation)
        if self.down:
            raise SchedulerUnavailable("connection refused (fake)", operation=operation)
        if self.timeout:
            raise SchedulerUnavailable("timed out (fake)", operation=operation)
        if self.auth_broken:
            raise SchedulerAuthError(
                "slurmrestd refused a freshly issued token (fake)", operation=operation
            )
        if self._token_expired:
            self._token_expired = False
            self.token_renewals += 1
        if self._next_failure is not None:
            failure, self._next_failure = self._next_failure, None
            failure.operation = failure.operation or operation
            raise failure
        self._advance()

    def _rejection(self, operation: str, number: int) -> SchedulerRejected:
        return SchedulerRejected(
            "Slurm refused the request",
            operation=operation,
            errors=(RemoteError(number, _REJECTIONS[number]),),
            http_status=500,
        )

    def _refusal(self, operation: str, text: str) -> SchedulerRejected:
        return SchedulerRejected(
            f"Slurm refused the request: {text}",
            operation=operation,
            errors=(RemoteError(None, text),),
        )

    def _active(self, record: ReservationRecord) -> bool:
        now = self.clock()
        return record.starts_at <= now < record.ends_at  # type: ignore[operator]

    def _in_use(self, name: str) -> bool:
        """A job runs in it or waits for it (slurmctld counts both)."""
        return any(
            j.state in (JobState.RUNNING, JobState.PENDING) and j.spec.reservation == name
            for j in self.jobs.values()
        )

    def _node_of(self, job: _Job) -> str:
        return f"fake-{job.spec.partition}-{job.gres_type}"

    def _advance(self) -> None:
        now = self.clock()
        for job in self.jobs.values():
            if job.state is JobState.RUNNING and job.start is not None:
                limit_end = job.start + timedelta(minutes=job.spec.time_limit_min)
                if now >= limit_end:
                    job.state, job.reason, job.end = JobState.TIMEOUT, None, limit_end
        for name, record in list(self.reservations.items()):  # ended and unused: purged
            if record.ends_at <= now and not self._in_use(name):  # type: ignore[operator]
                del self.reservations[name]
        for job in sorted(self.jobs.values(), key=lambda j: j.job_id):
            if job.state is JobState.PENDING:
                reason = self._blocker(job)
                if reason is None:
                    job.state, job.reason, job.start = JobState.RUNNING, None, now
                    job.indexes = self._free_indexes(job)
                else:
                    job.reason = reason

    def _blocker(self, job: _Job) -> str | None:
        spec = job.spec
        if spec.reservation is not None:
            reservation = self.reservations.get(spec.reservation)
            if reservation is None or not self._active(reservation):
                return "Reservation"  # squeue's reason: waiting for its reservation to start
        elif spec.gpus and any(
            self._node_of(job) in r.nodes and self._active(r) for r in self.reservations.values()
        ):
            return "Resources"  # the node's cards are held by a reservation
        if not spec.gpus:
            return None
        running = [
            j
            for j in self.jobs.values()
            if j.state is JobState.RUNNING and j.gres_type == job.gres_type
        ]
        limit = self.accounts[spec.account].grp_tres.get(f"gres/gpu:{job.gres_type}")
        used_by_account = sum(j.spec.gpus for j in running if j.spec.account == spec.account)
        if limit is not None and used_by_account + spec.gpus > limit:
            return "AssocGrpGRES"
        used = sum(j.spec.gpus for j in running if j.spec.partition == spec.partition)
        if used + spec.gpus > self.partitions[spec.partition].get(job.gres_type or "", 0):
            return "Resources"
        return None

    def _free_indexes(self, job: _Job) -> tuple[int, ...]:
        taken = {
            index
            for other in self.jobs.values()
            if other is not job
            and other.state is JobState.RUNNING
            and other.spec.partition == job.spec.partition
            and other.gres_type == job.gres_type
            for index in other.indexes
        }
        cards = self.partitions[job.spec.partition].get(job.gres_type or "", 0)
        return tuple(i for i in range(cards) if i not in taken)[: job.spec.gpus]

    def _record(self, job: _Job) -> JobRecord:
        spec = job.spec
        requested = {spec.gres_type: spec.gpus} if spec.gpus else {}
        allocated = {job.gres_type: spec.gpus} if spec.gpus else {}
        started = job.start is not None
        now = self.clock()
        return JobRecord(
            job_id=job.job_id,
            name=spec.name,
            account=spec.account,
            user=spec.user,
            partition=spec.partition,
            state=job.state,
            state_reason=job.reason,
            gpus_requested=requested,
            gpus_allocated=allocated if started else {},
            submit=job.submit,
            start=job.start,
            end=job.end,
            elapsed_s=int(((job.end or now) - job.start).total_seconds()) if started else 0,
        )
