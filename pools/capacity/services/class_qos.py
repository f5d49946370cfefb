"""Workload classes in the schedulers (issue #36).

Slurm: a team's account and the QOS of the workload classes it holds: every
class's QOS written (:func:`pools.classes.slurm_qos.class_qos_specs`), then the account's QOS
list set to the classes of its applied allocations in the cluster, its default the most
preemptible of them (a job that names no ``--qos`` is the least protected work the team holds).
Called from :func:`pools.capacity.services.scheduler_binding.slurm_limit_sync`.

Kubernetes: every class's PriorityClass (and, with Kueue, WorkloadPriorityClass) once the team
holds a classed allocation in the cluster; called from ``kubernetes_quota_sync``."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet
from django.utils import timezone

from pools.capacity.lifecycle import APPLIED_STATUSES
from pools.classes.models import WorkloadClass
from pools.classes.selectors import class_list
from pools.classes.slurm_qos import class_qos_name, class_qos_specs
from pools.inventory.models import Pool
from pools.overrides.selectors import priority_raise
from pools.tenancy.models import Team
from scheduler_adapters.base import QosAdapter
from scheduler_adapters.errors import SchedulerRejected
from scheduler_adapters.kubernetes import KubernetesAdapter
from scheduler_adapters.kubernetes_priority import ClassPriority, ensure_class_priorities
from scheduler_adapters.records import AccountQos, QosSpec


def team_classes_held(*, team: Team, pools: QuerySet[Pool], now: datetime) -> list[WorkloadClass]:
    """The workload classes of the team's applied allocations in ``pools`` open at ``now``,
    the default first: the most preemptible, or while a priority override is in force
    (:func:`pools.overrides.selectors.priority_raise`) the override's class, added when the
    team holds no allocation of it. Two queries."""
    held = list(
        WorkloadClass.objects.filter(
            allocations__team=team,
            allocations__pool__in=pools,
            allocations__status__in=APPLIED_STATUSES,
            allocations__ends_at__gt=now,
        )
        .distinct()
        .order_by("preemption_order")
    )
    raised = priority_raise(team=team, pools=pools, now=now)
    if raised is None or not held or raised.priority <= held[0].priority:
        return held
    return [raised, *(c for c in held if c.pk != raised.pk)]


def slurm_qos_prepare(
    *, adapter: object, team: Team, pools: QuerySet[Pool], now: datetime | None = None
) -> list[WorkloadClass] | None:
    """The first step, before anything of the team is written to Slurm: the classes it holds in
    ``pools`` (the Slurm pools of one cluster), most preemptible first, with every class's QOS
    written (:func:`pools.classes.slurm_qos.class_qos_specs`; a QOS alone changes no job until
    an association names it). ``None`` (nothing written) when the adapter has no QOS
    (:class:`~scheduler_adapters.base.QosAdapter`) or the team holds no classed allocation
    (unclassed work keeps Slurm's ``normal``).

    Raises :class:`SchedulerRejected` before any write when the cluster cannot take the
    account's QOS list (22.05 over REST without the sacctmgr fallback), so the GPU cap is not
    written for work whose class would then be missing."""
    if not isinstance(adapter, QosAdapter):
        return None
    held = team_classes_held(team=team, pools=pools, now=now or timezone.now())
    if not held:
        return None
    refusal = adapter.account_qos_refusal()
    if refusal is not None:
        raise SchedulerRejected(refusal, operation="set_account_qos")
    for spec in class_qos_specs(class_list()):
        adapter.ensure_qos(spec)
    return held


def slurm_account_qos_set(*, adapter: QosAdapter, account: str, held: list[WorkloadClass]) -> dict:
    """Set the account's QOS list to the ``held`` classes (from :func:`slurm_qos_prepare`), its
    default the most preemptible of them (a job that names no ``--qos`` is the least protected
    work the team holds). Returns ``{"qos": [...], "default_qos": ...}`` for the binding."""
    allowed = tuple(sorted(class_qos_name(c.slug) for c in held))
    default = class_qos_name(held[0].slug)
    adapter.set_account_qos(AccountQos(account, allowed, default))
    return {"qos": list(allowed), "default_qos": default}


def slurm_qos_sync(
    *,
    adapter: object,
    team: Team,
    account: str,
    pools: QuerySet[Pool],
    now: datetime | None = None,
) -> dict | None:
    """Write the class QOS and the account's QOS list (:func:`slurm_qos_prepare`, then
    :func:`slurm_account_qos_set`); ``None`` when nothing is to be written. Raises the
    adapter's SchedulerError subclasses (NotFound: the account is gone)."""
    held = slurm_qos_prepare(adapter=adapter, team=team, pools=pools, now=now)
    if held is None:
        return None
    return slurm_account_qos_set(adapter=adapter, account=account, held=held)


def class_priorities(classes: list[WorkloadClass]) -> list[ClassPriority]:
    """One :class:`ClassPriority` per class: its priority as the value; every class but the
    most preemptible (lowest preemption order) may preempt lower ones."""
    lowest = min((c.preemption_order for c in classes), default=None)
    return [
        ClassPriority(
            slug=c.slug,
            value=c.priority,
            preempts=c.preemption_order != lowest,
            description=f"gpu-pool-portal workload class {c.name}",
        )
        for c in sorted(classes, key=lambda c: c.preemption_order)
    ]


def kubernetes_priority_sync(
    *, adapter: object, team: Team, pools: QuerySet[Pool], now: datetime | None = None
) -> list[str] | None:
    """Write every class's PriorityClass (WorkloadPriorityClass with Kueue) when the team holds
    a classed allocation in ``pools`` (one cluster's Kubernetes pools); the names of the classes
    it holds (what its pods may name in ``priorityClassName``), or ``None`` when nothing was
    written (no classed allocation, or an adapter that is not Kubernetes)."""
    if not isinstance(adapter, KubernetesAdapter):
        return None
    held = team_classes_held(team=team, pools=pools, now=now or timezone.now())
    if not held:
        return None
    ensure_class_priorities(adapter, class_priorities(class_list()), kueue=adapter.kueue)
    return [class_qos_name(c.slug) for c in held]


def slurm_qos_wanted(
    *, team: Team, account: str, pools: QuerySet[Pool], now: datetime | None = None
) -> tuple[AccountQos, list[QosSpec]] | None:
    """What :func:`slurm_qos_sync` would write for the team (its account's QOS list and every
    class's QOS), or ``None`` when it writes nothing (no classed allocation in ``pools``)."""
    held = team_classes_held(team=team, pools=pools, now=now or timezone.now())
    if not held:
        return None
    allowed = tuple(sorted(class_qos_name(c.slug) for c in held))
    return AccountQos(account, allowed, class_qos_name(held[0].slug)), class_qos_specs(class_list())


def slurm_qos_found(adapter: QosAdapter, wanted: tuple[AccountQos, list[QosSpec]]) -> str:
    """What Slurm holds of ``wanted``, described where it differs ("" when it all matches):
    the account's QOS list and default, and each class QOS that is missing or changed."""
    account_qos, specs = wanted
    differences = []
    found = adapter.get_account_qos(account_qos.account)
    if found != account_qos:
        default = found.default or "none"
        differences.append(f"QOS={','.join(found.allowed) or 'none'} default {default}")
    for spec in specs:
        held = adapter.get_qos(spec.name)
        if held is None:
            differences.append(f"{spec.name} missing")
        elif (held.priority, held.preempts, held.preempt_mode) != (
            spec.priority,
            spec.preempts,
            spec.preempt_mode,
        ):
            differences.append(
                f"{spec.name} priority {held.priority} preempts "
                f"{','.join(held.preempts) or 'none'} {held.preempt_mode}"
            )
    return "; ".join(differences)


def slurm_class_qos_problem(*, adapter: object, pools: QuerySet[Pool]) -> str:
    """What is wrong with the workload-class QOS on a Slurm cluster (its ``pools``), for its
    health: "" when nothing is. Reads only. Reported: a cluster that cannot take an account's
    QOS list (:meth:`~scheduler_adapters.base.QosAdapter.account_qos_refusal`: classed
    allocations there would be refused), and, once classed work is applied in ``pools``, each
    class QOS missing or not as the portal writes it ("portal-batch missing"). Raises the
    adapter's SchedulerError subclasses."""
    if not isinstance(adapter, QosAdapter):
        return ""
    classes = class_list()
    if not classes:
        return ""
    problems = []
    refusal = adapter.account_qos_refusal()
    if refusal is not None:
        problems.append(f"account QOS cannot be written: {refusal}")
    classed = WorkloadClass.objects.filter(
        allocations__pool__in=pools,
        allocations__status__in=APPLIED_STATUSES,
        allocations__ends_at__gt=timezone.now(),
    )
    if classed.exists():
        for spec in class_qos_specs(classes):
            held = adapter.get_qos(spec.name)
            if held is None:
                problems.append(f"{spec.name} missing")
            elif (held.priority, held.preempts, held.preempt_mode) != (
                spec.priority,
                spec.preempts,
                spec.preempt_mode,
            ):
                problems.append(
                    f"{spec.name} holds priority {held.priority}, preempts "
                    f"{','.join(held.preempts) or 'none'} {held.preempt_mode}"
                )
    return "; ".join(problems)[:500]
