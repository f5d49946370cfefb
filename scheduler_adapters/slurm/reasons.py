"""Slurm's job state reasons (squeue ``%r``, slurmrestd ``state_reason``) and what each is about.

:data:`KNOWN_REASONS` is every string ``job_state_reason_string`` returns in the Slurm releases
whose slurmrestd this adapter speaks (22.05 for v0.0.38 up to 26.05 for v0.0.45), collected
from SchedMD/slurm at the tags slurm-22-05-11-1, 23-02-8-1, 23-11-11-1, 24-05-8-1, 24-11-7-1,
25-05-8-1, 25-11-7-1 and 26-05-3-1 (``src/common/slurm_protocol_defs.c`` up to 23.11,
``src/common/job_state_reason.c`` from 24.05). A reason outside it is still read and shown
verbatim; :func:`classify` then says ``known=False``.

The limit reasons follow a grammar (https://slurm.schedmd.com/resource_limits.html#reasons and
squeue(1) "JOB REASON CODES"): ``Assoc`` (the account's association) or ``QOS`` (the job's
QOS; the bare ``Max...PerAccount`` / ``Max...PerUser`` are QOS limits too), then ``Grp`` (the
whole account or QOS together), ``Max...PerJob``, ``PerNode``, ``PerUser``, ``PerAccount`` or
``Min``, then the TRES (``GRES`` = GPUs here, ``Cpu``, ``Mem``, ``Node``, ``Billing`` …) and the
measure (a count, ``Minutes`` = TRES-minutes of all jobs ever run, ``RunMinutes`` /
``RunMins`` = TRES-minutes still to run in the running jobs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KNOWN_REASONS: frozenset[str] = frozenset(
    {
        "AccountNotAllowed",
        "AccountingPolicy",
        "AssocGrpBB",
        "AssocGrpBBMinutes",
        "AssocGrpBBRunMinutes",
        "AssocGrpBilling",
        "AssocGrpBillingMinutes",
        "AssocGrpBillingRunMinutes",
        "AssocGrpCPUMinutesLimit",
        "AssocGrpCPURunMinutesLimit",
        "AssocGrpCpuLimit",
        "AssocGrpEnergy",
        "AssocGrpEnergyMinutes",
        "AssocGrpEnergyRunMinutes",
        "AssocGrpGRES",
        "AssocGrpGRESMinutes",
        "AssocGrpGRESRunMinutes",
        "AssocGrpJobsLimit",  # since 24.05
        "AssocGrpLicense",
        "AssocGrpLicenseMinutes",
        "AssocGrpLicenseRunMinutes",
        "AssocGrpMemLimit",
        "AssocGrpMemMinutes",
        "AssocGrpMemRunMinutes",
        "AssocGrpNodeLimit",
        "AssocGrpNodeMinutes",
        "AssocGrpNodeRunMinutes",
        "AssocGrpSubmitJobsLimit",
        "AssocGrpUnknown",
        "AssocGrpUnknownMinutes",
        "AssocGrpUnknownRunMinutes",
        "AssocGrpWallLimit",
        "AssocMaxBBMinutesPerJob",
        "AssocMaxBBPerJob",
        "AssocMaxBBPerNode",
        "AssocMaxBillingMinutesPerJob",
        "AssocMaxBillingPerJob",
        "AssocMaxBillingPerNode",
        "AssocMaxCpuMinutesPerJobLimit",
        "AssocMaxCpuPerJobLimit",
        "AssocMaxCpuPerNode",
        "AssocMaxEnergyMinutesPerJob",
        "AssocMaxEnergyPerJob",
        "AssocMaxEnergyPerNode",
        "AssocMaxGRESMinutesPerJob",
        "AssocMaxGRESPerJob",
        "AssocMaxGRESPerNode",
        "AssocMaxJobsLimit",
        "AssocMaxLicenseMinutesPerJob",
        "AssocMaxLicensePerJob",
        "AssocMaxMemMinutesPerJob",
        "AssocMaxMemPerJob",
        "AssocMaxMemPerNode",
        "AssocMaxNodeMinutesPerJob",
        "AssocMaxNodePerJobLimit",
        "AssocMaxSubmitJobLimit",
        "AssocMaxUnknownMinutesPerJob",
        "AssocMaxUnknownPerJob",
        "AssocMaxUnknownPerNode",
        "AssocMaxWallDurationPerJobLimit",
        "AssociationJobLimit",
        "AssociationResourceLimit",
        "AssociationTimeLimit",
        "BadConstraints",
        "BeginTime",
        "BlockFreeAction",  # 22.05 only
        "BlockMaxError",  # 22.05 only
        "BurstBufferOperation",
        "BurstBufferResources",
        "BurstBufferStageIn",
        "Cleaning",
        "Constraints",  # since 23.11
        "DeadLine",
        "Dependency",
        "DependencyNeverSatisfied",
        "FedJobLock",
        "FrontEndDown",  # last in 24.11
        "InactiveLimit",
        "InvalidAccount",
        "InvalidQOS",
        "JobArrayTaskLimit",
        "JobHeldAdmin",
        "JobHeldUser",
        "JobHoldMaxRequeue",
        "JobLaunchFailure",
        "Licenses",
        "MaxBBPerAccount",
        "MaxBBRunMinsPerAccount",  # since 24.05
        "MaxBBRunMinsPerUser",  # since 24.05
        "MaxBillingPerAccount",
        "MaxBillingRunMinsPerAccount",  # since 24.05
        "MaxBillingRunMinsPerUser",  # since 24.05
        "MaxCpuPerAccount",
        "MaxCpuRunMinsPerAccount",  # since 24.05
        "MaxCpuRunMinsPerUser",  # since 24.05
        "MaxEnergyPerAccount",
        "MaxEnergyRunMinsPerAccount",  # since 24.05
        "MaxEnergyRunMinsPerUser",  # since 24.05
        "MaxGRESPerAccount",
        "MaxGRESRunMinsPerAccount",  # since 24.05
        "MaxGRESRunMinsPerUser",  # since 24.05
        "MaxJobsPerAccount",
        "MaxLicensePerAccount",
        "MaxLicenseRunMinsPerAccount",  # since 24.05
        "MaxLicenseRunMinsPerUser",  # since 24.05
        "MaxMemPerLimit",
        "MaxMemoryPerAccount",
        "MaxMemoryRunMinsPerAccount",  # since 24.05
        "MaxMemoryRunMinsPerUser",  # since 24.05
        "MaxNodePerAccount",
        "MaxNodeRunMinsPerAccount",  # since 24.05
        "MaxNodeRunMinsPerUser",  # since 24.05
        "MaxPoweredUpNodes",  # since 24.05
        "MaxSubmitJobsPerAccount",
        "MaxUnknownPerAccount",
        "MaxUnknownRunMinsPerAccount",  # since 24.05
        "MaxUnknownRunMinsPerUser",  # since 24.05
        "MpiPortsBusy",  # since 24.05
        "NodeDown",
        "NonZeroExitCode",
        "None",
        "NvidiaImexChannels",  # since 25.11
        "OutOfMemory",
        "PartitionConfig",
        "PartitionDown",
        "PartitionInactive",
        "PartitionNodeLimit",
        "PartitionTimeLimit",
        "PowerNotAvail",  # last in 23.11
        "PowerReserved",  # last in 23.11
        "Priority",
        "Prolog",
        "QOSGrpBB",
        "QOSGrpBBMinutes",
        "QOSGrpBBRunMinutes",
        "QOSGrpBilling",
        "QOSGrpBillingMinutes",
        "QOSGrpBillingRunMinutes",
        "QOSGrpCPUMinutesLimit",
        "QOSGrpCPURunMinutesLimit",
        "QOSGrpCpuLimit",
        "QOSGrpEnergy",
        "QOSGrpEnergyMinutes",
        "QOSGrpEnergyRunMinutes",
        "QOSGrpGRES",
        "QOSGrpGRESMinutes",
        "QOSGrpGRESRunMinutes",
        "QOSGrpJobsLimit",  # since 24.05
        "QOSGrpLicense",
        "QOSGrpLicenseMinutes",
        "QOSGrpLicenseRunMinutes",
        "QOSGrpMemLimit",
        "QOSGrpMemoryMinutes",
        "QOSGrpMemoryRunMinutes",
        "QOSGrpNodeLimit",
        "QOSGrpNodeMinutes",
        "QOSGrpNodeRunMinutes",
        "QOSGrpSubmitJobsLimit",
        "QOSGrpUnknown",
        "QOSGrpUnknownMinutes",
        "QOSGrpUnknownRunMinutes",
        "QOSGrpWallLimit",
        "QOSJobLimit",
        "QOSMaxBBPerJob",
        "QOSMaxBBPerNode",
        "QOSMaxBBPerUser",
        "QOSMaxBillingMinutesPerJob",
        "QOSMaxBillingPerJob",
        "QOSMaxBillingPerNode",
        "QOSMaxBillingPerUser",
        "QOSMaxCpuMinutesPerJobLimit",
        "QOSMaxCpuPerJobLimit",
        "QOSMaxCpuPerNode",
        "QOSMaxCpuPerUserLimit",
        "QOSMaxEnergyMinutesPerJob",
        "QOSMaxEnergyPerJob",
        "QOSMaxEnergyPerNode",
        "QOSMaxEnergyPerUser",
        "QOSMaxGRESMinutesPerJob",
        "QOSMaxGRESPerJob",
        "QOSMaxGRESPerNode",
        "QOSMaxGRESPerUser",
        "QOSMaxJobsPerUserLimit",
        "QOSMaxLicenseMinutesPerJob",
        "QOSMaxLicensePerJob",
        "QOSMaxLicensePerUser",
        "QOSMaxMemoryMinutesPerJob",
        "QOSMaxMemoryPerJob",
        "QOSMaxMemoryPerNode",
        "QOSMaxMemoryPerUser",
        "QOSMaxNodeMinutesPerJob",
        "QOSMaxNodePerJobLimit",
        "QOSMaxNodePerUserLimit",
        "QOSMaxSubmitJobPerUserLimit",
        "QOSMaxUnknownMinutesPerJob",
        "QOSMaxUnknownPerJob",
        "QOSMaxUnknownPerNode",
        "QOSMaxUnknownPerUser",
        "QOSMaxWallDurationPerJobLimit",
        "QOSMinBB",
        "QOSMinBilling",
        "QOSMinCpuNotSatisfied",
        "QOSMinEnergy",
        "QOSMinGRES",
        "QOSMinLicense",
        "QOSMinMemory",
        "QOSMinNode",
        "QOSMinUnknown",
        "QOSNotAllowed",
        "QOSResourceLimit",
        "QOSTimeLimit",
        "QOSUsageThreshold",
        "RaisedSignal",  # since 23.02
        "ReqNodeNotAvail",
        "Reservation",
        "ReservationDeleted",
        "ReservationInvalid",  # since 23.02
        "Resources",
        "SchedDefer",
        "SystemFailure",
        "TimeLimit",
    }
)


@dataclass(frozen=True)
class SlurmReason:
    """What a reason code is about.

    ``kind`` is one of :data:`KINDS`; for limit reasons ``scope`` says whose limit
    (``"account"``: the team's association or a QOS limit per account; ``"qos"``: the QOS of
    all its users together; ``"user"``, ``"job"``, ``"node"``, ``"minimum"``), ``resource``
    which TRES (``"gpu"``, ``"cpu"``, ``"memory"``, ``"node"``, ``"billing"``, ``"license"``,
    ``"energy"``, ``"burst_buffer"``, ``"unknown"``, ``"wall_time"``, ``"jobs"``) and
    ``measure`` ``"count"``, ``"minutes"`` (TRES-minutes ever used) or ``"run_minutes"``
    (TRES-minutes the running jobs still have to run); ``None`` where it does not apply.
    """

    code: str
    known: bool
    kind: str
    scope: str | None = None
    resource: str | None = None
    measure: str | None = None


KINDS = (
    "cap_full",  # the team's (or its QOS's) cap on GPUs is reached by its running jobs
    "card_minutes",  # the team's GPU-minutes (GrpTRESMins / GrpTRESRunMins) are used up
    "user_limit",  # a per-user limit of the QOS
    "job_limit",  # the job alone asks for more than one job may have (or less than the minimum)
    "other_limit",  # another accounting limit (CPUs, memory, jobs, billing …)
    "resources",  # not enough free cards (or other resources) in the partition now
    "priority",  # jobs of higher priority are ahead
    "dependency",  # waits for other jobs
    "begin_time",  # asked to start later
    "held",  # held by its user or an administrator
    "reservation",  # waits for its advance reservation
    "nodes_unavailable",  # the nodes it may use are down, drained, reserved or powered off
    "partition",  # the partition is down or inactive
    "never",  # will not start as submitted (invalid account/QOS, dependency never satisfied)
    "other",  # another known reason (licenses, burst buffer, prolog, scheduler deferral …)
)

_FIXED: dict[str, str] = {
    "Resources": "resources",
    "Priority": "priority",
    "Dependency": "dependency",
    "DependencyNeverSatisfied": "never",
    "BeginTime": "begin_time",
    "JobHeldUser": "held",
    "JobHeldAdmin": "held",
    "JobHoldMaxRequeue": "held",
    "Reservation": "reservation",
    "ReservationDeleted": "never",
    "ReservationInvalid": "never",
    "ReqNodeNotAvail": "nodes_unavailable",
    "NodeDown": "nodes_unavailable",
    "FrontEndDown": "nodes_unavailable",
    "PowerNotAvail": "nodes_unavailable",
    "PowerReserved": "nodes_unavailable",
    "MaxPoweredUpNodes": "nodes_unavailable",
    "PartitionDown": "partition",
    "PartitionInactive": "partition",
    "PartitionConfig": "never",
    "PartitionNodeLimit": "job_limit",
    "PartitionTimeLimit": "job_limit",
    "InvalidAccount": "never",
    "InvalidQOS": "never",
    "AccountNotAllowed": "never",
    "QOSNotAllowed": "never",
    "BadConstraints": "never",
    "AccountingPolicy": "other_limit",
    "AssociationJobLimit": "other_limit",
    "AssociationResourceLimit": "other_limit",
    "AssociationTimeLimit": "other_limit",
    "QOSJobLimit": "other_limit",
    "QOSResourceLimit": "other_limit",
    "QOSTimeLimit": "other_limit",
    "QOSUsageThreshold": "other_limit",
    "JobArrayTaskLimit": "other_limit",
    "MaxMemPerLimit": "job_limit",
}

# TRES words in limit codes, longest first so "Memory" wins over "Mem".
_RESOURCES = (
    ("WallDuration", "wall_time"),
    ("SubmitJob", "jobs"),
    ("Memory", "memory"),
    ("License", "license"),
    ("Billing", "billing"),
    ("Unknown", "unknown"),
    ("Energy", "energy"),
    ("GRES", "gpu"),
    ("Wall", "wall_time"),
    ("Jobs", "jobs"),
    ("Node", "node"),
    ("Cpu", "cpu"),
    ("CPU", "cpu"),
    ("Mem", "memory"),
    ("BB", "burst_buffer"),
)
_LIMIT_CODE = re.compile(r"(Assoc|QOS)?(Grp|Max|Min)\w+")


def classify(code: str) -> SlurmReason:
    """What ``code`` (a ``state_reason`` as slurmrestd gives it) is about; never raises.

    ``classify("AssocGrpGRES")`` -> ``SlurmReason("AssocGrpGRES", True, "cap_full", "account",
    "gpu", "count")``; an unknown code -> ``kind="other"``, ``known=False``.
    """
    known = code in KNOWN_REASONS
    if code in _FIXED:
        return SlurmReason(code, known, _FIXED[code])
    match = _LIMIT_CODE.fullmatch(code) if known else None
    if match is None:
        return SlurmReason(code, known, "other")
    scope = _limit_scope(code, owner=match.group(1), level=match.group(2))
    resource = next((name for word, name in _RESOURCES if word in code), None)
    if "RunMin" in code:
        measure = "run_minutes"
    elif "Minutes" in code:
        measure = "minutes"
    else:
        measure = "count"
    return SlurmReason(code, known, _limit_kind(scope, resource, measure), scope, resource, measure)


def _limit_scope(code: str, *, owner: str | None, level: str) -> str:
    if level == "Min":
        return "minimum"
    for suffix, scope in (("PerJob", "job"), ("PerNode", "node"), ("PerUser", "user")):
        if suffix in code:
            return scope
    if "PerAccount" in code or owner == "Assoc":
        return "account"
    return "qos"


def _limit_kind(scope: str, resource: str | None, measure: str) -> str:
    if scope in ("job", "node", "minimum"):
        return "job_limit"
    if scope == "user":
        return "user_limit"
    if resource == "gpu":
        return "cap_full" if measure == "count" else "card_minutes"
    return "other_limit"
