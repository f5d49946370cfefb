"""Idle scan and reclamation (issue 7): find allocated cards that do nothing, warn the team
once, and after the grace period give the cards back to the pool, reversibly and audited.

Mapping of dcgm-exporter series to allocations:

- **Kubernetes** pools: the series whose workload namespace (``exported_namespace`` when
  Prometheus renamed it) is the team's, ``team-<slug>``, on the pool's nodes.
- **Slurm** pools: per team and GPU model, the cards its account's jobs hold now, from the
  scheduler adapter's :meth:`running_gpu_jobs` (node and device index of every card, from
  slurmctld's ``gres_detail``), matched to the series of the pool's nodes that carry no
  Kubernetes labels by ``Hostname`` and ``gpu``. A job that started within the window, or one
  that ended within it (slurmdbd accounting), counts its cards in use without being judged;
  cards the team holds but no job of it uses are idle. Slurm not configured, unreachable, or
  unable to say which cards a job holds: ``unknown``.

Reclaiming goes through the same path as release: a status transition
(:func:`pools.capacity.services.allocations.allocation_transition`, which queues the unbind
task) when no card is in use, or a smaller ``card_count`` followed by
:func:`allocation_rebind` on commit; in both cases the team's Slurm ``GrpTRES`` /
Kubernetes ResourceQuota is set to the team's remaining open-window cards.
Nothing calls a scheduler while a lock is held.

Fleet scale (issue #29 item 7, ``benchmarks/reclamation.py``; CPU seconds, which the shared
machine's load does not change): at 100,800 GPUs a scan takes 8.7 s on a quiet 2-core machine
(4.3 s of CPU in the portal, 8.5 s in Prometheus 2.42 asked for plain JSON; gzip added 1.3 s
there). The summary's 7 queries cost 1.0-1.5 s each, and the floor of each is reading the
100,800 series (a plain instant read of the metric costs what a 31-step subquery reduction
costs, 1.25 s; a query that answers nothing still 1.0 s). Hence:

- no recording rules: reading a recorded per-device series would still select and encode
  100,800 series a query (about half the cost at best), while the rules would evaluate the
  same subqueries every interval whether anyone scans or not, and judge windows that end at
  the rule's evaluation time instead of the scan's;
- no further sharding per pool or cluster against one Prometheus: the total CPU is the same,
  and 2 to 4 queries at a time already take the least wall time on 2 cores (16,000 GPUs:
  1 at a time 5.2 s, 2 4.5 s, 4 4.4 s, 7 5.2 s). Scans already run per cluster
  (:mod:`pools.reclamation.services.runs`), each from its cluster's own Prometheus when it
  has one (``Cluster.prometheus_url``), else the one ``PROMETHEUS_URL``'s whole fleet;
- the database reads that do not depend on Prometheus (:class:`_ScanFacts`) run while it
  reduces the window, in this thread (the summary in another): they overlap, not add up;
- the allocations are read with the columns the scan uses (:func:`_allocations_to_judge`):
  at 12,600 allocations 0.32 s of CPU instead of 1.02 s; their findings by pool, not by a
  list of 12,600 ids (:func:`_findings_of`): 0.04 s instead of 0.31 s.
"""

from __future__ import annotations

import gc
import time
from collections import defaultdict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.core.mail import send_mail
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from pools.audit.services import (
    audit_event_build,
    audit_event_record,
    audit_events_write,
    audit_snapshot,
)
from pools.capacity.availability import pool_free_cards
from pools.capacity.lifecycle import RUNNING_STATUSES
from pools.capacity.locks import allocation_lock, pool_lock
from pools.capacity.models import Allocation, PlacedCards
from pools.capacity.services.allocations import allocation_transition
from pools.capacity.services.requests import allocation_snapshot
from pools.capacity.services.scheduler_binding import (
    binding_apply,
    slurm_gres_type,
)
from pools.capacity.shapes import placed_cards, placement_kept, placement_taken
from pools.clusters.adapters import metrics_adapter, pool_adapter
from pools.common.choices import AllocationStatus, IdleFindingState, Scheduler
from pools.common.errors import InsufficientCapacity, InvalidTransition
from pools.inventory.models import Gpu, GpuModel, Node
from pools.jobs import (
    ALLOCATION_REBIND,
    ALLOCATION_UNBIND,
    IDLE_RECLAIMED_EMAIL,
    enqueue_on_commit,
)
from pools.reclamation.evaluate import (
    AllocationShare,
    GroupEvaluation,
    Thresholds,
    Verdict,
    evaluate_group,
    split_group,
    utilisation_sparkline,
)
from pools.reclamation.models import (
    Exemption,
    IdleFinding,
    IdleGroupEvaluation,
    ReclamationPolicy,
)
from pools.reclamation.services.slurm_jobs import (
    SlurmPoolJobs,
    card_models,
    evaluate_slurm_group,
    series_by_card,
    slurm_pool_jobs,
)
from pools.tenancy.models import Team
from pools.tenancy.permissions import require_pool_admin
from pools.tenancy.selectors import team_member_emails
from scheduler_adapters.errors import SchedulerError
from scheduler_adapters.prometheus import DeviceUsage, uuid_selector

STEP_S = 60
UNDO_WINDOW = timedelta(days=1)
# A dismissed finding is not opened again for the same allocation within this time.
DISMISSAL_HOLDS = timedelta(days=7)


@dataclass
class ScanReport:
    """What one scan saw and did. ``error`` is set (and nothing changed) when Prometheus
    could not be read; ``seconds`` is the scan's wall time. ``no_data``: for pool admins, one
    line per allocation left unknown because cards it holds have no usable series (the team is
    not told: missing data is not idleness)."""

    now: datetime
    error: str | None = None
    allocations: int = 0
    busy: int = 0
    idle: int = 0
    unknown: int = 0
    warned: int = 0
    reclaimed: int = 0
    would_reclaim: int = 0
    resolved: int = 0
    exempt: int = 0
    dismissed: int = 0
    devices: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    no_data: list[str] = field(default_factory=list)
    cluster_errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in vars(self).items()}


def policy_thresholds(policy: ReclamationPolicy) -> Thresholds:
    """The policy's numbers for :mod:`pools.reclamation.evaluate`."""
    return Thresholds(
        idle_below_pct=float(policy.idle_below_pct),
        certainly_idle_below_pct=float(policy.certainly_idle_below_pct),
        process_memory_max_mib=float(policy.process_memory_max_mib),
        window_s=policy.window_minutes * 60,
        step_s=STEP_S,
        min_coverage=float(policy.min_coverage),
    )


def gpu_places() -> dict[str, tuple[str, str]]:
    """Where the inventory holds each card with a UUID: ``{uuid: (node hostname, index)}``
    (the index as text, as dcgm-exporter's ``gpu`` label), for :func:`devices_on_inventory`."""
    return {
        uuid: (hostname, str(index))
        for uuid, hostname, index in Gpu.objects.filter(uuid__isnull=False).values_list(
            "uuid", "node__hostname", "index"
        )
    }


def devices_on_inventory(
    devices: list[DeviceUsage], places: dict[str, tuple[str, str]] | None = None
) -> list[DeviceUsage]:
    """Each series placed on the card the inventory holds under its GPU UUID (``places``:
    :func:`gpu_places`, read here when not given).

    dcgm-exporter's ``Hostname`` is the exporter pod's name unless it runs with host networking
    or ``NODE_NAME`` (it changes on every exporter rollout), and ``gpu`` is only a node-local
    index, so ``hostname`` and ``gpu`` become the inventory node's name and the card's index.
    A UUID the inventory does not hold keeps the exporter's labels (matched by host as before).
    """
    where = gpu_places() if places is None else places
    placed = []
    for device in devices:
        spot = where.get(device.uuid)
        if spot is not None and (device.hostname, device.gpu) != spot:
            device = replace(device, hostname=spot[0], gpu=spot[1])
        placed.append(device)
    return placed


def devices_by_namespace(devices: list[DeviceUsage]) -> dict[str | None, list[DeviceUsage]]:
    """The series grouped by workload namespace (``None``: device level), once per scan."""
    grouped: dict[str | None, list[DeviceUsage]] = defaultdict(list)
    for device in devices:
        grouped[device.namespace].append(device)
    return grouped


def devices_for_group(
    by_namespace: dict[str | None, list[DeviceUsage]],
    *,
    scheduler: str,
    team_slug: str,
    pool_hosts: set[str],
) -> list[DeviceUsage]:
    """The series that belong to one team's allocations in one pool (see the module doc);
    ``by_namespace`` from :func:`devices_by_namespace`."""
    if scheduler == Scheduler.KUBERNETES:
        return [
            d
            for d in by_namespace.get(f"team-{team_slug}", ())
            if not pool_hosts or d.hostname in pool_hosts
        ]
    return [d for d in by_namespace.get(None, ()) if d.hostname in pool_hosts]


def idle_scan(
    *,
    now: datetime | None = None,
    metrics: Any = None,
    slurm_adapter: Any = None,
    pool_ids: Iterable[int] | None = None,
) -> ScanReport:
    """Evaluate every active or expiring allocation of a pool with a reclamation policy (of
    ``pool_ids`` only, when given: one cluster's pools, :mod:`pools.reclamation.services.runs`).

    One Prometheus round for the whole fleet, reduced in Prometheus to a few values per device
    (:meth:`~scheduler_adapters.prometheus.PrometheusAdapter.gpu_usage_summary`: the verdicts of
    the 60 s steps over each policy window, without the steps), and per-step reads only for the
    devices that need them and for idle groups' sparklines. Busy: an open finding is resolved.
    Unknown: nothing changes. Idle: a finding is opened (the team emailed once unless the policy
    is dry-run) or updated, and reclaimed when its grace period is over (see
    :func:`_maybe_reclaim`). Prometheus unreachable: the report carries the error and nothing
    changes. Slurm pools also cost two scheduler calls each (running jobs, recent accounting);
    ``slurm_adapter`` defaults to the pool's cluster's, and a cluster that cannot be reached
    makes those pools' allocations unknown and is said in ``cluster_errors`` too. Safe to run
    twice.
    """
    started = time.monotonic()
    # whole seconds: Prometheus keeps query times to the millisecond, and a window
    # start finer than its first sample would drop that sample (coverage 5/6)
    now = (now or timezone.now()).replace(microsecond=0)
    report = ScanReport(now=now)
    policies = _scan_policies(pool_ids)
    if not policies:
        report.notes.append("no pool has a reclamation policy")
        return report
    metrics = metrics if metrics is not None else metrics_adapter()
    if metrics is None:
        report.error = "no Prometheus configured (PROMETHEUS_URL)"
        return report
    allocations = _allocations_to_judge(policies, now)
    report.allocations = len(allocations)
    if not allocations:
        return report
    # Prometheus reduces the window while this thread reads what the verdicts need from the
    # database: the two overlap instead of adding up (benchmarks/reclamation.py)
    with ThreadPoolExecutor(max_workers=1) as background:
        summary = background.submit(_usage_summary, metrics, policies, now)
        facts = _ScanFacts.read(policies, allocations, now)
        try:
            devices = summary.result()
        except SchedulerError as exc:
            report.error = f"Prometheus unavailable, nothing changed: {exc}"
            report.seconds = time.monotonic() - started
            return report
    devices = devices_on_inventory(devices, facts.places)
    report.devices = len(devices)
    _judge_frozen(policies, allocations, facts, devices, metrics, now, slurm_adapter, report)
    report.seconds = time.monotonic() - started
    return report


def _scan_policies(pool_ids: Iterable[int] | None) -> dict[int, ReclamationPolicy]:
    """The reclamation policies to scan by pool id (of ``pool_ids`` only, when given), each
    with its pool read; empty when no pool has one."""
    chosen = ReclamationPolicy.objects.select_related("pool")
    if pool_ids is not None:
        chosen = chosen.filter(pool_id__in=list(pool_ids))
    return {p.pool_id: p for p in chosen}


@dataclass(frozen=True)
class _ScanFacts:
    """What the scan reads from the database besides the allocations, none of it from
    Prometheus: where the inventory holds each card (:func:`gpu_places`), each policy pool's
    hostnames (:func:`_pool_hosts`), and the allocations' open findings and recent dismissals
    (:func:`_findings_of`)."""

    places: dict[str, tuple[str, str]]
    hosts: dict[int, set[str]]
    findings: tuple[dict[int, IdleFinding], set[int]]

    @classmethod
    def read(cls, policies, allocations, now: datetime) -> _ScanFacts:
        return cls(gpu_places(), _pool_hosts(policies), _findings_of(allocations, now))


def _usage_summary(
    metrics: Any, policies: dict[int, ReclamationPolicy], now: datetime
) -> list[DeviceUsage]:
    """Every device's summary over each policy's window ending at ``now`` (seconds), in one
    Prometheus round (:meth:`~scheduler_adapters.prometheus.PrometheusAdapter.gpu_usage_summary`
    at :data:`STEP_S` steps, the lowest ``min_coverage`` and every ``idle_below_pct`` of the
    policies). Raises :class:`SchedulerError` when Prometheus cannot be read."""
    return list(
        metrics.gpu_usage_summary(
            end=now,
            windows_s={p.window_minutes * 60 for p in policies.values()},
            step_s=STEP_S,
            min_coverage=min(float(p.min_coverage) for p in policies.values()),
            near_pct={float(p.idle_below_pct) for p in policies.values()},
        )
    )


def _judge_frozen(
    policies: dict[int, ReclamationPolicy],
    allocations: list[Allocation],
    facts: _ScanFacts,
    devices: list[DeviceUsage],
    metrics: Any,
    now: datetime,
    slurm_adapter: Any,
    report: ScanReport,
) -> None:
    """:func:`_judge` with the series frozen out of the garbage collector, the sparklines
    read over the longest policy window (minutes) before ``now``. Prometheus failing while
    the sparklines are read is said in ``report.error`` (what was written before stays)."""
    longest = max(p.window_minutes for p in policies.values())
    # The series are millions of long-lived objects without cycles: frozen, the collections
    # that the ORM's work below triggers need not walk them (benchmarks/reclamation.py).
    gc.freeze()
    try:
        sparklines = _Sparklines(metrics, now, timedelta(minutes=longest))
        _judge(policies, allocations, facts, devices, now, slurm_adapter, sparklines, report)
    except SchedulerError as exc:  # the sparklines' queries, after the summary was read
        report.error = f"Prometheus unavailable while reading sparklines: {exc}"
    finally:
        gc.unfreeze()


# The allocation columns the scan reads (the rest, JSON included, loads on first use): the
# scan reads every running allocation of the policies' pools, 12,600 rows at 100,800 GPUs.
_SCAN_FIELDS = (
    "id", "team", "pool", "gpu_model", "card_count", "starts_at", "ends_at", "status",
    "updated_at",
)  # fmt: skip


def _allocations_to_judge(
    policies: dict[int, ReclamationPolicy], now: datetime
) -> list[Allocation]:
    """The running whole-card allocations of the policies' pools that started at least their
    pool's window before ``now``, oldest first (``starts_at``, ``id``): the order the busy
    cards are shared out in. Only :data:`_SCAN_FIELDS` are read; ``pool`` is the policy's pool
    object and ``team`` / ``gpu_model`` one shared object per row of theirs, read once each
    (``select_related`` built three model objects per allocation from 56 columns)."""
    allocations = [
        a
        for a in Allocation.objects.filter(pool_id__in=policies, status__in=RUNNING_STATUSES)
        .whole_cards()  # card-level idleness; MIG slices are not reclaimed (issue 38)
        .only(*_SCAN_FIELDS)
        .order_by("starts_at", "id")
        # younger than the window: the metrics may still be the previous holder's
        if a.starts_at <= now - timedelta(minutes=policies[a.pool_id].window_minutes)
    ]
    teams = Team.objects.in_bulk({a.team_id for a in allocations})
    models = GpuModel.objects.in_bulk({a.gpu_model_id for a in allocations})
    for a in allocations:
        a.pool = policies[a.pool_id].pool
        a.team = teams[a.team_id]
        a.gpu_model = models[a.gpu_model_id]
    return allocations


def _judge(
    policies, allocations, facts, devices, now, slurm_adapter, sparklines, report: ScanReport
) -> None:
    """Evaluate every (team, pool[, model]) group and record each allocation's verdict:
    every group evaluated first (:func:`_evaluate`), then the idle groups' sparklines are
    limited to their namespaces, then each group is acted on (:func:`_group_act`); last, the
    evaluations no finding refers to any more are deleted."""
    hosts = facts.hosts
    groups = _groups_of(allocations)
    slurm = _SlurmView(policies, groups, hosts, devices, now, slurm_adapter, report)
    by_namespace = devices_by_namespace(devices)
    judged = [
        (
            members,
            policies[pool_id],
            *_evaluate(members, policies[pool_id], hosts, slurm, by_namespace, now, report),
        )
        for (_team_id, pool_id, _model), members in groups.items()
    ]
    # the sparklines' namespace lines are read for the idle groups' namespaces only
    sparklines.namespaces = {
        f"team-{members[0].team.slug}"
        for members, _policy, _group, mine, shares in judged
        if mine is not None and any(share.verdict == Verdict.IDLE for share in shares)
    }
    for members, policy, group, mine, shares in judged:
        _group_act(
            members,
            policy,
            group,
            mine,
            shares,
            findings=facts.findings,
            by_namespace=by_namespace,
            sparklines=sparklines,
            now=now,
            report=report,
        )
    # the evaluations that every finding of theirs has moved on from
    IdleGroupEvaluation.objects.filter(findings__isnull=True).delete()


def _group_act(
    members: list[Allocation],
    policy: ReclamationPolicy,
    group: GroupEvaluation,
    mine: list[DeviceUsage] | None,
    shares: list[AllocationShare],
    *,
    findings: tuple[dict[int, IdleFinding], set[int]],
    by_namespace: dict[str | None, list[DeviceUsage]],
    sparklines: _Sparklines,
    now: datetime,
    report: ScanReport,
) -> None:
    """Act on one evaluated group (:func:`_evaluate`'s ``group``, ``mine`` and ``shares``):
    its evaluation with a sparkline when an allocation of it is idle (:func:`_idle_evaluation`,
    which may raise :class:`SchedulerError`), its verdicts recorded in one transaction
    (:func:`_record_group`), then each idle finding reclaimed when due
    (:func:`_maybe_reclaim`). ``findings``: :func:`_findings_of`'s open findings and
    recently dismissed allocation ids."""
    evaluation = _idle_evaluation(
        group,
        shares,
        mine,
        policy.pool,
        members[0].team.slug,
        by_namespace,
        sparklines,
        policy_thresholds(policy),
    )
    rows = _group_rows(members, shares, *findings, report)
    for finding, allocation, share in _record_group(rows, group, evaluation, policy, now, report):
        _maybe_reclaim(finding, allocation, share, group, policy, now, report)


def _pool_hosts(policies: dict[int, ReclamationPolicy]) -> dict[int, set[str]]:
    """The hostnames of each policy pool's nodes, by pool id (a pool without nodes: absent,
    read as the empty set)."""
    hosts: dict[int, set[str]] = defaultdict(set)
    for hostname, pool_id in Node.objects.filter(pool_id__in=policies).values_list(
        "hostname", "pool_id"
    ):
        hosts[pool_id].add(hostname)
    return hosts


def _groups_of(
    allocations: list[Allocation],
) -> dict[tuple[int, int, int | None], list[Allocation]]:
    """The allocations grouped as they are judged, keyed ``(team id, pool id, GPU model id or
    None)``, each group in the allocations' order (oldest first)."""
    # Kubernetes: a team's namespace holds all its cards of a pool; Slurm: per GPU model
    groups: dict[tuple[int, int, int | None], list[Allocation]] = defaultdict(list)
    for allocation in allocations:
        model = allocation.gpu_model_id if allocation.pool.scheduler == Scheduler.SLURM else None
        groups[(allocation.team_id, allocation.pool_id, model)].append(allocation)
    return groups


def _group_rows(
    members: list[Allocation],
    shares: list[AllocationShare],
    open_findings: dict[int, IdleFinding],
    dismissed: set[int],
    report: ScanReport,
) -> list[tuple[Allocation, IdleFinding | None, AllocationShare]]:
    """:func:`_record_group`'s rows of one group: each allocation with its open finding (or
    ``None``) and its share, in ``members``' order; an allocation with no open finding that
    is idle again within :data:`DISMISSAL_HOLDS` of a dismissal is left out and counted in
    ``report.dismissed``."""
    rows = []
    for allocation, share in zip(members, shares, strict=True):
        finding = open_findings.get(allocation.pk)
        if finding is None and allocation.pk in dismissed and share.verdict == Verdict.IDLE:
            report.dismissed += 1  # an admin said it is fine: not flagged again for a week
            continue
        rows.append((allocation, finding, share))
    return rows


def _evaluate(members, policy, hosts, slurm, by_namespace, now, report) -> tuple:
    """One group's ``(evaluation, its series or None for Slurm, each allocation's share)``;
    the allocations left unknown are said in ``report.no_data``."""
    pool = policy.pool
    thresholds = policy_thresholds(policy)
    if pool.scheduler == Scheduler.SLURM:
        group = slurm.evaluate(members, thresholds)
        mine = None  # the series of its cards, looked up only if a finding needs them
    else:
        mine = devices_for_group(
            by_namespace,
            scheduler=pool.scheduler,
            team_slug=members[0].team.slug,
            pool_hosts=hosts[pool.pk],
        )
        group = evaluate_group(
            mine, held=sum(a.card_count for a in members), end=now.timestamp(), t=thresholds
        )
    shares = split_group(group, [(a.pk, a.card_count) for a in members])
    report.no_data.extend(
        f"allocation #{a.pk} ({a.team.slug}, {pool.slug}, {a.card_count} cards): "
        f"not judged, {group.reason}"
        for a, share in zip(members, shares, strict=True)
        if share.verdict == Verdict.UNKNOWN
    )
    return group, mine, shares


def _idle_evaluation(
    group, shares, mine, pool, team_slug, by_namespace, sparklines, thresholds
) -> IdleGroupEvaluation | None:
    """The group's evaluation for its findings to share (unsaved), with its sparkline, when
    an allocation of it is idle; ``None`` else (the sparkline costs a pass over samples).
    ``mine``: the group's series, ``None`` for a Slurm group (looked up here)."""
    if not any(share.verdict == Verdict.IDLE for share in shares):
        return None
    if mine is None:
        uuids = {c.uuid for c in group.cards}
        mine = [d for d in by_namespace.get(None, ()) if d.uuid in uuids]
    namespace = None if pool.scheduler == Scheduler.SLURM else f"team-{team_slug}"
    sparkline = sparklines.points(mine, namespace, by_namespace, thresholds)
    return IdleGroupEvaluation(evaluated_at=sparklines.now, detail=finding_detail(group, sparkline))


def _findings_of(allocations, now) -> tuple[dict[int, IdleFinding], set[int]]:
    """The allocations' open findings by allocation id, and the ids of those dismissed
    within :data:`DISMISSAL_HOLDS`."""
    # by the allocations' pools, not by their ids: 12,600 ids a statement, twice, cost more
    # to send and bind than the few findings of the pools' other allocations cost to drop
    ids = {a.pk for a in allocations}
    mine = IdleFinding.objects.filter(allocation__pool_id__in={a.pool_id for a in allocations})
    open_findings = {
        f.allocation_id: f
        for f in mine.filter(state=IdleFindingState.OPEN)
        if f.allocation_id in ids
    }
    dismissed = {
        allocation_id
        for allocation_id in mine.filter(
            state=IdleFindingState.DISMISSED, closed_at__gt=now - DISMISSAL_HOLDS
        ).values_list("allocation_id", flat=True)
        if allocation_id in ids
    }
    return open_findings, dismissed


class _SlurmView:
    """The Slurm side of one scan: each Slurm pool's jobs, read once (two adapter calls) the
    first time one of its groups is evaluated."""

    def __init__(self, policies, groups, hosts, devices, now, adapter, report) -> None:
        self.policies, self.hosts, self.devices, self.now = policies, hosts, devices, now
        self.report = report
        self._adapter = adapter
        self._accounts: dict[int, set[str]] = defaultdict(set)
        for (_team_id, pool_id, model), members in groups.items():
            if model is not None:
                self._accounts[pool_id].add(members[0].team.slug)
        self._pools: dict[int, tuple[SlurmPoolJobs, dict, dict] | str] = {}
        self._gres: dict[int, str] = {}

    def evaluate(self, members: list[Allocation], thresholds: Thresholds) -> GroupEvaluation:
        first = members[0]
        pool = first.pool
        window_start = self.now - timedelta(minutes=self.policies[pool.pk].window_minutes)
        seen = self._pool(pool, window_start)
        if isinstance(seen, str):
            return GroupEvaluation(Verdict.UNKNOWN, (), 0, False, None, seen)
        jobs, models, series = seen
        if first.gpu_model_id not in self._gres:
            self._gres[first.gpu_model_id] = slurm_gres_type(first.gpu_model)
        return evaluate_slurm_group(
            jobs=jobs,
            account=first.team.slug,
            gres_type=self._gres[first.gpu_model_id],
            gpu_model_id=first.gpu_model_id,
            models=models,
            pool_hosts=self.hosts[pool.pk],
            series=series,
            held=sum(a.card_count for a in members),
            window_start=window_start,
            end=self.now,
            t=thresholds,
        )

    def _pool(self, pool, window_start):
        if pool.pk not in self._pools:
            try:  # the pool's own cluster (the environment's for a pool without one)
                adapter = self._adapter or pool_adapter(pool)
            except (OSError, ValueError) as exc:  # credentials unreadable, settings refused
                message = (
                    f"cluster of {pool.slug} cannot be reached, its allocations unknown: {exc}"
                )
                self.report.notes.append(message)
                self.report.cluster_errors.append(f"credentials: {exc}")
                self._pools[pool.pk] = message
                return self._pools[pool.pk]
            if adapter is None:
                self._pools[pool.pk] = "Slurm is not configured (SCHEDULERS): jobs unknown"
            else:
                try:
                    jobs = slurm_pool_jobs(
                        adapter,
                        pool,
                        sorted(self._accounts[pool.pk]),
                        start=window_start,
                        end=self.now,
                    )
                except SchedulerError as exc:
                    message = f"Slurm unavailable for {pool.slug}, its allocations unknown: {exc}"
                    self.report.notes.append(message)
                    self.report.cluster_errors.append(f"{pool.slug}: {exc}")
                    self._pools[pool.pk] = message
                else:
                    self._pools[pool.pk] = (
                        jobs,
                        card_models(pool),
                        series_by_card(self.devices, self.hosts[pool.pk]),
                    )
        return self._pools[pool.pk]


class _Sparklines:
    """The utilisation sparklines of one scan's idle groups (:func:`utilisation_sparkline`),
    read from Prometheus only for them: the scan's summary holds no per-step values.

    A Kubernetes group that is its namespace's whole set of reporting devices, each one card
    of one profiling series (no MIG, not read per step), in a window of at most 60 steps (one
    step per point): the namespace's line from the adapter's ``utilisation_by_namespace`` (two
    range queries per window for all namespaces, one short series each; the mean over series
    is then the mean over cards). Any other group (Slurm's cards, a namespace spread over
    pools, consumer cards, longer windows): its own cards' samples over the scan's longest
    window (``gpu_usage`` with their UUIDs), as the scan read them before."""

    POINTS = 60  # utilisation_sparkline's default

    def __init__(self, metrics: Any, now: datetime, longest: timedelta) -> None:
        self.metrics, self.now, self.longest = metrics, now, longest
        self._namespaces: dict[int, dict[str, tuple]] = {}
        # the namespaces whose lines may be asked for (``None``: any): the lines are read
        # for those only, a fraction of the fleet's series
        self.namespaces: set[str] | None = None

    def points(
        self,
        mine: list,
        namespace: str | None,
        by_namespace: dict[str | None, list],
        t: Thresholds,
    ) -> list[list[float]]:
        reporting = [d for d in by_namespace.get(namespace, ()) if d.util_source]
        if (
            namespace is not None
            and {d.key for d in mine if d.util_source} == {d.key for d in reporting}
            and all(
                d.util_source == "prof" and d.reduced and d.gpu_instance_id is None
                for d in reporting
            )
            and t.window_s <= t.step_s * self.POINTS
        ):
            line = self._namespace_lines(t).get(namespace, ())
            return [[s.timestamp, round(s.value, 1)] for s in line]
        uuids = sorted({d.uuid for d in mine if d.util_source})
        if not uuids:
            return []
        keys = {d.key for d in mine}
        devices: list[DeviceUsage] = []
        for label in ("UUID", "uuid"):
            found = self.metrics.gpu_usage(
                start=self.now - self.longest,
                end=self.now,
                step_s=t.step_s,
                selector=uuid_selector(label, uuids),
            )
            devices += [d for d in found if d.key in keys]
        return utilisation_sparkline(devices, end=self.now.timestamp(), t=t)

    def _namespace_lines(self, t: Thresholds) -> dict[str, tuple]:
        """The namespaces' lines over ``t``'s window, read once per window."""
        if t.window_s not in self._namespaces:
            self._namespaces[t.window_s] = self.metrics.utilisation_by_namespace(
                start=self.now - timedelta(seconds=t.window_s),
                end=self.now,
                step_s=t.step_s,
                namespaces=self.namespaces,
            )
        return self._namespaces[t.window_s]


def finding_detail(group: GroupEvaluation, sparkline: list[list[float]]) -> dict[str, Any]:
    """The evaluation's per-card numbers and the group's utilisation sparkline over the
    window (``[unix_ts, %]`` pairs, :func:`utilisation_sparkline`), stored once per group
    (:class:`IdleGroupEvaluation`) for all its findings."""
    return {
        "reason": group.reason,
        "sparkline": sparkline,
        "cards": [
            {
                "uuid": c.uuid,
                "hostname": c.hostname,
                "verdict": str(c.verdict),
                "mean_util_pct": c.mean_util_pct,
                "peak_util_pct": c.peak_util_pct,
                "coverage": round(c.coverage, 3),
                "peak_fb_used_mib": c.peak_fb_used_mib,
                "low_confidence": c.low_confidence,
            }
            for c in group.cards
        ],
    }


def _group_numbers(group: GroupEvaluation, evaluation: IdleGroupEvaluation) -> dict[str, Any]:
    """What every idle finding of the group stores alike (once per group: the peak is over
    all the group's cards): ``mean_util_pct`` and ``peak_util_pct`` as 2-place Decimals."""
    peaks = [c.peak_util_pct for c in group.cards if c.peak_util_pct is not None]
    return {
        "certainly_idle": group.certainly_idle,
        "mean_util_pct": percent_decimal(group.mean_util_pct),
        "peak_util_pct": percent_decimal(max(peaks) if peaks else None),
        "evaluation": evaluation,
    }


def _numbers(share: AllocationShare, shared: dict[str, Any]) -> dict[str, Any]:
    """One idle finding's numbers: its share's cards and the group's ``shared`` numbers."""
    return {
        "card_count": share.card_count,
        "cards_in_use": min(share.cards_in_use, share.card_count),
        **shared,
    }


# What a scan that sees an open finding idle again writes to it.
_SEEN_FIELDS = [
    "card_count",
    "cards_in_use",
    "certainly_idle",
    "mean_util_pct",
    "peak_util_pct",
    "evaluation",
    "last_seen_at",
    "dry_run",
    "warned_at",
]


def grace_ends_at(
    finding: IdleFinding, policy: ReclamationPolicy, *, dry_run: bool
) -> datetime | None:
    """When ``finding``'s grace period ends: ``policy.grace_hours`` after the team was warned
    (after the finding was first seen under dry run, which warns nobody); ``None`` while the
    clock has not started. The scan and the idle page both read it."""
    clock = finding.first_seen_at if dry_run else finding.warned_at
    return None if clock is None else clock + timedelta(hours=policy.grace_hours)


def reclaim_due_at(finding: IdleFinding, policy: ReclamationPolicy | None) -> datetime | None:
    """The instant the scan reclaims an open finding's cards (under dry run: would reclaim
    them), as the idle page counts down to it, its CSV and the API give it: the end of its
    grace (:func:`grace_ends_at`). ``None`` when the finding is not open, its pool has no
    policy, or the grace has not started (not warned yet). Once past, the next scan acts
    unless something holds it (the finding's note says what)."""
    if finding.state != IdleFindingState.OPEN or policy is None:
        return None
    return grace_ends_at(finding, policy, dry_run=finding.dry_run)


def finding_policy(finding: IdleFinding) -> ReclamationPolicy | None:
    """The reclamation policy of the finding's pool, ``None`` without one (joined by
    :func:`pools.reclamation.selectors.idle_finding_list`: no query of its own)."""
    try:
        return finding.allocation.pool.reclamation_policy
    except ReclamationPolicy.DoesNotExist:
        return None


def percent_decimal(value: float | None) -> Decimal | None:
    return None if value is None else Decimal(f"{value:.2f}")


def _record_group(
    rows: list[tuple[Allocation, IdleFinding | None, AllocationShare]],
    group: GroupEvaluation,
    evaluation: IdleGroupEvaluation | None,
    policy: ReclamationPolicy,
    now: datetime,
    report: ScanReport,
) -> list[tuple[IdleFinding, Allocation, AllocationShare]]:
    """Act on one group's verdicts, ``rows`` of (allocation, its open finding or ``None``,
    its share): unknown changes nothing; busy resolves an open finding; idle opens a finding
    (sharing the group's ``evaluation``) or updates it, and warns the team once unless dry
    run. All of the group's writes and their audit events in one transaction, a few
    statements (issue #29 item 7: a transaction per allocation cost a COMMIT each); the
    warning emails are sent on commit. Returns the idle findings, for :func:`_maybe_reclaim`
    after that commit."""
    resolved, opened, seen, idle = _sort_verdicts(rows, group, evaluation, policy, now, report)
    warned = [f for f, _, _ in idle if not policy.dry_run and f.warned_at is None]
    for finding in warned:
        finding.warned_at = now
    if not resolved and not idle:
        return idle
    with transaction.atomic():
        if idle:
            evaluation.save()
            for finding, _, _ in idle:
                finding.evaluation = evaluation  # its id, now that it has one
        IdleFinding.objects.bulk_create(opened)
        _findings_update(resolved, ["state", "closed_at", "note"])
        _findings_update(seen, _SEEN_FIELDS)
        events = _group_events(resolved, opened, warned, group, policy)
        if events:
            audit_events_write(events)
        for finding in warned:
            transaction.on_commit(lambda f=finding, p=policy: _email_warning(f, p))
    report.resolved += len(resolved)
    report.warned += len(warned)
    return idle


def _sort_verdicts(rows, group, evaluation, policy, now, report) -> tuple[list, list, list, list]:
    """:func:`_record_group`'s findings changed in memory, nothing saved: (resolved, opened,
    seen idle again, idle as (finding, allocation, share)); the report counts the verdicts."""
    resolved, opened, seen, idle = [], [], [], []
    shared: dict[str, Any] = {}
    for allocation, finding, share in rows:
        if share.verdict == Verdict.UNKNOWN:
            report.unknown += 1  # no evidence either way: an open finding waits, its grace too
        elif share.verdict == Verdict.BUSY:
            report.busy += 1
            if finding is not None:
                finding.state = IdleFindingState.RESOLVED
                finding.closed_at = now
                finding.note = f"busy again: {group.reason}"
                resolved.append(finding)
        else:
            report.idle += 1
            shared = shared or _group_numbers(group, evaluation)
            numbers = _numbers(share, shared)
            if finding is None:
                finding = IdleFinding(
                    allocation=allocation, first_seen_at=now, dry_run=policy.dry_run, **numbers
                )
                opened.append(finding)
            else:
                for name, value in numbers.items():
                    setattr(finding, name, value)
                finding.dry_run = policy.dry_run
                seen.append(finding)
            finding.last_seen_at = now
            idle.append((finding, allocation, share))
    return resolved, opened, seen, idle


def _findings_update(findings: list[IdleFinding], names: list[str]) -> None:
    """Write the fields ``names`` of ``findings`` in one ``UPDATE … FROM (VALUES …)``
    (PostgreSQL), each value prepared by its field as ``save`` does. ``bulk_update`` writes
    the same in one statement too, but builds a ``CASE`` per field and finding first: ~1 ms a
    finding in the ORM against ~0.1 ms in PostgreSQL (benchmarks/reclamation.py, 400
    findings). On the SQLite demo (no ``VALUES`` column list): ``bulk_update``."""
    if not findings:
        return
    if connection.vendor != "postgresql":
        IdleFinding.objects.bulk_update(findings, names)
        return
    meta = IdleFinding._meta
    columns = [meta.pk, *(meta.get_field(name) for name in names)]
    quote = connection.ops.quote_name
    row = "(" + ", ".join(f"CAST(%s AS {c.cast_db_type(connection)})" for c in columns) + ")"
    sql = "UPDATE {table} AS f SET {sets} FROM (VALUES {rows}) AS v ({names}) WHERE f.{pk} = v.{pk}"
    sql = sql.format(
        table=quote(meta.db_table),
        sets=", ".join(f"{quote(c.column)} = v.{quote(c.column)}" for c in columns[1:]),
        rows=", ".join([row] * len(findings)),
        names=", ".join(quote(c.column) for c in columns),
        pk=quote(meta.pk.column),
    )
    params = [
        c.get_db_prep_save(getattr(finding, c.attname), connection)
        for finding in findings
        for c in columns
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _group_events(resolved, opened, warned, group, policy) -> list:
    """The audit events of :func:`_record_group`'s writes (unsaved), as the single-finding
    path wrote them: resolved, opened (with the finding's numbers), warned."""
    events = [
        audit_event_build(actor=None, action="idle_finding.resolved", obj=f, reason=f.note)
        for f in resolved
    ]
    events += [
        audit_event_build(
            actor=None,
            action="idle_finding.opened",
            obj=f,
            after=_finding_snapshot(f),
            reason=group.reason,
        )
        for f in opened
    ]
    events += [
        audit_event_build(
            actor=None,
            action="idle_finding.warned",
            obj=f,
            reason=f"reclaim after {policy.grace_hours} h unless in use",
        )
        for f in warned
    ]
    return events


def exemption_in_force(
    *, team_id: int, allocation_id: int, now: datetime | None = None
) -> Exemption | None:
    """The longest-running exemption of the team or the allocation that has not expired."""
    now = now or timezone.now()
    return (
        Exemption.objects.filter(
            Q(team_id=team_id) | Q(allocation_id=allocation_id), expires_at__gt=now
        )
        .order_by("-expires_at", "-id")
        .first()
    )


def _maybe_reclaim(
    finding: IdleFinding,
    allocation: Allocation,
    share: AllocationShare,
    group: GroupEvaluation,
    policy: ReclamationPolicy,
    now: datetime,
    report: ScanReport,
) -> None:
    """Reclaim when: grace over since the warning (since first seen under dry-run), the cards
    are *certainly* idle, no exemption is in force, and the allocation has not changed within
    the cooldown. Dry-run records ``would_reclaim_at`` (once) instead."""
    due = grace_ends_at(finding, policy, dry_run=policy.dry_run)
    if due is None or now < due:
        return
    hold = _reclaim_hold(allocation, group, policy, now, report)
    if hold:
        if finding.note != hold:
            finding.note = hold
            finding.save(update_fields=["note"])
        return
    keep = min(share.cards_in_use, allocation.card_count)
    if policy.dry_run:
        if finding.would_reclaim_at is None:
            _would_reclaim_record(finding, allocation, keep=keep, now=now)
        report.would_reclaim += 1
        return
    why = (
        f"reclaimed: idle since {finding.first_seen_at:%Y-%m-%d %H:%M %Z}, mean "
        f"{finding.mean_util_pct} % over {policy.window_minutes} min"
    )
    if allocation_reclaim(finding, allocation, keep=keep, why=why, now=now, actor=None) is not None:
        report.reclaimed += 1


def _reclaim_hold(
    allocation: Allocation,
    group: GroupEvaluation,
    policy: ReclamationPolicy,
    now: datetime,
    report: ScanReport,
) -> str | None:
    """Why a finding whose grace is over is not reclaimed now, as the note it gets, or
    ``None``: an exemption in force (counted in ``report.exempt``; its note wins over the
    others), else a change of the allocation within the policy's cooldown (minutes), else
    cards idle but not *certainly* idle."""
    hold = None
    if not group.certainly_idle:
        hold = "idle but not certainly idle (a peak or process memory): not reclaimed"
    exemption = exemption_in_force(team_id=allocation.team_id, allocation_id=allocation.pk, now=now)
    if exemption is not None:
        hold = f"exempt until {exemption.expires_at:%Y-%m-%d %H:%M}: {exemption.reason}"
        report.exempt += 1
    elif allocation.updated_at > now - timedelta(minutes=policy.cooldown_minutes):
        hold = f"changed within the {policy.cooldown_minutes} min cooldown"
    return hold


def _would_reclaim_record(
    finding: IdleFinding, allocation: Allocation, *, keep: int, now: datetime
) -> None:
    """Under a dry-run policy: store on ``finding`` when (``now``) and what the scan would have
    reclaimed (end the allocation, ``keep`` 0, or shrink it to ``keep`` cards), audited, in one
    transaction; the allocation is not touched."""
    action = "end it" if keep == 0 else f"shrink it from {allocation.card_count} to {keep} cards"
    with transaction.atomic():
        finding.would_reclaim_at = now
        finding.note = f"dry run: would {action}"
        finding.save(update_fields=["would_reclaim_at", "note"])
        audit_event_record(
            actor=None,
            action="idle_finding.would_reclaim",
            obj=finding,
            reason=finding.note,
        )


def allocation_reclaim(
    finding: IdleFinding,
    allocation: Allocation,
    *,
    keep: int,
    why: str,
    now: datetime,
    actor: Any,
) -> IdleFinding | None:
    """Take an open finding's allocation down to ``keep`` cards, or end it (``keep`` 0), under
    the pool lock: the one reclaim path of the scan and of an admin's reclaim-now. ``why``
    starts the reason stored on the allocation and the finding. A placed allocation shrunk
    keeps the first ``keep`` cards of its placement in placement order, whole groups first
    (:func:`pools.capacity.shapes.placement_kept`; its ``PlacedCards`` rewritten and the
    smaller placement audited in the same transaction), so the cards given back are free for
    shapes too; the finding keeps the whole placement for an undo. Returns the reclaimed finding,
    or ``None`` (nothing changed) when the allocation is no longer active or expiring or the
    finding no longer open. The scheduler's cap is lowered after commit (unbind or rebind task).
    """
    with transaction.atomic():
        pool_lock(allocation.pool_id)
        locked = allocation_lock(allocation.pk)
        finding = IdleFinding.objects.select_for_update().get(pk=finding.pk)
        if locked.status not in RUNNING_STATUSES or finding.state != IdleFindingState.OPEN:
            return None
        keep = min(keep, locked.card_count)
        action = "end it" if keep == 0 else f"shrink it from {locked.card_count} to {keep} cards"
        reason = f"{why}; {action}"
        finding.card_count = locked.card_count
        finding.status_before = locked.status
        finding.ends_at_before = locked.ends_at
        finding.placement_before = locked.placement
        if keep == 0:
            allocation_transition(
                locked,
                to=AllocationStatus.RECLAIMED,
                actor=actor,
                action="allocation.reclaimed",
                reason=reason,
                ends_at=min(locked.ends_at, now),
            )
        else:
            _allocation_shrink(locked, keep=keep, reason=reason, actor=actor)
        _finding_reclaimed(finding, keep=keep, reason=reason, now=now, actor=actor)
    return finding


def _allocation_shrink(locked: Allocation, *, keep: int, reason: str, actor: Any) -> None:
    """Take the locked running ``locked`` allocation down to ``keep`` cards (1 up to its
    ``card_count``), a placed one to the first ``keep`` cards of its placement
    (:func:`pools.capacity.shapes.placement_kept`), audited as ``allocation.shrunk`` with
    ``reason``; its scheduler cap is rebound after commit. Inside the caller's transaction."""
    before = allocation_snapshot(locked)
    locked.card_count = keep
    locked.status_reason = reason
    if locked.placement:
        _placement_set(locked, placement_kept(locked.placement, keep))
    locked.save()
    audit_event_record(
        actor=actor,
        action="allocation.shrunk",
        obj=locked,
        before=before,
        after=allocation_snapshot(locked),
        reason=reason,
    )
    _queue_rebind(locked.pk)


def _finding_reclaimed(
    finding: IdleFinding, *, keep: int, reason: str, now: datetime, actor: Any
) -> None:
    """Close the locked ``finding`` as reclaimed at ``now``: ``keep`` cards left in use of its
    ``card_count`` (the rest counted reclaimed), ``reason`` as its note; audited as
    ``idle_finding.reclaimed`` and the team emailed after commit. Inside the caller's
    transaction."""
    finding.state = IdleFindingState.RECLAIMED
    finding.reclaimed_at = now
    finding.cards_reclaimed = finding.card_count - keep
    finding.cards_in_use = keep
    finding.note = reason
    finding.save()
    audit_event_record(
        actor=actor,
        action="idle_finding.reclaimed",
        obj=finding,
        after=_finding_snapshot(finding),
        reason=reason,
    )
    # by a task: "reclaim now" is a request, which must not wait on the mail server
    enqueue_on_commit(IDLE_RECLAIMED_EMAIL, finding.pk)


def _queue_rebind(allocation_id: int) -> None:
    enqueue_on_commit(ALLOCATION_REBIND, allocation_id)


def allocation_rebind(*, allocation_id: int) -> dict | None:
    """Set the team's scheduler cap to its open-window cards after ``card_count`` changed
    (shrunk by reclamation, or restored by undo); stores and returns the binding. Raises the
    adapter's errors.

    Released while the scheduler applied it, its unbind may have run first (the cap lowered,
    the reservation deleted) and this apply put both back: the binding is stored all the same
    and the unbind queued again once that commits."""
    allocation = Allocation.objects.select_related("team", "pool", "gpu_model").get(
        pk=allocation_id
    )
    if allocation.status not in RUNNING_STATUSES:
        return None
    binding = binding_apply(allocation)
    with transaction.atomic():
        locked = allocation_lock(allocation_id)
        Allocation.objects.filter(pk=allocation_id).update(scheduler_binding=binding)
        if locked.status not in RUNNING_STATUSES:
            enqueue_on_commit(ALLOCATION_UNBIND, allocation_id)
    return binding


def _undo_ends_at(finding: IdleFinding, allocation: Allocation, now: datetime) -> datetime:
    """The end the undone allocation gets back (its end before the reclamation), once the
    finding is reclaimed, less than :data:`UNDO_WINDOW` ago, and that end is still ahead;
    else :class:`InvalidTransition` saying which (pure)."""
    if finding.state != IdleFindingState.RECLAIMED or finding.reclaimed_at is None:
        raise InvalidTransition(
            "This reclamation was undone already."
            if finding.state == IdleFindingState.UNDONE
            else f"Only a reclaimed finding can be undone; this one is {finding.state}.",
            status=finding.state,
            action="undo",
        )
    if now > finding.reclaimed_at + UNDO_WINDOW:
        raise InvalidTransition(
            "A reclamation can be undone for a day only.",
            status=finding.state,
            action="undo",
            reclaimed_at=finding.reclaimed_at.isoformat(),
        )
    ends_at = finding.ends_at_before or allocation.ends_at
    if ends_at <= now:
        raise InvalidTransition(
            "The allocation's window is over.", status=finding.state, action="undo"
        )
    return ends_at


def _undo_placement(
    finding: IdleFinding, allocation: Allocation, now: datetime, ends_at: datetime
) -> list[dict]:
    """The placement the undone allocation gets back (a shrink kept part of it: the whole one
    before), once the pool has as many cards free over ``[now, ends_at)`` as it held and, when
    placed, those very cards; else :class:`InsufficientCapacity`."""
    free = pool_free_cards(
        pool=allocation.pool,
        gpu_model=allocation.gpu_model,
        start=now,
        end=ends_at,
        exclude_allocation=allocation.pk,
    )
    if free < finding.card_count:
        raise InsufficientCapacity(
            f"Only {free} {allocation.gpu_model.name} card(s) are free in "
            f"{allocation.pool.name}; undoing needs {finding.card_count}.",
            free=free,
            requested=finding.card_count,
        )
    placement = finding.placement_before or allocation.placement
    _check_placed_cards_free(allocation, placement, now, ends_at, free)
    return placement


def reclamation_undo(
    *, finding: IdleFinding, actor: Any, now: datetime | None = None
) -> IdleFinding:
    """Give a reclaimed allocation its cards (and window) back, within a day of the
    reclamation, if the pool still has the cards free (pool admins only): as many free cards
    as it held and, for a placed allocation, the very cards of its placement (the whole one
    it had before a shrink) free for the rest of its window
    (:func:`pools.capacity.shapes.placement_taken`, its own holds aside).

    Raises :class:`PermissionDenied`, :class:`InvalidTransition` (not reclaimed, more than a
    day ago, or its window is over) and :class:`InsufficientCapacity` (data: ``free``,
    ``requested``, and ``taken`` when placed cards are not free); a refused undo changes
    nothing.
    """
    require_pool_admin(actor, "Only pool admins can undo a reclamation.")
    now = now or timezone.now()
    with transaction.atomic():
        pool_lock(finding.allocation.pool_id)
        allocation = allocation_lock(finding.allocation_id)
        finding = IdleFinding.objects.select_for_update().get(pk=finding.pk)
        ends_at = _undo_ends_at(finding, allocation, now)
        placement = _undo_placement(finding, allocation, now, ends_at)
        before = allocation_snapshot(allocation)
        allocation.status = finding.status_before or AllocationStatus.ACTIVE
        allocation.card_count = finding.card_count
        allocation.ends_at = ends_at
        allocation.status_reason = f"reclamation undone by {actor}"
        if placement != allocation.placement:
            _placement_set(allocation, placement)
        allocation.save()
        audit_event_record(
            actor=actor,
            action="allocation.reclamation_undone",
            obj=allocation,
            before=before,
            after=allocation_snapshot(allocation),
        )
        finding.state = IdleFindingState.UNDONE
        finding.closed_at = now
        finding.save()
        audit_event_record(actor=actor, action="idle_finding.undone", obj=finding)
        _queue_rebind(allocation.pk)
    return finding


def _placement_set(allocation: Allocation, placement: list[dict]) -> None:
    """Give the locked ``allocation`` ``placement`` and rewrite its :class:`PlacedCards` rows
    to match (the caller saves the allocation and audits it, in the same transaction)."""
    allocation.placement = placement
    PlacedCards.objects.filter(allocation=allocation).delete()
    PlacedCards.objects.bulk_create(placed_cards(allocation))


def _check_placed_cards_free(
    allocation: Allocation, placement: list[dict], now: datetime, ends_at: datetime, free: int
) -> None:
    """Raise :class:`InsufficientCapacity` (data ``taken``: the cards not free, as a
    placement) when the cards ``placement`` gives the allocation back are not all free over
    ``[now, ends_at)`` apart from the allocation's own holds: another allocation was placed on
    them since (or the node went down), and a count of free cards cannot tell."""
    if not placement:
        return
    taken = placement_taken(
        pool=allocation.pool,
        gpu_model=allocation.gpu_model,
        placement=placement,
        start=now,
        end=ends_at,
        exclude_allocation=allocation.pk,
    )
    if not taken:
        return
    where = "; ".join(f"{spot['node']} GPU {', '.join(map(str, spot['gpus']))}" for spot in taken)
    requested = sum(len(spot["gpus"]) for spot in placement)
    raise InsufficientCapacity(
        f"The cards allocation #{allocation.pk} was placed on are no longer all free in "
        f"{allocation.pool.name} ({where} taken or not schedulable); the reclamation cannot "
        "be undone onto them.",
        free=free,
        requested=requested,
        taken=taken,
    )


def idle_finding_dismiss(*, finding: IdleFinding, actor: Any, reason: str) -> IdleFinding:
    """Close an open finding without reclaiming (pool admins); the scan does not open another
    for the same allocation for :data:`DISMISSAL_HOLDS` (7 days)."""
    require_pool_admin(actor, "Only pool admins can dismiss a finding.")
    with transaction.atomic():
        finding = IdleFinding.objects.select_for_update().get(pk=finding.pk)
        if finding.state != IdleFindingState.OPEN:
            raise InvalidTransition(
                f"This finding is {finding.state} already: only an open finding can be dismissed.",
                status=finding.state,
                action="dismiss",
            )
        finding.state = IdleFindingState.DISMISSED
        finding.closed_at = timezone.now()
        finding.note = reason
        finding.save()
        audit_event_record(actor=actor, action="idle_finding.dismissed", obj=finding, reason=reason)
    return finding


def _finding_snapshot(finding: IdleFinding) -> dict:
    return audit_snapshot(
        finding,
        "state",
        "card_count",
        "cards_in_use",
        "cards_reclaimed",
        "mean_util_pct",
        "certainly_idle",
        "dry_run",
        allocation="allocation_id",
    )


def _team_emails(allocation: Allocation) -> list[str]:
    return team_member_emails(team_id=allocation.team_id)


def _email_warning(finding: IdleFinding, policy: ReclamationPolicy) -> None:
    allocation = finding.allocation
    recipients = _team_emails(allocation)
    if not recipients:
        return
    send_mail(
        subject=f"[gpu-pool] Allocation #{allocation.pk} looks idle",
        message=(
            f"Allocation #{allocation.pk} of team {allocation.team.name} "
            f"({finding.card_count}x {allocation.gpu_model.name} in {allocation.pool.name}) "
            f"averaged {finding.mean_util_pct} % GPU utilisation over the last "
            f"{policy.window_minutes} min; {finding.cards_in_use} card(s) in use.\n"
            f"If it stays idle, its unused cards return to the pool after "
            f"{policy.grace_hours} h. Ask a pool admin for an exemption if you need them."
        ),
        from_email=None,
        recipient_list=recipients,
        fail_silently=True,
    )


def idle_finding_reclaimed_email(*, finding_id: int) -> int:
    """E-mail the team of reclaimed finding ``finding_id`` what was taken back and that a pool
    admin can undo it within a day; returns how many it was sent to (0: the finding is gone or
    the team has no address). Queued once the reclamation commits (:data:`IDLE_RECLAIMED_EMAIL`).
    """
    finding = (
        IdleFinding.objects.select_related("allocation__gpu_model", "allocation__pool")
        .filter(pk=finding_id)
        .first()
    )
    if finding is None:
        return 0
    allocation = finding.allocation
    recipients = _team_emails(allocation)
    if not recipients:
        return 0
    send_mail(
        subject=f"[gpu-pool] {finding.cards_reclaimed} card(s) of allocation "
        f"#{allocation.pk} reclaimed",
        message=(
            f"{finding.note}.\n{finding.cards_reclaimed} of {finding.card_count} "
            f"{allocation.gpu_model.name} card(s) returned to {allocation.pool.name}. "
            f"A pool admin can undo this within a day if the cards are still free."
        ),
        from_email=None,
        recipient_list=recipients,
        fail_silently=True,
    )
    return len(recipients)
