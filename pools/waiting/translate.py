"""Why a job waits, in the portal's words, with the figures that make it concrete. Pure: no
Django; every value in and out is plain data.

Slurm: the reason code is classified by :func:`scheduler_adapters.slurm.reasons.classify`
(every code of Slurm 22.05-26.05); each kind has one sentence here. For a team cap
(``AssocGrpGRES``, ``QOSGrpGRES``, ``MaxGRESPerAccount``) the sentence names the cap (the
account's ``GrpTRES=gres/gpu[:type]=N`` read from slurmdbd), the team's jobs that hold it and
when the first of them ends (its ``end_time``: start + time limit, the latest it can end), so
"your team's cap of 8 cards is full — held by jobs 123 and 124; the first ends at 14:00 UTC".

Kueue: the condition's reason (:mod:`scheduler_adapters.kueue_workloads`) with the figures of
the flavour assigner's message ("4 more cards needed", "asks for 16, the most is 8").

A reason this module has no sentence for (a code outside Slurm's list, a Kueue reason added
later) is kept verbatim with ``translated=False``; nothing is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from scheduler_adapters.kueue_workloads import PendingWorkload
from scheduler_adapters.records import PendingJob
from scheduler_adapters.slurm.reasons import SlurmReason, classify

MAX_NAMED_HOLDERS = 3
"""Jobs named in a "held by" clause; more are counted ("held by jobs 1, 2, 3 and 4 more")."""


@dataclass(frozen=True)
class Holder:
    """One of the team's jobs holding cards now: ``ref`` (Slurm job id), ``cards`` of the GPU
    type in question, ``ends_at`` its expected end (aware; ``None`` when unknown)."""

    ref: str
    cards: int
    ends_at: datetime | None


@dataclass(frozen=True)
class Wait:
    """The explanation: ``kind`` (a :class:`pools.waiting.choices.WaitKind` value), whether it
    was ``translated`` (``False``: ``text`` is the scheduler's own words) and ``text``."""

    kind: str
    translated: bool
    text: str


def when(moment: datetime, now: datetime) -> str:
    """``"14:00 UTC"`` on ``now``'s UTC day, ``"5 Dec 14:00 UTC"`` otherwise."""
    if moment.date() == now.date():
        return f"{moment:%H:%M} UTC"
    return f"{moment.day} {moment:%b %H:%M} UTC"


def _first_up(text: str) -> str:
    return text[:1].upper() + text[1:]


def cards(count: int) -> str:
    return f"{count} card" if count == 1 else f"{count} cards"


def _list(refs: Sequence[str]) -> str:
    shown = list(refs[:MAX_NAMED_HOLDERS])
    rest = len(refs) - len(shown)
    if rest:
        return f"{', '.join(shown)} and {rest} more"
    if len(shown) == 1:
        return shown[0]
    return f"{', '.join(shown[:-1])} and {shown[-1]}"


# ---------------------------------------------------------------------------------- Slurm


def slurm_wait(
    job: PendingJob,
    *,
    now: datetime,
    cap: int | None = None,
    holders: Sequence[Holder] = (),
) -> Wait:
    """Why ``job`` pends. ``cap`` is the team's card cap for the job's GPU type (``None``:
    unknown); ``holders`` the team's running jobs with cards of that type (any order)."""
    if job.reason is None:
        return Wait("not_tried", True, "Not looked at by the scheduler yet" + _start(job, now))
    reason = classify(job.reason)
    if not reason.known:
        return _verbatim(job.reason, job.reason_detail)
    text = _slurm_sentence(reason, job, now=now, cap=cap, holders=holders)
    if text is None:
        return _verbatim(job.reason, job.reason_detail, kind=reason.kind)
    return Wait(reason.kind, True, text)


def _verbatim(code: str, detail: str | None, *, kind: str = "other") -> Wait:
    return Wait(kind, False, f"{code}: {detail}" if detail else code)


def _start(job: PendingJob, now: datetime) -> str:
    if job.expected_start is None:
        return ""
    return f"; Slurm expects to start it at {when(job.expected_start, now)}"


def _slurm_sentence(
    reason: SlurmReason,
    job: PendingJob,
    *,
    now: datetime,
    cap: int | None,
    holders: Sequence[Holder],
) -> str | None:
    kind = reason.kind
    sentence = _SENTENCES.get(reason.code)
    if sentence is not None:
        return sentence(job, now) + _start(job, now)
    if kind == "cap_full":
        return _cap_full(reason, job, now=now, cap=cap, holders=holders)
    if kind in _LIMIT_SENTENCES:
        return _LIMIT_SENTENCES[kind](reason) + f" (Slurm: {reason.code})" + _start(job, now)
    return None


def _cap_full(
    reason: SlurmReason,
    job: PendingJob,
    *,
    now: datetime,
    cap: int | None,
    holders: Sequence[Holder],
) -> str:
    whose = "your team's" if reason.scope == "account" else f"the QOS {job.qos or ''}".rstrip()
    asked = sum(job.gpus_requested.values())
    if cap is None:
        head = f"{_first_up(whose)} cap on cards is full"
    else:
        head = f"{_first_up(whose)} cap of {cards(cap)} is full"
        if asked > cap:
            return (
                f"{head}, and this job alone asks for {cards(asked)}: it cannot start until "
                f"the cap is raised (Slurm: {reason.code})"
            )
    if not holders:
        return f"{head} (Slurm: {reason.code})"
    ordered = sorted(holders, key=lambda h: (h.ends_at is None, h.ends_at, h.ref))
    held = sum(h.cards for h in ordered)
    text = f"{head} — {cards(held)} held by job{'s' if len(ordered) > 1 else ''} "
    text += _list([h.ref for h in ordered])
    first = ordered[0].ends_at
    if first is not None:
        text += f"; the first ends at {when(first, now)}"
    return text


_RESOURCE_WORDS = {
    "gpu": "cards",
    "cpu": "CPUs",
    "memory": "memory",
    "node": "nodes",
    "billing": "billing units",
    "license": "licences",
    "energy": "energy",
    "burst_buffer": "burst buffer",
    "unknown": "a resource",
    "wall_time": "run time",
    "jobs": "jobs",
}


def _resource(reason: SlurmReason) -> str:
    word = _RESOURCE_WORDS.get(reason.resource or "unknown", "a resource")
    if reason.measure == "minutes":
        return f"{word}-minutes" if reason.resource != "gpu" else "card-minutes"
    if reason.measure == "run_minutes":
        return "card-minutes of running jobs" if reason.resource == "gpu" else f"{word}-minutes"
    return word


def _scope_owner(reason: SlurmReason) -> str:
    return {"account": "your team's", "qos": "the QOS's", "user": "your own"}.get(
        reason.scope or "", "a"
    )


_LIMIT_SENTENCES = {
    "card_minutes": lambda r: f"{_first_up(_scope_owner(r))} budget of {_resource(r)} is used up",
    "user_limit": lambda r: f"Your own limit on {_resource(r)} (per user, in the QOS) is reached",
    "job_limit": lambda r: (
        f"This job asks for less {_resource(r)} than the minimum"
        if r.scope == "minimum"
        else f"This job asks for more {_resource(r)} than one "
        f"{'node' if r.scope == 'node' else 'job'} may have"
    ),
    "other_limit": lambda r: f"{_first_up(_scope_owner(r))} limit on {_resource(r)} is reached",
}


def _partition_sentence(word: str):
    return lambda job, now: f"Partition {job.partition or '?'} {word}"


_SENTENCES = {
    "Resources": lambda job, now: (
        f"Waiting for {cards(sum(job.gpus_requested.values()))} to be free"
        + (f" on {job.nodes_requested} nodes" if (job.nodes_requested or 1) > 1 else "")
        + f" in partition {job.partition or '?'}: all that fit are in use"
    ),
    "Priority": lambda job, now: "Jobs with higher priority are ahead of it in the queue",
    "Dependency": lambda job, now: f"Waits for other jobs to finish ({job.dependency or '?'})",
    "BeginTime": lambda job, now: "Asked not to start before a later time",
    "JobHeldUser": lambda job, now: f"Held by its owner: scontrol release {job.job_id}",
    "JobHeldAdmin": lambda job, now: "Held by an administrator",
    "JobHoldMaxRequeue": lambda job, now: "Held after being requeued too many times",
    "Reservation": lambda job, now: f"Waits for its reservation {job.reservation or ''} to start",
    "ReqNodeNotAvail": lambda job, now: (
        "The nodes it may run on are down, drained or reserved"
        + (f" ({job.reason_detail})" if job.reason_detail else "")
    ),
    "NodeDown": lambda job, now: "A node it needs is down",
    "PartitionDown": _partition_sentence("is down"),
    "PartitionInactive": _partition_sentence("is inactive"),
    "PartitionNodeLimit": lambda job, now: (
        f"Asks for more nodes than partition {job.partition or '?'} allows per job"
    ),
    "PartitionTimeLimit": lambda job, now: (
        f"Asks for a longer time limit than partition {job.partition or '?'} allows"
    ),
    "DependencyNeverSatisfied": lambda job, now: (
        "Will never start: a job it depends on failed or was cancelled — cancel it"
    ),
    "InvalidAccount": lambda job, now: "Will never start: its account is not valid",
    "InvalidQOS": lambda job, now: "Will never start: its QOS is not valid",
    "AccountNotAllowed": lambda job, now: "Will never start: the partition refuses its account",
    "QOSNotAllowed": lambda job, now: "Will never start: the partition refuses its QOS",
    "ReservationDeleted": lambda job, now: "Will never start: its reservation was deleted",
    "Licenses": lambda job, now: "Waits for software licences",
}


# ---------------------------------------------------------------------------------- Kueue

_KUEUE_SHORTFALL_REASONS = {"Pending", "WaitingForQuota", "ExceedsMaxQuota"}


def kueue_wait(workload: PendingWorkload, *, now: datetime) -> Wait:
    """Why ``workload`` is not admitted."""
    shortfall = workload.shortfall
    reason = workload.reason
    if workload.condition is None:
        return Wait(
            "not_tried",
            True,
            "Not tried yet: Kueue admits the head of the queue first (StrictFIFO)",
        )
    if shortfall is not None and reason in _KUEUE_SHORTFALL_REASONS:
        if shortfall.maximum is not None:
            return Wait(
                "quota_exceeded",
                True,
                f"Asks for {cards(shortfall.requested or 0)} of {shortfall.flavor}; the team's "
                f"queue can never give more than {cards(shortfall.maximum)}",
            )
        return Wait(
            "quota_full",
            True,
            f"Your team's quota of {shortfall.flavor} cards is in use: "
            f"{cards(shortfall.more_needed or 0)} more needed",
        )
    sentence = _KUEUE.get(reason or "")
    if sentence is None:
        detail = workload.message
        return Wait(
            "other", False, f"{reason}: {detail}" if detail else (reason or "no reason given")
        )
    kind, text = sentence(workload)
    if kind == "preempted" and shortfall is not None and shortfall.more_needed:
        text += f": {cards(shortfall.more_needed)} of {shortfall.flavor} more needed"
    return Wait(kind, True, text)


_KUEUE = {
    "NoMatchingFlavor": lambda w: (
        "no_flavor",
        "No GPU flavour of the team's queue matches what it asks for (node selector, "
        "tolerations or resources)",
    ),
    "TopologyPlacementFailed": lambda w: (
        "topology",
        f"Waiting for {cards(w.gpus_requested)} in one NVLink domain: no domain has that many free",
    ),
    "Inadmissible": lambda w: ("queue_problem", f"The queue cannot admit it: {w.message or ''}"),
    "Misconfigured": lambda w: ("queue_problem", f"The queue is misconfigured: {w.message or ''}"),
    "Suspended": lambda w: ("held", "Suspended: it is not active"),
    "PendingEvaluation": lambda w: ("not_tried", "Queued: Kueue has not evaluated it yet"),
    "WaitingForPreemptedWorkloads": lambda w: (
        "preempted",
        "Waiting for preempted workloads to stop before it is admitted",
    ),
    "Preempted": lambda w: (
        "preempted",
        "Preempted to make room for higher-priority work; queued again",
    ),
    "PodsReadyTimeout": lambda w: (
        "preempted",
        "Evicted because its pods were not ready in time; queued again",
    ),
    "UnsatisfiedAdmissionChecks": lambda w: (
        "admission_check",
        "Quota reserved; waiting for admission check"
        + (f"s {', '.join(w.admission_checks)}" if len(w.admission_checks) > 1 else "")
        + (f" {w.admission_checks[0]}" if len(w.admission_checks) == 1 else ""),
    ),
    "ClusterQueueStopped": lambda w: ("queue_problem", "The team's ClusterQueue is stopped"),
    "LocalQueueStopped": lambda w: ("queue_problem", "The team's LocalQueue is stopped"),
    "NodeFailures": lambda w: ("nodes_unavailable", "Evicted after a node failed; queued again"),
}
