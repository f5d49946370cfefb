"""Frozen shapes that scheduler adapters take and return (accounts, limits, jobs).

Inventory snapshots live in :mod:`scheduler_adapters.types`; these are the shapes of the
allocation side. ``None`` always means "the scheduler did not say", never zero. Times are aware
UTC datetimes; durations are whole seconds (``_s``); memory is MiB (``_mib``); time limits are
minutes (``_min``, Slurm's unit for ``--time``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

# Slurm folds account and user names to lower case and keeps them in a text column; anything
# outside this set is stored as given and then cannot be matched or passed to sbatch.
SLURM_NAME = re.compile(r"[a-z0-9_][a-z0-9_.\-]{0,63}")
GRES_TYPE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def check_name(kind: str, value: str, pattern: re.Pattern[str] = SLURM_NAME) -> str:
    """Return ``value`` when it is a usable scheduler name, else raise ``ValueError``.

    Slurm accepts an account named ``"Team A!"`` over REST and stores it, so adapters refuse
    such names themselves before they reach the scheduler.
    """
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise ValueError(f"{kind} name {value!r} must match {pattern.pattern}")
    return value


class JobState(StrEnum):
    """Slurm job states (``job_state_string`` in slurm_protocol_defs.c; squeue/sacct docs)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUSPENDED = "SUSPENDED"
    COMPLETING = "COMPLETING"
    COMPLETED = "COMPLETED"
    CANCELLED = "CANCELLED"
    FAILED = "FAILED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    REQUEUED = "REQUEUED"

    @property
    def finished(self) -> bool:
        """The job holds no resources any more and never will again."""
        return self not in _UNFINISHED


_UNFINISHED = {
    JobState.PENDING,
    JobState.RUNNING,
    JobState.SUSPENDED,
    JobState.COMPLETING,
    JobState.REQUEUED,
}


PREEMPT_MODES = ("CANCEL", "REQUEUE")
"""The ``PreemptMode`` values a portal QOS may carry (https://slurm.schedmd.com/preempt.html):
what happens to a job of that QOS when a higher one preempts it. SUSPEND/GANG need gang
scheduling, which the portal's clusters do not run."""
_PREEMPT_MODE = re.compile(r"[A-Z]+(,[A-Z]+)*")


@dataclass(frozen=True)
class QosSpec:
    """A Slurm QOS the portal owns, one per workload class (issue #36;
    https://slurm.schedmd.com/qos.html): ``priority`` the QOS priority factor (higher runs first,
    a plain number, no unit); ``preempts`` the QOS its jobs may preempt (``Preempt=``, sorted,
    no repeats); ``preempt_mode`` what happens to this QOS's own jobs when they are preempted
    (``PreemptMode=``, one of :data:`PREEMPT_MODES`). Preemption takes effect only on a cluster
    with ``PreemptType=preempt/qos``."""

    name: str
    priority: int
    preempts: tuple[str, ...] = ()
    preempt_mode: str = "REQUEUE"
    description: str = ""

    def __post_init__(self) -> None:
        check_name("QOS", self.name)
        for other in self.preempts:
            check_name("QOS", other)
        if tuple(sorted(set(self.preempts))) != self.preempts:
            raise ValueError(f"preempts must be sorted without repeats, got {self.preempts!r}")
        if self.name in self.preempts:
            raise ValueError(f"QOS {self.name!r} cannot preempt itself")
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise ValueError(f"priority must be a whole number, got {self.priority!r}")
        if not 0 <= self.priority < 2**32 - 2:
            raise ValueError(f"priority {self.priority} is outside 0..4294967293")
        if not _PREEMPT_MODE.fullmatch(self.preempt_mode):
            raise ValueError(f"preempt mode {self.preempt_mode!r}: words such as REQUEUE")

    def check_writable(self) -> None:
        """Raise ``ValueError`` unless the portal may write this QOS: its preempt mode one of
        :data:`PREEMPT_MODES` (a QOS read back may show others, e.g. ``CLUSTER``)."""
        if self.preempt_mode not in PREEMPT_MODES:
            raise ValueError(
                f"preempt mode {self.preempt_mode!r}: one of {', '.join(PREEMPT_MODES)}"
            )


@dataclass(frozen=True)
class AccountQos:
    """The QOS an account's own association allows (``QOS=``, sorted) and its ``DefaultQOS``
    (one of them, or ``None``: Slurm then uses the first allowed one)."""

    account: str
    allowed: tuple[str, ...]
    default: str | None = None

    def __post_init__(self) -> None:
        check_name("account", self.account)
        for name in self.allowed:
            check_name("QOS", name)
        if tuple(sorted(set(self.allowed))) != self.allowed:
            raise ValueError(f"allowed QOS must be sorted without repeats, got {self.allowed!r}")
        if self.default is not None and self.default not in self.allowed:
            raise ValueError(f"default QOS {self.default!r} is not among {self.allowed!r}")


@dataclass(frozen=True)
class GpuLimit:
    """A team's cap on cards of one GPU type: Slurm ``GrpTRES=gres/gpu:<gres_type>=<cards>``.

    ``partition`` is the pool's partition the limit is meant for. Slurm keeps association
    limits per account, not per partition (only user associations carry a partition; see
    https://slurm.schedmd.com/resource_limits.html), so a Slurm adapter stores the cap on the
    account's own association, where it applies to that GPU type in every partition; when it
    reads a limit back, ``partition`` is the one partition that offers that GPU type, or
    ``None`` when none or several do.
    """

    account: str
    partition: str | None
    gres_type: str
    cards: int

    def __post_init__(self) -> None:
        check_name("account", self.account)
        check_name("GRES type", self.gres_type, GRES_TYPE)
        if self.partition is not None:
            check_name("partition", self.partition, GRES_TYPE)
        if isinstance(self.cards, bool) or not isinstance(self.cards, int) or self.cards < 0:
            raise ValueError(f"cards must be a whole number >= 0, got {self.cards!r}")


@dataclass(frozen=True)
class JobSpec:
    """A batch job to submit (``sbatch`` semantics, https://slurm.schedmd.com/sbatch.html).

    ``user`` is the unix user the job runs as; it needs an association with ``account`` (and
    ``partition``). ``gpus`` cards of ``gres_type`` per node (``--gres=gpu:<type>:<n>``;
    ``gres_type=None`` asks for untyped GPUs). ``script`` must start with ``#!``.
    ``time_limit_min`` is the wall-clock limit in minutes; ``memory_mib`` per node.
    ``stdout`` must be writable by ``user`` (``/dev/null`` by default). ``reservation``: run
    inside that advance reservation (``--reservation``). ``qos``: run under that QOS
    (``--qos``; the account's association must allow it), else the association's default.
    """

    account: str
    user: str
    partition: str
    script: str
    gpus: int = 0
    gres_type: str | None = None
    name: str = "portal-job"
    time_limit_min: int = 10
    memory_mib: int = 100
    working_directory: str = "/tmp"
    stdout: str = "/dev/null"
    environment: Mapping[str, str] = field(default_factory=lambda: {"PATH": "/usr/bin:/bin"})
    reservation: str | None = None
    qos: str | None = None

    def __post_init__(self) -> None:
        check_name("account", self.account)
        check_name("user", self.user)
        if self.qos is not None:
            check_name("QOS", self.qos)
        check_name("partition", self.partition, GRES_TYPE)
        if self.reservation is not None:
            check_name("reservation", self.reservation, GRES_TYPE)
        if self.gres_type is not None:
            check_name("GRES type", self.gres_type, GRES_TYPE)
        if not self.script.startswith("#!"):
            raise ValueError("script must start with #! (Slurm fails the job otherwise)")
        if self.gpus < 0 or self.time_limit_min < 1 or self.memory_mib < 1:
            raise ValueError("gpus must be >= 0, time_limit_min and memory_mib >= 1")


GpuCounts = Mapping[str | None, int]
"""Cards per GRES type (``{"a100": 2}``); untyped cards are under the key ``None``."""


@dataclass(frozen=True)
class JobRecord:
    """One job as the scheduler reports it (slurmctld for live jobs, slurmdbd for history).

    ``gpus_requested`` / ``gpus_allocated`` come from the job's TRES (``gres/gpu:<type>=N``;
    untyped cards under ``None``); ``gpus_allocated`` is empty until the job starts.
    ``start``/``end`` are ``None`` until they happen; ``elapsed_s`` is the wall time the job
    has run so far (``end - start``, or up to now while it runs; Slurm's ``Elapsed``), not
    clipped to any reporting window. ``state_reason`` is Slurm's ``Reason``
    (``"AssocGrpGRES"`` for a job held by its account's GPU limit), ``None`` when "None".
    ``start_other_reading`` / ``end_other_reading``: when a wall-clock start or end happened
    twice (the hour repeated as DST ends) and nothing settled which (no elapsed time), the
    reading not taken (``start``/``end`` are the first occurrence); ``None`` otherwise.
    """

    job_id: int
    name: str | None
    account: str | None
    user: str | None
    partition: str | None
    state: JobState | None
    state_reason: str | None
    gpus_requested: GpuCounts
    gpus_allocated: GpuCounts
    submit: datetime | None
    start: datetime | None
    end: datetime | None
    elapsed_s: int | None
    start_other_reading: datetime | None = None
    end_other_reading: datetime | None = None

    @property
    def card_seconds(self) -> dict[str | None, int] | None:
        """Allocated cards x elapsed seconds per GRES type; ``None`` when elapsed is unknown."""
        if self.elapsed_s is None:
            return None
        return {
            gres_type: cards * self.elapsed_s for gres_type, cards in self.gpus_allocated.items()
        }


@dataclass(frozen=True)
class GpuSlot:
    """One card a job holds: Slurm node name and the GPU's device index on it (the ``IDX`` of
    ``gres_detail``, the same number as nvidia-smi's index and dcgm-exporter's ``gpu`` label
    when gres.conf lists the devices in order)."""

    node: str
    index: int
    gres_type: str | None


@dataclass(frozen=True)
class JobPlacement:
    """A job that holds GPUs now (running, suspended or completing) and where they are.

    ``slots`` are the cards slurmctld placed it on; ``gpus_allocated`` the cards per GRES type
    from its TRES. When Slurm gave no indexes (``IDX:N/A``) or the per-node detail did not
    match its node list, ``slots`` is shorter than the total of ``gpus_allocated``:
    :attr:`placed` is then false and callers must not guess which cards it uses.
    """

    job_id: int
    account: str | None
    user: str | None
    partition: str | None
    state: JobState
    start: datetime | None
    gpus_allocated: GpuCounts
    slots: tuple[GpuSlot, ...]

    @property
    def placed(self) -> bool:
        """Every allocated card has a known node and index."""
        return len(self.slots) == sum(self.gpus_allocated.values())


@dataclass(frozen=True)
class Association:
    """A Slurm association (https://slurm.schedmd.com/accounting.html#database-configuration).

    ``user`` and ``partition`` are ``None`` for an account's own association. ``grp_tres``
    holds the ``GrpTRES`` limits by TRES name as sacctmgr prints them (``{"gres/gpu:a100": 2,
    "cpu": 64}``); empty when unlimited. ``grp_tres_mins`` the ``GrpTRESMins`` limits the same
    way, in TRES-minutes (``{"gres/gpu:a100": 120000}``: 2,000 card-hours). ``qos`` the QOS
    it allows (sorted; empty when the reply names none) and ``default_qos`` its DefaultQOS.
    """

    account: str
    user: str | None
    partition: str | None
    parent_account: str | None
    grp_tres: Mapping[str, int]
    grp_tres_mins: Mapping[str, int] = field(default_factory=dict)
    qos: tuple[str, ...] = ()
    default_qos: str | None = None


NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")


# Slurm's recurrence flags (scontrol.1, "Flags"): the only ones a portal rule maps onto.
RESERVATION_REPEATS = ("DAILY", "WEEKDAY", "WEEKLY")
MAINTENANCE_FLAGS = ("MAINT", "IGNORE_JOBS")


@dataclass(frozen=True)
class ReservationSpec:
    """An advance reservation of whole nodes for one account over a window
    (``scontrol create reservation``, https://slurm.schedmd.com/reservations.html).

    ``nodes``: the node names the placement counted on (sorted, no repeats); ``starts_at`` /
    ``ends_at`` aware datetimes, half-open like the allocation's window; ``partition`` the pool's.
    Only jobs of ``account`` (``--reservation=<name>``) may then use those nodes in the window.
    ``repeat``: ``None`` for one window, or one of :data:`RESERVATION_REPEATS` (Slurm's
    ``Flags=DAILY`` / ``WEEKDAY`` / ``WEEKLY``): slurmctld then moves the window forward by a day,
    to the next Monday-to-Friday day, or by a week each time it ends, in its own wall-clock time,
    with no end (the portal deletes the reservation after the last occurrence).
    ``maintenance``: a maintenance window (issue 32), written ``Flags=MAINT,IGNORE_JOBS``:
    slurmctld lets it overlap other reservations, creates it over nodes whose jobs still run
    (they are not killed) and accounts its time as maintenance, not idle; never repeating.
    ``qos``: the QOS a job must run under to use it besides being of ``account`` (``QOS=``,
    which slurmctld 26.05 takes and 22.05 / 24.11 refuse as an unknown parameter:
    :class:`~scheduler_adapters.errors.ReservationQosUnsupported`); ``()``: any.
    """

    name: str
    account: str
    nodes: tuple[str, ...]
    starts_at: datetime
    ends_at: datetime
    partition: str | None = None
    repeat: str | None = None
    maintenance: bool = False
    qos: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_name("reservation", self.name, GRES_TYPE)
        check_name("account", self.account)
        for qos in self.qos:
            check_name("QOS", qos)
        if tuple(sorted(set(self.qos))) != self.qos:
            raise ValueError("reservation QOS must be sorted and distinct")
        if self.partition is not None:
            check_name("partition", self.partition, GRES_TYPE)
        if not self.nodes:
            raise ValueError("a reservation needs at least one node")
        for node in self.nodes:
            check_name("node", node, NODE_NAME)
        if tuple(sorted(set(self.nodes))) != self.nodes:
            raise ValueError("reservation nodes must be sorted and distinct")
        if self.starts_at.tzinfo is None or self.ends_at.tzinfo is None:
            raise ValueError("reservation times must be aware datetimes")
        if self.ends_at <= self.starts_at:
            raise ValueError("a reservation must end after it starts")
        if self.repeat is not None and self.repeat not in RESERVATION_REPEATS:
            repeats = ", ".join(RESERVATION_REPEATS)
            raise ValueError(f"a reservation repeats {repeats} or not at all")
        if self.maintenance and self.repeat is not None:
            raise ValueError("a maintenance reservation does not repeat")

    @property
    def flags(self) -> tuple[str, ...]:
        """Slurm's ``Flags=`` values the spec writes."""
        if self.maintenance:
            return MAINTENANCE_FLAGS
        return (self.repeat,) if self.repeat else ()


@dataclass(frozen=True)
class ReservationRecord:
    """A reservation as the scheduler reports it (``None``: not said). ``flags`` all of Slurm's
    flags as it lists them (``SPEC_NODES`` too); ``repeat`` the recurrence flag among them.
    ``qos`` the QOS it admits (``()``: any), ``None`` from a Slurm whose reservations have no
    QOS (22.05, 24.11 show no ``QOS=``)."""

    name: str
    accounts: tuple[str, ...]
    nodes: tuple[str, ...]
    starts_at: datetime | None
    ends_at: datetime | None
    partition: str | None
    state: str | None
    flags: tuple[str, ...] = ()
    qos: tuple[str, ...] | None = None

    @property
    def repeat(self) -> str | None:
        return next((flag for flag in self.flags if flag in RESERVATION_REPEATS), None)

    @property
    def maintenance(self) -> bool:
        return "MAINT" in self.flags


@dataclass(frozen=True)
class PendingJob:
    """A job slurmctld has not started yet (``job_state`` PENDING), with why.

    ``reason`` is Slurm's ``state_reason`` verbatim (``"AssocGrpGRES"``; see
    :mod:`scheduler_adapters.slurm.reasons`), ``None`` when Slurm says "None" (not yet looked
    at); ``reason_detail`` its ``state_description`` (``ReqNodeNotAvail`` names the nodes
    there), ``None`` when empty. ``gpus_requested`` cards per GRES type of the whole job (its
    ``tres_req_str``); ``nodes_requested`` the node count asked for. ``expected_start`` is the
    backfill scheduler's estimate (``start_time`` of a pending job; ``None`` when 0 = none yet).
    ``time_limit_min`` minutes (``None``: the partition's default). ``dependency``,
    ``reservation`` and ``qos`` as submitted, ``None`` when empty.
    """

    job_id: int
    name: str | None
    account: str | None
    user: str | None
    partition: str | None
    reason: str | None
    reason_detail: str | None
    gpus_requested: GpuCounts
    nodes_requested: int | None
    submit: datetime | None
    expected_start: datetime | None
    time_limit_min: int | None
    priority: int | None
    qos: str | None
    dependency: str | None
    reservation: str | None


@dataclass(frozen=True)
class RunningJob:
    """A job holding cards now (running, suspended or completing), with when it should end:
    ``expected_end`` is its ``end_time`` (start + time limit as slurmctld keeps it; ``None``
    when unset). ``gpus_allocated`` cards per GRES type."""

    job_id: int
    account: str | None
    user: str | None
    partition: str | None
    gpus_allocated: GpuCounts
    start: datetime | None
    expected_end: datetime | None


@dataclass(frozen=True)
class JobQueue:
    """One read of slurmctld's job list: the pending jobs and the jobs holding cards, both
    sorted by job id."""

    pending: tuple[PendingJob, ...]
    running: tuple[RunningJob, ...]
