"""Reconcile: make the schedulers hold what active allocations require, and record drift.

For Slurm, what allocations require is, per team account and GRES type, the cards of the team's
open-window allocations (:func:`pools.capacity.services.scheduler_binding.team_cards_applied`);
what Slurm
holds is the account's GrpTRES (``get_gpu_limits``). Every difference — a cap changed by hand, an
account deleted, a cap left behind by a crash between "scheduler applied" and "database updated" —
is written as a :class:`~pools.models.SchedulerDrift` and repaired. Reconcile also refreshes the
node inventory from the scheduler (the same importer as an upload).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from pools.capacity.lifecycle import APPLIED_STATUSES
from pools.capacity.models import Allocation, SchedulerDrift, holding_q
from pools.capacity.services.class_qos import (
    slurm_class_qos_problem,
    slurm_qos_found,
    slurm_qos_sync,
    slurm_qos_wanted,
)
from pools.capacity.services.scheduler_binding import (
    binding_merge,
    cap_drift_subject,
    cluster_pools,
    kubernetes_quota_sync,
    kubernetes_quota_wanted,
    kueue_lender_sync,
    quota_drift_subject,
    reservation_drift_subject,
    reservation_name,
    reservation_removed_stamp,
    slurm_cap_gres_type,
    slurm_limit_sync,
    team_cards_applied,
)
from pools.clusters.adapters import cluster_adapter, scheduler_adapter
from pools.clusters.models import Cluster
from pools.clusters.services import cluster_of, cluster_operation_record
from pools.common.choices import ClusterOperation, CredentialKind, QuotaBackend, Scheduler
from pools.inventory.models import GpuModel, Pool
from pools.inventory.services.importer import inventory_import
from pools.jobs import RECONCILE_CLUSTER, enqueue_on_commit
from pools.overrides.models import OverrideKind, TemporaryOverride
from pools.tenancy.models import Team
from scheduler_adapters.base import QosAdapter, ReservationAdapter, SchedulerAdapter
from scheduler_adapters.errors import NotFound, SchedulerError
from scheduler_adapters.kubernetes import KubernetesAdapter
from scheduler_adapters.kubernetes_taints import (
    CARD_CLASS_TAINT_EFFECT,
    CARD_CLASS_TAINT_KEY,
    ensure_card_class_taints,
)
from scheduler_adapters.records import GpuLimit, ReservationRecord
from scheduler_adapters.types import InventorySource


@dataclass
class ReconcileReport:
    """What one reconcile run did: accounts checked, drifts found and repaired, errors, nodes
    refreshed, and the clusters kept as data queued for their own reconcile."""

    checked: int = 0
    drifts: list[SchedulerDrift] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    nodes_refreshed: int = 0
    inventory_imported: bool = False
    ran: bool = False  # an adapter was built (or its failure to build reported)
    clusters_queued: int = 0


def stamp_read_back(allocations, *, at: datetime, found: str) -> int:
    """Record on each allocation's binding what reconcile read back (``read_back``, e.g.
    ``gres/gpu:a100=4``) and when (``read_back_at``, ISO 8601), merged into the stored JSON in
    one UPDATE (PostgreSQL ``jsonb ||``) so a binding written meanwhile is not overwritten.
    Returns the rows stamped."""
    return binding_merge(allocations, {"read_back_at": at.isoformat(), "read_back": found})


def reconcile_slurm(cluster: Cluster | None = None) -> ReconcileReport:
    """Compare and repair every team account's GPU caps in the Slurm ``cluster`` (``None``: the
    environment's, :func:`~pools.capacity.services.scheduler_binding.cluster_pools`) through
    that cluster's adapter; refresh the cluster's Slurm nodes (placed among its pools only).

    Teams considered: those with an open-window allocation in a Slurm pool of the cluster or a
    ceiling override in force there, and those whose account still carries a cap (found
    through the teams' slugs). Scheduler errors
    are reported, never raised: one unreachable account does not stop the others.
    """
    report = ReconcileReport()
    cluster, adapter = _reconcile_adapter(Scheduler.SLURM, cluster, report)
    if adapter is None:
        return report
    in_cluster = cluster_pools(scheduler=Scheduler.SLURM, cluster=cluster)
    _refresh_nodes(adapter, report, InventorySource.SLURM, within=in_cluster, cluster=cluster)
    _reconcile_reservations(adapter, report, pools=in_cluster, cluster=cluster)
    holding = Allocation.objects.filter(pool__in=in_cluster, status__in=APPLIED_STATUSES)
    pairs = _capped_pairs(in_cluster, holding)
    in_pairs = Q(pk__in=[p[0] for p in pairs])
    teams = {
        t.pk: t
        for t in Team.objects.filter(in_pairs | Q(allocations__pool__in=in_cluster)).distinct()
    }
    models = {m.pk: m for m in GpuModel.objects.all()}
    pools = {p.pk: p for p in in_cluster.select_related("cluster")}
    default_pool = next(iter(pools.values()), None)
    for team in teams.values():
        held = _held_limits(adapter, report, team)
        if held is None:
            continue
        _reconcile_qos(adapter, report, team=team, pools=in_cluster, cluster=cluster)
        wanted = _wanted_gres(team, pairs, models, pools)
        for gres in set(held) | set(wanted):
            model, pool, profile = wanted.get(gres, (None, default_pool, ""))
            _reconcile_gres(
                adapter,
                report,
                team=team,
                gres=gres,
                held=held,
                target=(model, pool, profile),
                holding=holding,
            )
    _record_class_qos_health(adapter, report, cluster=cluster, pools=in_cluster)
    return report


def _held_limits(
    adapter: SchedulerAdapter, report: ReconcileReport, team: Team
) -> dict[str, int] | None:
    """``{GRES type: cards}`` the team's Slurm account is capped at now (``{}``: no account),
    or ``None`` when the scheduler cannot say (the error added to ``report.errors``)."""
    try:
        return {lim.gres_type: lim.cards for lim in adapter.get_gpu_limits(team.slug)}
    except NotFound:
        return {}
    except SchedulerError as exc:
        report.errors.append(f"{team.slug}: {exc}")
        return None


# An allocation that stopped holding cards this recently may still have its unbind task queued
# or retrying (pools.jobs back-off): its reservation is the task's to remove, not drift yet.
UNBIND_GRACE = timedelta(minutes=10)


def _capped_pairs(
    in_cluster: QuerySet[Pool], holding: QuerySet[Allocation]
) -> set[tuple[int, int, int, str]]:
    """(team id, GPU model id, pool id, MIG profile) of every cap the pools ``in_cluster`` should
    carry: the applied allocations ``holding``, and ceiling overrides in force (a cap an override
    holds up, also for a model the team has no allocation of; profile blank)."""
    pairs = {(a.team_id, a.gpu_model_id, a.pool_id, a.mig_profile) for a in holding}
    raised = TemporaryOverride.objects.in_force(timezone.now()).filter(
        pool__in=in_cluster, kind=OverrideKind.CEILING
    )
    return pairs | {(o.team_id, o.gpu_model_id, o.pool_id, "") for o in raised}


def _reconcile_reservations(
    adapter: object, report: ReconcileReport, *, pools: QuerySet[Pool], cluster: Cluster | None
) -> None:
    """End the reservations Slurm still holds for allocations of ``pools`` that no longer hold
    cards (released, ended, cancelled, reclaimed, failed) — left behind by a refused or lost
    unbind, they would keep their nodes until their planned end, or for ever when repeating.

    Asked: the allocations whose binding names a reservation not yet marked removed
    (``reservation_removed_at``), changed more than :data:`UNBIND_GRACE` ago; one
    ``get_reservation`` each, after which each is marked, so every allocation is checked until
    its reservation is gone and then never again. A reservation still holding nodes (its end
    after now) is a :class:`SchedulerDrift`, repaired with ``delete_reservation`` (which ends
    it instead while a job is tied to it); a refusal stays on the drift, unrepaired, and the
    allocation is asked again next time. Nothing for an adapter without reservations.
    """
    if not isinstance(adapter, ReservationAdapter):
        return
    now = timezone.now()
    for allocation in _released_with_reservation(pools, now):
        name = reservation_name(allocation)
        report.checked += 1
        try:
            record = adapter.get_reservation(name)
        except SchedulerError as exc:
            report.errors.append(f"reservation {name}: {exc}")
            continue
        if record is None or (record.ends_at is not None and record.ends_at <= now):
            reservation_removed_stamp(Allocation.objects.filter(pk=allocation.pk))
            continue
        _reservation_leftover_end(adapter, report, allocation, record, cluster)


def _released_with_reservation(pools: QuerySet[Pool], now: datetime) -> QuerySet[Allocation]:
    """Allocations of ``pools`` no longer holding cards whose binding names a reservation not
    yet marked removed, changed more than :data:`UNBIND_GRACE` before ``now``; by id."""
    return (
        Allocation.objects.filter(pool__in=pools, updated_at__lt=now - UNBIND_GRACE)
        .exclude(holding_q())
        .filter(scheduler_binding__has_key="reservation")
        .exclude(scheduler_binding__reservation=None)
        .exclude(scheduler_binding__has_key="reservation_removed_at")
        .select_related("team")
        .order_by("pk")
    )


def _reservation_leftover_end(
    adapter: ReservationAdapter,
    report: ReconcileReport,
    allocation: Allocation,
    record: ReservationRecord,
    cluster: Cluster | None,
) -> None:
    """Record the leftover reservation ``record`` of ``allocation`` as a drift and end it
    (``delete_reservation``); repaired and the binding marked, or unrepaired with Slurm's
    refusal as the drift's detail (and in ``report.errors``)."""
    name = reservation_name(allocation)
    until = record.ends_at.isoformat() if record.ends_at else "no end"
    drift = SchedulerDrift(
        scheduler=Scheduler.SLURM,
        team=allocation.team,
        subject=reservation_drift_subject(name, cluster)[:200],
        expected=f"none: allocation #{allocation.pk} is {allocation.status}"[:200],
        found=f"{record.state or 'held'} on {','.join(record.nodes)} until {until}"[:200],
    )
    try:
        adapter.delete_reservation(name)
        drift.repaired = True
        reservation_removed_stamp(Allocation.objects.filter(pk=allocation.pk))
    except SchedulerError as exc:
        drift.detail = str(exc)
        report.errors.append(f"reservation {name}: {exc}")
    drift.save()
    report.drifts.append(drift)


def _record_class_qos_health(
    adapter: object, report: ReconcileReport, *, cluster: Cluster | None, pools: QuerySet[Pool]
) -> None:
    """After the repairs, what is still wrong with the workload-class QOS
    (:func:`slurm_class_qos_problem`) on the cluster's health: ``Cluster.class_qos_problem``
    of ``cluster`` (``None``: the environment's Slurm cluster row, when there is one)."""
    try:
        problem = slurm_class_qos_problem(adapter=adapter, pools=pools)
    except SchedulerError as exc:
        report.errors.append(f"class QOS: {exc}")
        return
    if cluster is None:
        rows = Cluster.objects.filter(
            kind=Scheduler.SLURM, credential_kind=CredentialKind.ENVIRONMENT
        )
    else:
        rows = Cluster.objects.filter(pk=cluster.pk)
    rows.exclude(class_qos_problem=problem).update(class_qos_problem=problem)


def _reconcile_qos(
    adapter: object,
    report: ReconcileReport,
    *,
    team: Team,
    pools: QuerySet[Pool],
    cluster: Cluster | None,
) -> None:
    """Check the workload-class QOS of a team's account (issue #36): the class QOS and the
    account's QOS list and default (:func:`slurm_qos_wanted`); on a difference record a
    :class:`SchedulerDrift` and repair it with :func:`slurm_qos_sync`. Nothing for an adapter
    without QOS or a team without classed allocations; a missing account is left to the
    GrpTRES check, which recreates it."""
    if not isinstance(adapter, QosAdapter):
        return
    wanted = slurm_qos_wanted(team=team, account=team.slug, pools=pools)
    if wanted is None:
        return
    report.checked += 1
    try:
        found = slurm_qos_found(adapter, wanted)
    except NotFound:
        return
    except SchedulerError as exc:
        report.errors.append(f"{team.slug} QOS: {exc}")
        return
    if not found:
        return
    account_qos = wanted[0]
    drift = SchedulerDrift(
        scheduler=Scheduler.SLURM,
        team=team,
        subject=f"account {team.slug}{'' if cluster is None else f' in {cluster.slug}'} QOS"[:200],
        expected=f"QOS={','.join(account_qos.allowed)} default {account_qos.default}"[:200],
        found=found[:200],
    )
    try:
        slurm_qos_sync(adapter=adapter, team=team, account=team.slug, pools=pools)
        drift.repaired = True
    except SchedulerError as exc:
        drift.detail = str(exc)
        report.errors.append(f"{team.slug} QOS: {exc}")
    drift.save()
    report.drifts.append(drift)


def _wanted_gres(
    team: Team,
    pairs: set[tuple[int, int, int, str]],
    models: dict[int, GpuModel],
    pools: dict[int, Pool],
) -> dict[str, tuple[GpuModel, Pool, str]]:
    """Per GRES type of the team's holding allocations: the model, pool and MIG profile (""
    for whole cards) it caps."""
    wanted: dict[str, tuple[GpuModel, Pool, str]] = {}
    for team_id, model_id, pool_id, profile in pairs:
        if team_id == team.pk:
            model, pool = models[model_id], pools[pool_id]
            gres = slurm_cap_gres_type(pool=pool, gpu_model=model, mig_profile=profile)
            wanted[gres] = (model, pool, profile)
    return wanted


def _reconcile_gres(
    adapter: SchedulerAdapter,
    report: ReconcileReport,
    *,
    team: Team,
    gres: str,
    held: dict[str, int],
    target: tuple[GpuModel | None, Pool | None, str],
    holding: QuerySet[Allocation],
) -> None:
    """Check one GRES type of a team's account: stamp what was read back on its allocations,
    and on a difference record a :class:`SchedulerDrift` and repair it (the portal's cap, or 0
    for a type the portal no longer maps); a scheduler error is reported on the drift."""
    model, pool, profile = target
    report.checked += 1
    expected = (
        team_cards_applied(
            team=team,
            gpu_model=model,
            scheduler=Scheduler.SLURM,
            cluster=pool.cluster,
            mig_profile=profile,
        )
        if model
        else 0
    )
    found = held.get(gres, 0)
    if model is not None:
        stamp_read_back(
            holding.filter(team=team, gpu_model=model),
            at=timezone.now(),
            found=f"gres/gpu:{gres}={found}" if gres in held else "no limit",
        )
    if expected != found:
        found_text = str(found) if gres in held else "no limit"
        _repair_gres(adapter, report, team=team, gres=gres, target=target,
                     shown=(str(expected), found_text))  # fmt: skip


def _repair_gres(
    adapter: SchedulerAdapter,
    report: ReconcileReport,
    *,
    team: Team,
    gres: str,
    target: tuple[GpuModel | None, Pool | None, str],
    shown: tuple[str, str],
) -> None:
    """Record the drift of the cap of GRES type ``gres`` on ``team``'s account (``shown``:
    ``(expected, found)`` as the drift shows them) as a :class:`SchedulerDrift` added to
    ``report.drifts``, and set the cap back to the portal's (``target``: the type's GPU model,
    pool and MIG profile), or to 0 for a type the portal no longer maps (``None`` model); a
    scheduler error is kept as the drift's ``detail`` and added to ``report.errors``, else the
    drift is marked repaired."""
    model, pool, profile = target
    expected, found = shown
    drift = SchedulerDrift(
        scheduler=Scheduler.SLURM,
        team=team,
        subject=cap_drift_subject(team.slug, gres, pool.cluster if pool else None),
        expected=expected,
        found=found,
    )
    try:
        if model is not None:
            slurm_limit_sync(
                adapter=adapter, team=team, pool=pool, gpu_model=model, mig_profile=profile
            )
        else:  # a type the portal no longer maps: no cards, not no limit
            adapter.set_gpu_limit(GpuLimit(team.slug, None, gres, 0))
        drift.repaired = True
    except SchedulerError as exc:
        drift.detail = str(exc)
        report.errors.append(f"{team.slug} {gres}: {exc}")
    drift.save()
    report.drifts.append(drift)


def reconcile_kubernetes(cluster: Cluster | None = None) -> ReconcileReport:
    """Compare and repair every team namespace's GPU quota in ``cluster`` (``None``: the
    environment's, :func:`~pools.capacity.services.scheduler_binding.cluster_pools`) through
    that cluster's adapter; refresh Kubernetes nodes from the environment's cluster.

    Teams considered: those with an allocation or a temporary override in a Kubernetes pool
    of the cluster. A missing
    namespace or a quota changed by hand is recorded as drift and re-applied (``ensure_team``
    is idempotent). With card-class taints on, a GPU node whose card-class taint is missing or
    different is a drift too, repaired (:func:`_reconcile_taints`). Scheduler errors are
    reported, never raised.
    """
    report = ReconcileReport()
    cluster, adapter = _reconcile_adapter(Scheduler.KUBERNETES, cluster, report)
    if adapter is None:
        return report
    pools = cluster_pools(scheduler=Scheduler.KUBERNETES, cluster=cluster)
    _refresh_nodes(adapter, report, InventorySource.KUBERNETES, within=pools, cluster=cluster)
    _reconcile_taints(adapter, report, cluster=cluster)
    teams = Team.objects.filter(
        Q(pk__in=Allocation.objects.filter(pool__in=pools).values("team"))
        | Q(pk__in=TemporaryOverride.objects.filter(pool__in=pools).values("team"))
    )
    for team in teams:
        _reconcile_namespace(adapter, report, team=team, cluster=cluster)
    for pool in pools.filter(quota_backend=QuotaBackend.KUEUE):
        try:
            kueue_lender_sync(adapter=adapter, pool=pool)  # free cards move with every approval
        except SchedulerError as exc:
            report.errors.append(f"{pool.slug} Kueue lender: {exc}")
    return report


def _reconcile_taints(adapter: Any, report: ReconcileReport, *, cluster: Cluster | None) -> None:
    """Taint the cluster's GPU nodes with their card class when the adapter does so
    (``CARD_CLASS_TAINTS``); each node it had to write is a drift, repaired: expected
    ``<class>:NoSchedule``, found what the node held under the portal's key (``none``).
    Another manager's taints are never touched (the portal owns only its entry)."""
    if not isinstance(adapter, KubernetesAdapter) or not adapter.card_class_taints:
        return
    if adapter.dry_run:  # writes nothing: there is no taint to repair
        return
    try:
        done = ensure_card_class_taints(adapter)
    except SchedulerError as exc:
        report.errors.append(f"card-class taints: {exc}")
        return
    where = f" in cluster {cluster.slug}" if cluster is not None else ""
    for node, found in done.repaired.items():
        drift = SchedulerDrift.objects.create(
            scheduler=Scheduler.KUBERNETES,
            subject=f"node {node}{where} taint {CARD_CLASS_TAINT_KEY}",
            expected=f"{done.nodes[node]}:{CARD_CLASS_TAINT_EFFECT}",
            found=found,
            repaired=True,
        )
        report.drifts.append(drift)


def _reconcile_adapter(
    scheduler: str, cluster: Cluster | None, report: ReconcileReport
) -> tuple[Cluster | None, SchedulerAdapter | None]:
    """``(cluster, adapter)`` to reconcile: ``(None, the environment's adapter)`` for ``None``
    or the environment's cluster; else the cluster's own adapter, or ``None`` with the reason
    in ``report.errors`` (credentials that cannot be read, a configuration refused)."""
    report.ran = True
    if cluster is None or cluster.from_environment:
        adapter = scheduler_adapter(scheduler)
        report.ran = adapter is not None
        return None, adapter
    try:
        return cluster, cluster_adapter(cluster)
    except (OSError, ValueError) as exc:
        report.errors.append(f"{cluster.slug}: {exc}")
        return cluster, None


def _refresh_nodes(
    adapter: SchedulerAdapter,
    report: ReconcileReport,
    source: InventorySource,
    *,
    within: QuerySet[Pool],
    cluster: Cluster | None,
) -> None:
    """Import ``cluster``'s nodes as that cluster's (a host name is unique per cluster: another
    cluster's node of the same name is another node, never touched), placed among its pools
    ``within`` only."""
    try:
        imported = inventory_import(
            result=adapter.list_nodes(), source=source, within=within, cluster=cluster
        )
    except SchedulerError as exc:
        report.errors.append(f"nodes: {exc}")
        return
    report.nodes_refreshed = len(imported.created) + len(imported.updated) + len(imported.unchanged)
    report.inventory_imported = True
    report.errors.extend(
        f"nodes: {issue.node}: {issue.message}"
        for issue in imported.issues
        if issue.node in imported.rejected
    )


def _reconcile_namespace(
    adapter: SchedulerAdapter, report: ReconcileReport, *, team: Team, cluster: Cluster | None
) -> None:
    """Check one team's namespace quota in ``cluster``: stamp what was read back on the team's
    allocations there, and on a difference record a :class:`SchedulerDrift` and re-apply."""
    # the nvidia.com/gpu total: whole cards, and slices under the single MIG strategy
    expected = sum(kubernetes_quota_wanted(team=team, cluster=cluster)[0].values())
    report.checked += 1
    try:
        found = adapter.get_gpu_quota(team.slug).cards
    except NotFound:
        found = None
    except SchedulerError as exc:
        report.errors.append(f"{team.slug}: {exc}")
        return
    stamp_read_back(
        Allocation.objects.filter(
            team=team,
            pool__in=cluster_pools(scheduler=Scheduler.KUBERNETES, cluster=cluster),
            status__in=APPLIED_STATUSES,
        ),
        at=timezone.now(),
        found="no namespace or quota" if found is None else f"requests.nvidia.com/gpu={found}",
    )
    if found == expected or (found is None and expected == 0):
        return
    drift = SchedulerDrift(
        scheduler=Scheduler.KUBERNETES,
        team=team,
        subject=quota_drift_subject(f"team-{team.slug}", cluster),
        expected=str(expected),
        found="no namespace or quota" if found is None else str(found),
    )
    try:
        kubernetes_quota_sync(adapter=adapter, team=team, cluster=cluster)
        drift.repaired = True
    except SchedulerError as exc:
        drift.detail = str(exc)
        report.errors.append(f"{drift.subject}: {exc}")
    drift.save()
    report.drifts.append(drift)


RECONCILERS = {Scheduler.SLURM: reconcile_slurm, Scheduler.KUBERNETES: reconcile_kubernetes}


def reconcile_all() -> ReconcileReport:
    """Reconcile the environment's Slurm and Kubernetes here, and queue one reconcile per
    cluster kept as data (:data:`pools.jobs.RECONCILE_CLUSTER`), so 8 clusters are reconciled
    by parallel workers and a slow one holds up none of the others (issue 35). One report of
    what ran here, with ``clusters_queued``."""
    total = ReconcileReport()
    for kind, part in (
        (Scheduler.SLURM, reconcile_slurm()),
        (Scheduler.KUBERNETES, reconcile_kubernetes()),
    ):
        if part.ran:
            reconcile_health_record(cluster_of(kind=kind, cluster=None), part)
        total.checked += part.checked
        total.drifts += part.drifts
        total.errors += part.errors
        total.nodes_refreshed += part.nodes_refreshed
    ids = Cluster.objects.exclude(credential_kind=CredentialKind.ENVIRONMENT).order_by("pk")
    for cluster_id in ids.values_list("pk", flat=True):
        enqueue_on_commit(RECONCILE_CLUSTER, cluster_id)
        total.clusters_queued += 1
    return total


def reconcile_cluster(cluster_id: int) -> ReconcileReport | None:
    """Reconcile one cluster kept as data through its own adapter; ``None`` when it has been
    deleted since it was queued."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return None
    report = RECONCILERS[cluster.kind](cluster)
    if report.ran:
        reconcile_health_record(cluster, report)
    return report


def reconcile_health_record(cluster: Cluster | None, report: ReconcileReport) -> None:
    """Put one reconcile's outcome into ``cluster``'s health: its drifts counted there, its
    errors kept, and the last successful reconcile and node import stamped
    (:func:`pools.clusters.services.cluster_operation_record`)."""
    if cluster is None:
        return
    SchedulerDrift.objects.filter(pk__in=[d.pk for d in report.drifts if d.pk]).update(
        cluster=cluster
    )
    now = timezone.now()
    node_errors = [e for e in report.errors if e.startswith("nodes: ")]
    # an import that ran succeeded even if it rejected nodes (kept as errors beside it)
    for ran, errors in ((report.inventory_imported, []), (bool(node_errors), node_errors)):
        if ran:
            cluster_operation_record(
                cluster=cluster, operation=ClusterOperation.INVENTORY, errors=errors, at=now
            )
    others = [e for e in report.errors if not e.startswith("nodes: ")]
    cluster_operation_record(
        cluster=cluster, operation=ClusterOperation.RECONCILE, errors=others, at=now
    )
