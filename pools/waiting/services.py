"""Reading every cluster's waiting work into ``PendingWork`` rows, and the watch that says
someone is looking.

:func:`pending_work_refresh` runs from beat every minute but reads only while some team's
page was viewed within :data:`WATCH_WINDOW` (pages call :func:`waiting_watch_touch`), so an
idle portal sends slurmrestd and the API server nothing. It reads the clusters the environment
variables define itself and queues one read per cluster kept as data
(:data:`PENDING_WORK_CLUSTER`, :func:`pending_work_refresh_cluster`), as the Slurm usage import
fans out, so 8 clusters are read by parallel workers and a slow one holds up none of the others.
Each read asks the scheduler first (no transaction open), translates, then replaces that
cluster's rows whole in one transaction; a cluster that fails keeps its previous rows and
records the error on its read and in the cluster's health
(:class:`~pools.clusters.models.ClusterError`, operation ``waiting``).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from pools.clusters.adapters import cluster_adapter, scheduler_adapter
from pools.clusters.models import Cluster
from pools.clusters.services import cluster_of, cluster_operation_record
from pools.common.choices import ClusterOperation, CredentialKind, Scheduler
from pools.jobs import PENDING_WORK_CLUSTER, enqueue_on_commit
from pools.tenancy.models import Team
from pools.waiting.models import PendingWork, PendingWorkRead, WaitingWatch
from pools.waiting.translate import Holder, kueue_wait, slurm_wait
from scheduler_adapters.errors import SchedulerError
from scheduler_adapters.kueue_workloads import PendingWorkload
from scheduler_adapters.records import JobQueue, PendingJob
from scheduler_adapters.slurm.reasons import classify

logger = logging.getLogger(__name__)

WATCH_WINDOW = timedelta(minutes=10)
"""How long after the last look the task keeps reading (a page left open refreshes itself
every minute through htmx, which touches the watch again)."""

WATCH_TOUCH_EVERY = timedelta(seconds=30)
"""A page view writes the watch only when it is older than this (one write per half minute
per team, not one per request)."""


_READERS = {
    Scheduler.SLURM: "job_queue",
    Scheduler.KUBERNETES: "pending_workloads",
}


@dataclass
class RefreshReport:
    """What one run did: ``skipped`` (nobody looked), rows written and errors of the
    environment's clusters by scheduler, and how many clusters kept as data were ``queued``."""

    skipped: bool = False
    rows: dict[str, int] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    queued: int = 0


def waiting_watch_touch(*, team: Team, now: datetime | None = None) -> None:
    """Record that someone looks at ``team``'s waiting work (at most one write per
    :data:`WATCH_TOUCH_EVERY`)."""
    now = now or timezone.now()
    updated = WaitingWatch.objects.filter(team=team, viewed_at__lt=now - WATCH_TOUCH_EVERY).update(
        viewed_at=now
    )
    if not updated:
        WaitingWatch.objects.get_or_create(team=team, defaults={"viewed_at": now})


def someone_watching(*, now: datetime) -> bool:
    return WaitingWatch.objects.filter(viewed_at__gte=now - WATCH_WINDOW).exists()


def pending_work_refresh(
    *, now: datetime | None = None, force: bool = False, fan_out: bool = True
) -> RefreshReport:
    """Read the environment's clusters' waiting work into ``PendingWork`` and queue one read
    per cluster kept as data (``fan_out``; see the module docstring). ``force`` reads even when
    nobody looked. Never raises for a scheduler error."""
    now = now or timezone.now()
    report = RefreshReport()
    if not force and not someone_watching(now=now):
        report.skipped = True
        return report
    teams = _teams()
    for scheduler in _READERS:
        cluster = cluster_of(kind=scheduler, cluster=None)
        error, rows = _read(scheduler_adapter(scheduler.value), scheduler, cluster, teams, now)
        if error is not None:
            report.errors[scheduler.value] = error
        elif rows is not None:
            report.rows[scheduler.value] = rows
    if fan_out:
        ids = list(
            Cluster.objects.exclude(credential_kind=CredentialKind.ENVIRONMENT)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        for cluster_id in ids:
            enqueue_on_commit(PENDING_WORK_CLUSTER, cluster_id)
        report.queued = len(ids)
    return report


def pending_work_refresh_cluster(*, cluster_id: int, now: datetime | None = None) -> int | None:
    """Read one cluster's waiting work (a Slurm queue or Kueue's Workloads) and replace its
    rows whole; returns how many rows it has now (``None``: the cluster is gone, or the read
    failed — the previous rows stay and the error is on its read and in its health)."""
    now = now or timezone.now()
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return None
    try:
        adapter = cluster_adapter(cluster)
    except (OSError, ValueError) as exc:  # credentials unreadable, settings refused
        adapter, message = None, f"credentials: {exc}"
        _record_read(cluster, Scheduler(cluster.kind), now=now, ok=False, error=message)
        cluster_operation_record(
            cluster=cluster, operation=ClusterOperation.WAITING, errors=[message], at=now
        )
        return None
    error, rows = _read(adapter, Scheduler(cluster.kind), cluster, _teams(), now)
    return None if error is not None else rows


def _teams() -> dict[str, Team]:
    return {team.slug: team for team in Team.objects.only("id", "slug")}


def _read(
    adapter, scheduler: Scheduler, cluster: Cluster | None, teams: dict[str, Team], now: datetime
) -> tuple[str | None, int | None]:
    """One cluster's read: ``(error, None)`` when it failed (kept on its read and in its
    health), ``(None, rows)`` when stored, ``(None, None)`` when there is nothing to read — not
    configured, an adapter without that reader, or a dry run without a connection."""
    method = _READERS[scheduler]
    if adapter is None or not hasattr(adapter, method):
        return None, None
    if getattr(adapter, "transport", adapter) is None:
        return None, None
    where = cluster.slug if cluster is not None else scheduler.value
    try:
        if scheduler == Scheduler.SLURM:
            rows = _slurm_rows(adapter, teams, now)
        else:
            rows = _kueue_rows(adapter, teams, now)
    except SchedulerError as exc:
        logger.warning("waiting work: %s read failed: %s", where, exc)
        _record_read(cluster, scheduler, now=now, ok=False, error=str(exc))
        cluster_operation_record(
            cluster=cluster, operation=ClusterOperation.WAITING, errors=[str(exc)], at=now
        )
        return str(exc), None
    _replace(cluster, scheduler, rows, now=now)
    cluster_operation_record(cluster=cluster, operation=ClusterOperation.WAITING, errors=[], at=now)
    return None, len(rows)


def pending_work_store(
    *,
    scheduler: str,
    queue: JobQueue | None = None,
    caps: dict[str, dict[str | None, int]] | None = None,
    workloads: Iterable[PendingWorkload] = (),
    cluster: Cluster | None = None,
    now: datetime | None = None,
) -> int:
    """Store what was already read (the demo, tests): a Slurm ``queue`` with the teams'
    ``caps`` (``{account: {gres_type: cards}}``) or Kueue ``workloads`` (namespaces
    ``team-<slug>``), of ``cluster`` (default: the environment's of ``scheduler``). Replaces
    that cluster's rows; returns how many were stored."""
    now = now or timezone.now()
    teams = {team.slug: team for team in Team.objects.only("id", "slug")}
    if scheduler == Scheduler.SLURM:
        rows = slurm_pending_rows(queue or JobQueue((), ()), teams, caps or {}, now=now)
    else:
        rows = kueue_pending_rows(workloads, teams, prefix="team-", now=now)
    _replace(cluster_of(kind=scheduler, cluster=cluster), Scheduler(scheduler), rows, now=now)
    return len(rows)


# ------------------------------------------------------------------------------- Slurm


def _slurm_rows(adapter, teams: dict[str, Team], now: datetime) -> list[PendingWork]:
    queue: JobQueue = adapter.job_queue(accounts=sorted(teams))
    capped = sorted(
        {
            job.account
            for job in queue.pending
            if job.account and job.reason and classify(job.reason).kind == "cap_full"
        }
    )
    caps: dict[str, dict[str | None, int]] = {}
    for account in capped:
        try:
            caps[account] = {lim.gres_type: lim.cards for lim in adapter.get_gpu_limits(account)}
        except SchedulerError as exc:  # the sentence then says "cap on cards" without figures
            logger.info("waiting work: GrpTRES of %s unreadable: %s", account, exc)
    return slurm_pending_rows(queue, teams, caps, now=now)


def _slurm_holders(queue: JobQueue) -> dict[tuple[str, str | None], list[Holder]]:
    """The running jobs of ``queue`` as card holders per ``(account, GRES type)`` (``None``:
    untyped), each with its cards and expected end."""
    holders: dict[tuple[str, str | None], list[Holder]] = defaultdict(list)
    for job in queue.running:
        for gres_type, count in job.gpus_allocated.items():
            holders[(job.account or "", gres_type)].append(
                Holder(ref=str(job.job_id), cards=count, ends_at=job.expected_end)
            )
    return holders


def slurm_pending_rows(
    queue: JobQueue,
    teams: dict[str, Team],
    caps: dict[str, dict[str | None, int]],
    *,
    now: datetime,
) -> list[PendingWork]:
    """``PendingWork`` rows (unsaved) for the pending jobs of ``queue`` whose account is a
    team's slug; ``caps`` the accounts' card caps per GRES type (``None`` key: untyped)."""
    holders = _slurm_holders(queue)
    rows = []
    for job in queue.pending:
        team = teams.get(job.account or "")
        if team is None:
            continue
        gres_type = _main_type(job)
        cap = _cap(caps.get(job.account or "", {}), gres_type)
        wait = slurm_wait(
            job, now=now, cap=cap, holders=holders.get((job.account or "", gres_type), ())
        )
        rows.append(
            PendingWork(
                team=team,
                scheduler=Scheduler.SLURM,
                ref=str(job.job_id),
                name=(job.name or "")[:200],
                user=(job.user or "")[:100],
                queue=(job.partition or "")[:100],
                gres_type=(gres_type or "")[:100],
                cards_requested=sum(job.gpus_requested.values()),
                reason_code=(job.reason or "")[:100],
                reason_message=job.reason_detail or "",
                kind=wait.kind,
                translated=wait.translated,
                explanation=wait.text,
                submitted_at=job.submit,
                expected_start_at=job.expected_start,
                read_at=now,
            )
        )
    return rows


def _main_type(job: PendingJob) -> str | None:
    """The GPU type the job asks most cards of (``None``: untyped or no GPUs)."""
    if not job.gpus_requested:
        return None
    return max(job.gpus_requested.items(), key=lambda item: (item[1], item[0] or ""))[0]


def _cap(limits: dict[str | None, int], gres_type: str | None) -> int | None:
    if gres_type in limits:
        return limits[gres_type]
    return limits.get(None)


# ------------------------------------------------------------------------------- Kueue


def _kueue_rows(adapter, teams: dict[str, Team], now: datetime) -> list[PendingWork]:
    prefix = getattr(adapter, "namespace_prefix", "team-")
    return kueue_pending_rows(adapter.pending_workloads(), teams, prefix=prefix, now=now)


def kueue_pending_rows(
    workloads: Iterable[PendingWorkload], teams: dict[str, Team], *, prefix: str, now: datetime
) -> list[PendingWork]:
    """``PendingWork`` rows (unsaved) for the workloads in a namespace ``<prefix><slug>``."""
    rows = []
    for workload in workloads:
        if not workload.namespace.startswith(prefix):
            continue
        team = teams.get(workload.namespace.removeprefix(prefix))
        if team is None:
            continue
        wait = kueue_wait(workload, now=now)
        rows.append(
            PendingWork(
                team=team,
                scheduler=Scheduler.KUBERNETES,
                ref=f"{workload.namespace}/{workload.name}"[:200],
                name=workload.name[:200],
                queue=(workload.queue_name or "")[:100],
                gres_type=(workload.shortfall.flavor if workload.shortfall else "")[:100],
                cards_requested=workload.gpus_requested,
                reason_code=(workload.reason or "")[:100],
                reason_message=workload.message or "",
                kind=wait.kind,
                translated=wait.translated,
                explanation=wait.text,
                submitted_at=workload.created,
                expected_start_at=None,
                read_at=now,
            )
        )
    return rows


# ------------------------------------------------------------------------------- storing


def _replace(
    cluster: Cluster | None, scheduler: Scheduler, rows: list[PendingWork], *, now: datetime
) -> None:
    for row in rows:
        row.cluster = cluster
    with transaction.atomic():
        _of(PendingWork.objects, cluster, scheduler).delete()
        PendingWork.objects.bulk_create(rows, batch_size=1000)
        _record_read(cluster, scheduler, now=now, ok=True, rows=len(rows))


def _of(queryset, cluster: Cluster | None, scheduler: Scheduler):
    """The rows of ``cluster`` (``None``: the environment's of ``scheduler`` without a row)."""
    if cluster is None:
        return queryset.filter(cluster__isnull=True, scheduler=scheduler)
    return queryset.filter(cluster=cluster)


def _record_read(
    cluster: Cluster | None,
    scheduler: Scheduler,
    *,
    now: datetime,
    ok: bool,
    error: str = "",
    rows: int = 0,
) -> None:
    defaults = {"read_at": now, "ok": ok, "error": error}
    if ok:
        defaults["rows"] = rows
    PendingWorkRead.objects.update_or_create(
        cluster=cluster, scheduler=scheduler, defaults=defaults
    )
