"""What the portal wrote, or will write, in the scheduler for one allocation (the allocation
page's *In the scheduler* panel and the API's ``scheduler`` object).

Names come from the places that compute them when writing: Slurm's account
(:func:`~pools.capacity.services.scheduler_binding.slurm_account_name`), GRES type
(:func:`~pools.capacity.services.scheduler_binding.slurm_cap_gres_type`) and reservation
(:func:`~pools.capacity.services.scheduler_binding.reservation_name`); Kubernetes' namespace
(:func:`scheduler_adapters.kubernetes_manifests.namespace_name`) and the objects of
:func:`scheduler_adapters.kubernetes_manifests.quota_manifests` /
:func:`scheduler_adapters.kubernetes_elastic.elastic_manifests` (ResourceQuota, Kueue
ClusterQueue / LocalQueue, Volcano Queue, Koordinator ElasticQuota), read off the manifests
themselves. Once written, the stored binding says what was written; before, the panel is a
preview computed from the same functions with the allocation's window open.

The read-back is what reconcile last found (``read_back_at`` / ``read_back`` it stamps on the
binding) and the newest :class:`~pools.capacity.models.SchedulerDrift` of the same object; beside
it each of the allocation's objects (the team's cap or namespace quota, and in Slurm the
allocation's reservation) whose newest drift is not repaired, so a refused reservation removal
shows here as it does on the admin dashboard.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime

from pools.capacity.models import Allocation, SchedulerDrift
from pools.capacity.services.scheduler_binding import (
    cap_drift_subject,
    k8s_product_label,
    kubernetes_quota_wanted,
    quota_drift_subject,
    reservation_drift_subject,
    reservation_name,
    slurm_account_name,
    slurm_cap_gres_type,
    team_cards_applied,
)
from pools.classes.slurm_qos import class_qos_name
from pools.clusters.adapters import pool_adapter
from pools.common.choices import AllocationStatus, QuotaBackend, Scheduler
from pools.tenancy.selectors import team_usernames
from scheduler_adapters.kubernetes_elastic import ElasticBounds, elastic_manifests
from scheduler_adapters.kubernetes_manifests import namespace_name, quota_manifests

WRITTEN = "written"
WILL_WRITE = "will write"
PORTAL_ONLY = "portal only"


@dataclass(frozen=True)
class SchedulerObject:
    """One object in the scheduler: ``kind`` (``Slurm account``, ``ResourceQuota``…), its
    ``name`` and ``detail`` (limits, members; ``""`` when none)."""

    kind: str
    name: str
    detail: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "name": self.name, "detail": self.detail}


@dataclass(frozen=True)
class SchedulerPanel:
    """``state``: ``written`` (the binding is applied), ``will write`` (a preview, before
    provisioning or for an unconnected scheduler's pools it would be written with one), or
    ``portal only`` (ended allocations never applied). ``drift``: the newest drift record of
    the team's cap (Slurm) or namespace quota (Kubernetes), ``None`` when none was recorded.
    ``unrepaired``: the allocation's objects (that cap or quota, and its Slurm reservation)
    whose newest drift is not repaired — that drift each, newest first; one a later reconcile
    repaired (a newer, repaired drift of the object) is no longer listed."""

    scheduler: str
    state: str
    objects: list[SchedulerObject]
    notes: list[str] = field(default_factory=list)
    read_back_at: datetime | None = None
    read_back: str = ""
    drift: SchedulerDrift | None = None
    unrepaired: list[SchedulerDrift] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The API's ``scheduler`` object (datetimes ISO 8601; ``drift`` ``null`` or its
        ``detected_at``, ``subject``, ``expected``, ``found``, ``repaired``;
        ``unrepaired_drifts`` a list of ``detected_at``, ``subject``, ``expected``, ``found``
        and ``detail``, the scheduler's message)."""
        drift = self.drift
        return {
            "scheduler": self.scheduler,
            "state": self.state,
            "objects": [o.as_dict() for o in self.objects],
            "notes": list(self.notes),
            "read_back_at": self.read_back_at.isoformat() if self.read_back_at else None,
            "read_back": self.read_back or None,
            "drift": None
            if drift is None
            else {
                "detected_at": drift.detected_at.isoformat(),
                "subject": drift.subject,
                "expected": drift.expected,
                "found": drift.found,
                "repaired": drift.repaired,
            },
            "unrepaired_drifts": [
                {
                    "detected_at": d.detected_at.isoformat(),
                    "subject": d.subject,
                    "expected": d.expected,
                    "found": d.found,
                    "detail": d.detail,
                }
                for d in self.unrepaired
            ],
        }


def scheduler_panel(allocation: Allocation) -> SchedulerPanel:
    """The panel of ``allocation`` (pool, team, gpu_model loaded or loaded here). A few
    queries: the team's members, the team's applied cards, the newest drift of each object."""
    binding = allocation.scheduler_binding or {}
    applied = bool(binding.get("applied"))
    if applied:
        state = WRITTEN
    elif allocation.status in (AllocationStatus.APPROVED, AllocationStatus.PROVISIONING):
        state = WILL_WRITE
    else:
        state = PORTAL_ONLY
    notes = [
        binding[k] for k in ("note", "placement_note", "reservation_qos_note") if binding.get(k)
    ]
    scheduler = allocation.pool.scheduler
    if scheduler == Scheduler.SLURM:
        objects, subject = _slurm_objects(allocation, binding, applied)
    elif scheduler == Scheduler.KUBERNETES:
        objects, subject = _kubernetes_objects(allocation, binding, applied)
    else:
        objects, subject = [], None
    drift, unrepaired = None, []
    if subject is not None:
        subjects = [subject]
        if scheduler == Scheduler.SLURM:
            subjects.append(
                reservation_drift_subject(reservation_name(allocation), allocation.pool.cluster)
            )
        drifts = SchedulerDrift.objects.filter(
            team_id=allocation.team_id, scheduler=scheduler
        ).order_by("-detected_at", "-id")
        newest = [drifts.filter(subject=s).first() for s in subjects]  # one query each
        drift = newest[0]
        unrepaired = sorted(
            (d for d in newest if d is not None and not d.repaired),
            key=lambda d: (d.detected_at, d.pk),
            reverse=True,
        )
    read_back_at = parse_datetime(binding["read_back_at"]) if binding.get("read_back_at") else None
    return SchedulerPanel(
        scheduler=scheduler,
        state=state,
        objects=objects,
        notes=notes,
        read_back_at=read_back_at,
        read_back=binding.get("read_back", ""),
        drift=drift,
        unrepaired=unrepaired,
    )


def _preview_cards(allocation: Allocation) -> int:
    """Cards of the team's cap at the allocation's window start: the team's applied cards then
    plus this allocation's own cards while it is not applied yet (elastic ones: its floor;
    MIG slice allocations: slices of its profile)."""
    cards = team_cards_applied(
        team=allocation.team,
        gpu_model=allocation.gpu_model,
        scheduler=allocation.pool.scheduler,
        cluster=allocation.pool.cluster,
        now=allocation.starts_at,
        mig_profile=allocation.mig_profile,
    )
    if allocation.status == AllocationStatus.APPROVED:
        cards += allocation.card_count
    return cards


def _slurm_objects(
    allocation: Allocation, binding: dict, applied: bool
) -> tuple[list[SchedulerObject], str]:
    team = allocation.team
    gres = slurm_cap_gres_type(
        pool=allocation.pool, gpu_model=allocation.gpu_model, mig_profile=allocation.mig_profile
    )
    account = binding.get("account") if applied else None
    account = account or slurm_account_name(team)
    partition = (binding.get("partition") if applied else None) or allocation.pool.slurm_partition
    missing = set(binding.get("missing_users") or ())
    users = [u for u in team_usernames(team_id=team.pk) if u not in missing]
    grp_tres = binding.get("grp_tres") if applied else None
    grp_tres = grp_tres or f"gres/gpu:{gres}={_preview_cards(allocation)}"
    objects = [
        SchedulerObject("Slurm account", account, team.name),
        SchedulerObject(
            "Association",
            f"{account} × {len(users)} user(s)" + (f" on {partition}" if partition else ""),
            ", ".join(users) or "no member has a unix account yet",
        ),
        SchedulerObject("GrpTRES", grp_tres, "the team's cap for the GPU type on the account"),
        _qos_object(allocation, binding, applied),
    ]
    if missing:
        objects[1] = SchedulerObject(
            objects[1].kind,
            objects[1].name,
            objects[1].detail + f"; not in Slurm: {', '.join(sorted(missing))}",
        )
    if applied:
        reservation = binding.get("reservation")
    else:
        reservation = reservation_name(allocation) if allocation.placement else None
    nodes = sorted({spot["node"] for spot in allocation.placement or ()})
    detail = ", ".join(nodes) if reservation else "no whole-node placement to reserve"
    if reservation and binding.get("reservation_qos"):
        detail += f"; admits QOS {', '.join(binding['reservation_qos'])} only"
    objects.append(SchedulerObject("Reservation", reservation or "none", detail))
    return objects, cap_drift_subject(account, gres, allocation.pool.cluster)


def _qos_object(allocation: Allocation, binding: dict, applied: bool) -> SchedulerObject:
    """The account's QOS list (issue 36): as written, else the allocation's class QOS it would
    join; unclassed work names none (the account keeps Slurm's ``normal``)."""
    if applied and binding.get("qos"):
        return SchedulerObject(
            "QOS",
            ", ".join(binding["qos"]),
            f"the account's QOS list, default {binding.get('default_qos') or 'none'}",
        )
    if allocation.workload_class_id is not None:
        name = class_qos_name(allocation.workload_class.slug)
        return SchedulerObject("QOS", name, f"the {allocation.workload_class.name} class's QOS")
    return SchedulerObject("QOS", "none", "unclassed work: the account's cap applies")


def _kubernetes_objects(
    allocation: Allocation, binding: dict, applied: bool
) -> tuple[list[SchedulerObject], str]:
    team = allocation.team
    try:
        adapter = pool_adapter(allocation.pool)
    except (OSError, ValueError):  # the cluster's credentials unreadable: its defaults are shown
        adapter = None
    prefix = getattr(adapter, "namespace_prefix", "team-")
    namespace = (binding.get("namespace") if applied else None) or namespace_name(team.slug, prefix)
    product = k8s_product_label(allocation.gpu_model)
    if applied:
        quota = dict(binding.get("gpu_quota") or {})
        mig_quota = dict(binding.get("mig_quota") or {})
    else:
        quota, mig_quota = kubernetes_quota_wanted(
            team=team, cluster=allocation.pool.cluster, now=allocation.starts_at
        )
        if allocation.status == AllocationStatus.APPROVED:
            if allocation.mig_profile:  # shown under the mixed strategy's resource
                profile = allocation.mig_profile
                mig_quota[profile] = mig_quota.get(profile, 0) + allocation.card_count
            else:
                quota[product] = quota.get(product, 0) + allocation.card_count
    backend = allocation.pool.quota_backend
    policy = getattr(allocation, "elastic_policy", None)
    if policy is not None and backend in (QuotaBackend.VOLCANO, QuotaBackend.KOORDINATOR):
        # cards placed in a burst pool are the burst pool's cluster's (issue 35)
        floor, ceiling = allocation.card_count, policy.ceiling_cards - policy.burst_cards
        held = policy.cards_held - policy.burst_cards
        bounds = ElasticBounds(team.slug, product, floor, ceiling, max(floor, min(held, ceiling)))
        manifests = elastic_manifests(backend, bounds, namespace=namespace)
    else:
        kueue = getattr(adapter, "kueue", None)
        if kueue is None:
            kueue = backend == QuotaBackend.KUEUE
        manifests = quota_manifests(
            team.slug, namespace, quota, kueue=kueue, mig_quota=mig_quota or None
        )
    objects = [SchedulerObject("Namespace", namespace, f"group team-{team.slug} may edit")]
    objects += [_describe(m) for m in manifests if m.get("kind") != "ResourceFlavor"]
    return objects, quota_drift_subject(namespace, allocation.pool.cluster)


def _describe(manifest: dict) -> SchedulerObject:
    """A manifest as a panel row: its kind, name (``namespace/name`` when namespaced) and the
    limits it carries."""
    meta = manifest.get("metadata") or {}
    name = meta.get("name", "")
    spec = manifest.get("spec") or {}
    kind = manifest.get("kind", "")
    if kind == "ResourceQuota":
        detail = ", ".join(f"{k}: {v}" for k, v in sorted((spec.get("hard") or {}).items()))
    elif kind == "ClusterQueue":
        parts = []
        for group in spec.get("resourceGroups") or ():
            for flavor in group.get("flavors") or ():
                for res in flavor.get("resources") or ():
                    parts.append(f"{flavor['name']} {res['name']}: {res.get('nominalQuota')}")
        cohort = f" (cohort {spec['cohortName']})" if spec.get("cohortName") else ""
        detail = "; ".join(parts) + cohort
    elif kind == "LocalQueue":
        detail = f"→ ClusterQueue {spec.get('clusterQueue', '')}"
    else:
        detail = ", ".join(
            f"{k}: {v}" for k, v in sorted(spec.items()) if isinstance(v, (str, int, dict))
        )
    if meta.get("namespace"):
        name = f"{meta['namespace']}/{name}"
    return SchedulerObject(kind, name, detail)
