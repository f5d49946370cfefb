"""Upsert parsed inventory snapshots into nodes and GPUs, one transaction per node.

The parsers (:mod:`pools.inventory.nvidia_smi`, :mod:`scheduler_adapters.slurm.nodes`,
:mod:`scheduler_adapters.kubernetes_nodes`) turn text into :class:`NodeSnapshot` objects; this
module writes them. A node either imports whole or not at all, and the report says which nodes
were created, updated, unchanged or rejected, and why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DatabaseError, transaction
from django.utils import timezone

from pools.audit.models import AuditEvent
from pools.audit.services import audit_event_build
from pools.choices import GpuHealth, NodeState, Scheduler
from pools.errors import InvalidInput, UploadTooLarge
from pools.inventory.bulk import bulk_update_rows
from pools.inventory.driver_versions import parse_driver_version
from pools.inventory.gpu_names import is_truncated_name
from pools.inventory.models import Gpu, InventoryImport, MigDevice, Node, Pool
from pools.inventory.nvidia_smi import parse_nvidia_smi
from pools.inventory.services.driver_groups import driver_group_for_version
from pools.inventory.services.gpu_models import GpuModelResolver
from pools.inventory.topology import parse_topology
from pools.validators import hostname_validator
from scheduler_adapters.kubernetes_nodes import mig_per_card, parse_kubernetes_nodes
from scheduler_adapters.slurm.nodes import parse_slurm_nodes
from scheduler_adapters.types import (
    GpuSnapshot,
    InventorySource,
    MigDeviceSnapshot,
    NodeSnapshot,
    ParseIssue,
    ParseResult,
)

_SCHEDULER_OF_SOURCE = {
    InventorySource.SLURM: Scheduler.SLURM,
    InventorySource.KUBERNETES: Scheduler.KUBERNETES,
}
# Publishers of captures mask identifiers by zeroing them; an all-zero UUID is never issued by
# NVML, so it names no card and must not take part in uniqueness checks.
_MASKED_UUID = re.compile(r"^(GPU|MIG)-[0-]+$", re.IGNORECASE)


@dataclass
class ImportReport:
    """Outcome of one import: hostnames per outcome, plus every issue and warning.

    ``issues`` are reasons something was not imported (a line or a whole node); ``warnings``
    are things imported with a caveat (a masked UUID, an unrecognised model).
    """

    source: str
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    issues: list[ParseIssue] = field(default_factory=list)
    warnings: list[ParseIssue] = field(default_factory=list)
    gpus_seen: int = 0
    record_id: int | None = None

    @property
    def ok(self) -> bool:
        """True when everything in the input was imported."""
        return not self.issues and not self.rejected

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "ok": self.ok,
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "rejected": self.rejected,
            "gpus_seen": self.gpus_seen,
            "issues": [_issue_dict(i) for i in self.issues],
            "warnings": [_issue_dict(i) for i in self.warnings],
            "import_id": self.record_id,
        }


def _issue_dict(issue: ParseIssue) -> dict[str, Any]:
    return {"message": issue.message, "line": issue.line, "field": issue.field, "node": issue.node}


CHUNK_SIZE = 250
_PARKING_INDEX = 32767  # largest PositiveSmallIntegerField value on every backend
_NODE_FIELDS = (
    "pool_id",
    "scheduler",
    "state",
    "state_reason",
    "driver_version",
    "driver_group_id",
    "cuda_version",
    "partitions",
    "labels",
    "gpu_replicas",
    "gpus_allocated",
    "nvlink_domains",
    "nvlink_read_at",
)
_GPU_FIELDS = [
    "index",
    "uuid",
    "serial",
    "pci_bus_id",
    "pci_device_id",
    "memory_total_mib",
    "mig_mode",
    "raw_model_name",
    "model_candidates",
    "gpu_model",
    "health",
    "last_seen_at",
]


@dataclass
class _Run:
    """What one import run loads once: the alias lookup, pools, driver groups seen, the clock."""

    source: InventorySource
    resolver: GpuModelResolver
    now: Any
    actor: Any
    pool: Pool | None
    pools: list[Pool]
    driver_groups: dict[str, Any] = field(default_factory=dict)

    def driver_group(self, version: str):
        if version not in self.driver_groups:
            self.driver_groups[version] = driver_group_for_version(version)
        return self.driver_groups[version]

    def pool_for(self, snapshot: NodeSnapshot) -> Pool | None:
        if self.pool is not None:
            return self.pool
        for candidate in self.pools:
            if candidate.scheduler == Scheduler.SLURM and candidate.slurm_partition:
                if candidate.slurm_partition in snapshot.partitions:
                    return candidate
            if candidate.scheduler == Scheduler.KUBERNETES and candidate.k8s_node_selector:
                selector = candidate.k8s_node_selector
                if all(snapshot.labels.get(k) == v for k, v in selector.items()):
                    return candidate
        return None


@dataclass
class _NodePlan:
    """The writes one node needs, worked out before anything is written."""

    node: Node
    created: bool
    node_changed: bool
    before: dict | None
    after: dict
    new_gpus: list[Gpu] = field(default_factory=list)
    changed_gpus: list[Gpu] = field(default_factory=list)
    gone_gpu_ids: list[int] = field(default_factory=list)
    seen_gpu_ids: list[int] = field(default_factory=list)
    reindexed: list[Gpu] = field(default_factory=list)
    mig: list[tuple[Gpu, list[tuple]]] = field(default_factory=list)
    warnings: list[ParseIssue] = field(default_factory=list)

    @property
    def outcome(self) -> str:
        if self.created:
            return "created"
        changed = self.node_changed or self.new_gpus or self.changed_gpus or self.gone_gpu_ids
        return "updated" if changed or self.mig else "unchanged"


def inventory_import(
    *,
    result: ParseResult,
    source: InventorySource,
    pool: Pool | None = None,
    actor: Any | None = None,
    filename: str = "",
) -> ImportReport:
    """Write every node of ``result``; return the report and store it as an InventoryImport.

    A node is rejected, and nothing of it written, when its host name is invalid, when it
    appears twice in the input, when two of its GPUs share a UUID, or when a UUID it reports is
    already held by a GPU of another node (a conflict to resolve by hand, never a silent move).
    Nodes are written in chunks of ``CHUNK_SIZE``, each chunk in one transaction with its node
    rows locked; if the database refuses a chunk, its nodes are retried one transaction each,
    so one bad node never takes others down and no node is ever half written. ``pool``, when
    given, places every node in that pool; otherwise Slurm nodes join the pool whose partition
    they are in and Kubernetes nodes the pool whose node selector their labels match.
    """
    report = ImportReport(source=str(source), issues=list(result.issues))
    run = _Run(
        source=InventorySource(source),
        resolver=GpuModelResolver.load(),
        now=timezone.now(),
        actor=actor,
        pool=pool,
        pools=list(Pool.objects.all()) if pool is None else [],
    )
    snapshots = _screen([_mig_single_cards(n, run, report) for n in result.nodes], report)
    for start in range(0, len(snapshots), CHUNK_SIZE):
        chunk = snapshots[start : start + CHUNK_SIZE]
        try:
            with transaction.atomic():
                _record(report, _write_chunk(chunk, run))
        except DatabaseError:
            for snapshot in chunk:
                try:
                    with transaction.atomic():
                        _record(report, _write_chunk([snapshot], run))
                except DatabaseError as exc:
                    report.rejected.append(snapshot.hostname)
                    report.issues.append(
                        ParseIssue(
                            f"the database refused this node: {exc}".strip(), node=snapshot.hostname
                        )
                    )
    record = InventoryImport.objects.create(
        source=str(source),
        filename=filename[:255],
        actor=actor if getattr(actor, "is_authenticated", False) else None,
        nodes_created=len(report.created),
        nodes_updated=len(report.updated),
        nodes_unchanged=len(report.unchanged),
        nodes_rejected=len(report.rejected),
        gpus_seen=report.gpus_seen,
        errors=[_issue_dict(i) for i in report.issues],
    )
    report.record_id = record.pk
    return report


def _record(report: ImportReport, outcome: tuple[list, list]) -> None:
    plans, rejected = outcome
    for hostname, issue in rejected:
        report.rejected.append(hostname)
        report.issues.append(issue)
    for plan in plans:
        getattr(report, plan.outcome).append(plan.node.hostname)
        report.gpus_seen += len(plan.new_gpus) + len(plan.changed_gpus) + len(plan.seen_gpu_ids)
        report.warnings.extend(plan.warnings)


def _mig_single_cards(snapshot: NodeSnapshot, run: _Run, report: ImportReport) -> NodeSnapshot:
    """Turn the slices a MIG *single* Kubernetes node publishes into its physical cards.

    The node says ``count`` slices of one profile cut from cards of ``base_model``; the card's
    memory (catalogue ``memory_gib`` of that model) gives the slices per card
    (:func:`mig_per_card`), and cards = slices / per card. When the model is not in the
    catalogue, or the slices do not fill whole cards (a card partly partitioned), the card count
    is not knowable and the node's cards are left as they are, with the reason reported.
    """
    mig = snapshot.mig_single
    if mig is None:
        return snapshot
    model = run.resolver.match(mig.base_model).gpu_model
    per_card = mig_per_card(mig.profile, card_memory_gib=float(model.memory_gib)) if model else None
    if not per_card or mig.count % per_card:
        why = (
            f"{mig.base_model!r} is not a catalogue model"
            if model is None
            else f"{mig.count} slices of {mig.profile} do not fill cards of {per_card}"
        )
        report.issues.append(
            ParseIssue(
                f"mig.strategy=single: {why}; the physical card count is unknown, "
                "this node's cards are left unchanged",
                field="metadata.labels.nvidia.com/gpu.count",
                node=snapshot.hostname,
            )
        )
        return replace(snapshot, mig_single=None, gpus_unknown=True)
    slices = tuple(
        MigDeviceSnapshot(index=n, profile=mig.profile, memory_total_mib=mig.memory_mib)
        for n in range(per_card)
    )
    gpus = tuple(
        GpuSnapshot(index=i, model_name=mig.base_model, mig_mode=True, mig_devices=slices)
        for i in range(mig.count // per_card)
    )
    return replace(snapshot, gpus=gpus, mig_single=None)


def _screen(snapshots, report: ImportReport) -> list[NodeSnapshot]:
    """Drop (and report) nodes that can be refused without reading the database."""
    kept: list[NodeSnapshot] = []
    seen_hosts: set[str] = set()
    for snapshot in snapshots:
        problem = _snapshot_problem(snapshot, seen_hosts)
        if problem:
            report.rejected.append(snapshot.hostname)
            report.issues.append(ParseIssue(problem[1], field=problem[0], node=snapshot.hostname))
            continue
        seen_hosts.add(snapshot.hostname)
        kept.append(snapshot)
    return kept


def _snapshot_problem(snapshot: NodeSnapshot, seen_hosts: set[str]) -> tuple[str, str] | None:
    try:
        hostname_validator(snapshot.hostname)
    except ValidationError:
        return "hostname", f"invalid node name {snapshot.hostname!r}: {hostname_validator.message}"
    if snapshot.hostname in seen_hosts:
        return "hostname", "this node appears twice in the input; only the first was imported"
    uuids = [u for g in snapshot.gpus if (u := _clean_uuid(g.uuid))]
    duplicate = next((u for u in uuids if uuids.count(u) > 1), None)
    if duplicate:
        return "uuid", f"GPU UUID {duplicate} appears twice on this node"
    return None


def _clean_uuid(uuid: str | None) -> str | None:
    if not uuid:
        return None
    return None if _MASKED_UUID.match(uuid) else uuid


def _write_chunk(snapshots: list[NodeSnapshot], run: _Run) -> tuple[list[_NodePlan], list]:
    """Plan and write a chunk of nodes inside the caller's transaction."""
    hosts = [s.hostname for s in snapshots]
    nodes = {n.hostname: n for n in Node.objects.select_for_update().filter(hostname__in=hosts)}
    gpus_by_node: dict[int, list[Gpu]] = {n.pk: [] for n in nodes.values()}
    for gpu in Gpu.objects.filter(node__in=list(nodes.values())).prefetch_related("mig_devices"):
        gpus_by_node[gpu.node_id].append(gpu)
    wanted = {u for s in snapshots for g in s.gpus if (u := _clean_uuid(g.uuid))}
    held = (
        dict(
            (uuid, hostname)
            for uuid, hostname in Gpu.objects.filter(uuid__in=wanted).values_list(
                "uuid", "node__hostname"
            )
        )
        if wanted
        else {}
    )

    plans: list[_NodePlan] = []
    rejected: list[tuple[str, ParseIssue]] = []
    for snapshot in snapshots:
        uuids = [u for g in snapshot.gpus if (u := _clean_uuid(g.uuid))]
        clash = next(
            (u for u in uuids if held.get(u, snapshot.hostname) != snapshot.hostname), None
        )
        if clash:
            rejected.append(
                (
                    snapshot.hostname,
                    ParseIssue(
                        f"GPU UUID {clash} is already held by node {held[clash]}; not moved "
                        "(resolve by hand: remove the card from the other node first)",
                        field="uuid",
                        node=snapshot.hostname,
                    ),
                )
            )
            continue
        held.update({u: snapshot.hostname for u in uuids})
        node = nodes.get(snapshot.hostname)
        plans.append(_plan_node(node, gpus_by_node.get(node.pk, []) if node else [], snapshot, run))
    _write_plans(plans, run)
    return plans, rejected


def _node_values(node: Node) -> tuple:
    return tuple(getattr(node, f) for f in _NODE_FIELDS)


def _node_state(node: Node, gpu_count: int) -> dict[str, Any]:
    return {
        "pool_id": node.pool_id,
        "state": node.state,
        "driver_version": node.driver_version,
        "cuda_version": node.cuda_version,
        "scheduler": node.scheduler,
        "gpus": gpu_count,
    }


def _plan_node(
    node: Node | None, existing: list[Gpu], snapshot: NodeSnapshot, run: _Run
) -> _NodePlan:
    created = node is None
    if created:
        node = Node(hostname=snapshot.hostname)
    before_values = None if created else _node_values(node)
    before = None if created else _node_state(node, len(existing))
    _apply_node_fields(node, snapshot, run=run)
    odd = _implausible(snapshot)
    plan = _NodePlan(
        node=node,
        created=created,
        node_changed=created or before_values != _node_values(node),
        before=before,
        after=_node_state(node, len(existing if snapshot.gpus_unknown else snapshot.gpus)),
    )
    plan.warnings.extend(odd)
    if not snapshot.gpus_unknown:
        _plan_gpus(plan, existing, snapshot, run)
    for gpu in existing:
        if gpu.uuid and _MASKED_UUID.match(gpu.uuid):
            gpu.uuid = None
    for snap in snapshot.gpus:
        if snap.uuid and _clean_uuid(snap.uuid) is None:
            plan.warnings.append(
                ParseIssue(
                    f"GPU {snap.index}: UUID {snap.uuid} is a masked placeholder; "
                    "stored as unknown",
                    field="uuid",
                    node=snapshot.hostname,
                )
            )
    return plan


# No GPU has (yet) a TiB of memory; a larger reading is a unit slip or garbage.
MAX_GPU_MEMORY_MIB = 1024 * 1024


def _plausible_mib(value: int | None) -> int | None:
    return value if value is not None and 0 < value <= MAX_GPU_MEMORY_MIB else None


def _is_driver_version(raw: str) -> bool:
    try:
        parse_driver_version(raw)
    except ValueError:
        return False
    return True


def _implausible(snapshot: NodeSnapshot) -> list[ParseIssue]:
    """Values a parser read but the portal will not store, each as a warning."""
    found = []
    if snapshot.driver_version and not _is_driver_version(snapshot.driver_version):
        found.append(
            ParseIssue(
                f"driver version {snapshot.driver_version!r} is not an NVIDIA driver version; "
                "not stored",
                field="driver_version",
                node=snapshot.hostname,
            )
        )
    for gpu in snapshot.gpus:
        if gpu.memory_total_mib is not None and _plausible_mib(gpu.memory_total_mib) is None:
            found.append(
                ParseIssue(
                    f"GPU {gpu.index}: memory {gpu.memory_total_mib} MiB is not plausible; "
                    "stored as unknown",
                    field="memory.total",
                    node=snapshot.hostname,
                )
            )
    return found


def _apply_node_fields(node: Node, snapshot: NodeSnapshot, *, run: _Run) -> None:
    node.last_source = str(run.source)
    node.last_seen_at = run.now
    node.updated_at = run.now
    pool = run.pool_for(snapshot)
    if pool is not None:
        node.pool = pool
    scheduler = _SCHEDULER_OF_SOURCE.get(run.source)
    if scheduler is not None:
        node.scheduler = scheduler
    elif node.pool_id and node.scheduler == Scheduler.NONE:
        node.scheduler = node.pool.scheduler
    if snapshot.state is not None:
        node.state = NodeState(str(snapshot.state))
        node.state_reason = (snapshot.state_reason or "")[:255]
    elif not node.state:
        node.state = NodeState.UNKNOWN
    if snapshot.driver_version and _is_driver_version(snapshot.driver_version):
        node.driver_version = snapshot.driver_version[:32]
        node.driver_group = run.driver_group(snapshot.driver_version)
    if snapshot.cuda_version:
        node.cuda_version = snapshot.cuda_version[:8]
    if snapshot.partitions:
        node.partitions = list(snapshot.partitions)
    if snapshot.labels:
        node.labels = dict(snapshot.labels)
    if snapshot.gpu_replicas is not None:
        node.gpu_replicas = snapshot.gpu_replicas
    if snapshot.gpus_allocated is not None:
        node.gpus_allocated = snapshot.gpus_allocated
    if snapshot.nvlink_domains is not None:
        domains = [list(domain) for domain in snapshot.nvlink_domains]
        if node.nvlink_domains != domains:
            node.nvlink_domains = domains
            node.nvlink_read_at = run.now


def _plan_gpus(plan: _NodePlan, existing: list[Gpu], snapshot: NodeSnapshot, run: _Run) -> None:
    """Work out how the node's GPU rows must change to match the snapshot.

    GPUs are matched by UUID, then by index. A value the source did not report (``None``)
    never overwrites a known one, so a Slurm import (types and counts only) does not erase
    what nvidia-smi said about the same cards.
    """
    by_uuid = {g.uuid: g for g in existing if g.uuid}
    by_index = {g.index: g for g in existing}
    kept: set[int] = set()
    for position, snap in enumerate(snapshot.gpus):
        index = snap.index if snap.index is not None else position
        uuid = _clean_uuid(snap.uuid)
        gpu = (by_uuid.get(uuid) if uuid else None) or by_index.get(index)
        if gpu is None or gpu.pk in kept:
            gpu = Gpu(node=plan.node, index=index, last_seen_at=run.now)
            plan.new_gpus.append(gpu)
        else:
            kept.add(gpu.pk)
        touched = _apply_gpu_fields(gpu, snap, index=index, uuid=uuid, plan=plan, run=run)
        if gpu.pk:
            (plan.changed_gpus if touched else []).append(gpu)
            if not touched:
                plan.seen_gpu_ids.append(gpu.pk)
        rows = sorted(
            (
                m.index,
                _clean_uuid(m.uuid) or "",
                m.profile or "",
                m.gpu_instance_id,
                m.compute_instance_id,
                m.memory_total_mib,
            )
            for m in snap.mig_devices
        )
        current = (
            sorted(
                (
                    m.index,
                    m.uuid,
                    m.profile,
                    m.gpu_instance_id,
                    m.compute_instance_id,
                    m.memory_total_mib,
                )
                for m in gpu.mig_devices.all()
            )
            if gpu.pk
            else []
        )
        if rows != current and (rows or snap.mig_mode is False):
            plan.mig.append((gpu, rows))
    plan.gone_gpu_ids = [g.pk for g in existing if g.pk not in kept]
    _renumber_clashes(plan.new_gpus, taken={g.index for g in existing if g.pk in kept})


def _apply_gpu_fields(
    gpu: Gpu, snap: GpuSnapshot, *, index: int, uuid: str | None, plan: _NodePlan, run: _Run
) -> bool:
    values = {
        "index": index,
        "uuid": uuid,
        "serial": (snap.serial or None) and snap.serial[:64],
        "pci_bus_id": (snap.pci_bus_id or None) and snap.pci_bus_id[:32],
        "memory_total_mib": _plausible_mib(snap.memory_total_mib),
        "mig_mode": snap.mig_mode,
    }
    if gpu.pk and gpu.index != index:
        plan.reindexed.append(gpu)
    touched = False
    for name, value in values.items():
        if value is not None and getattr(gpu, name) != value:
            setattr(gpu, name, value)
            touched = True
    device_id = (snap.pci_device_id or "")[:12]
    if device_id and gpu.pci_device_id != device_id:
        gpu.pci_device_id, touched = device_id, True
    found = run.resolver.match(snap.model_name, pci_device_id=device_id or gpu.pci_device_id)
    model = found.gpu_model
    if snap.model_name and model is None:
        listed = (
            f"ambiguous, could be {', '.join(found.candidates)} ({found.reason}); "
            "listed for an admin to map"
            if found.candidates
            else f"{found.reason}; listed as unrecognised"
        )
        plan.warnings.append(
            ParseIssue(
                f"GPU {index}: model {snap.model_name!r} {listed}",
                field="model",
                node=plan.node.hostname,
            )
        )
    # A recognised card keeps its name unless a source reports a different model
    # (a card swap); an unrecognised name never replaces a recognised one.
    if snap.model_name and not is_truncated_name(snap.model_name):
        if model is not None and gpu.gpu_model_id != model.pk:
            gpu.raw_model_name, gpu.gpu_model = snap.model_name[:120], model
            gpu.model_candidates = []
            touched = True
        elif model is None and gpu.gpu_model_id is None:
            candidates = list(found.candidates)
            if gpu.raw_model_name != snap.model_name or gpu.model_candidates != candidates:
                gpu.raw_model_name, gpu.model_candidates = snap.model_name[:120], candidates
                touched = True
    health = str(snap.health)
    if health != GpuHealth.UNKNOWN and gpu.health != health:
        gpu.health = health
        touched = True
    if touched:
        gpu.last_seen_at = run.now
    return touched


def _renumber_clashes(gpus: list[Gpu], *, taken: set[int]) -> None:
    seen = set(taken)
    for gpu in gpus:
        while gpu.index in seen:
            gpu.index += 1
        seen.add(gpu.index)


def _write_plans(plans: list[_NodePlan], run: _Run) -> None:
    """Apply every plan with bulk statements; the caller holds the transaction."""
    Node.objects.bulk_create([p.node for p in plans if p.created])
    changed_nodes = [p.node for p in plans if p.node_changed and not p.created]
    if changed_nodes:
        bulk_update_rows(
            changed_nodes,
            [f.removesuffix("_id") for f in _NODE_FIELDS]
            + ["last_source", "last_seen_at", "updated_at"],
        )
    seen_nodes = [p.node.pk for p in plans if not p.node_changed]
    if seen_nodes:
        Node.objects.filter(pk__in=seen_nodes).update(
            last_seen_at=run.now, last_source=str(run.source)
        )
    gone = [pk for p in plans for pk in p.gone_gpu_ids]
    if gone:
        Gpu.objects.filter(pk__in=gone).delete()
    moved = [g for p in plans for g in p.reindexed]
    if moved:
        # (node, index) is unique and checked row by row: park moved cards on free indices
        # first, so two cards that swapped places never collide mid-update.
        final = [g.index for g in moved]
        for k, gpu in enumerate(moved):
            gpu.index = _PARKING_INDEX - k
        bulk_update_rows(moved, ["index"])
        for gpu, index in zip(moved, final, strict=True):
            gpu.index = index
    changed = [g for p in plans for g in p.changed_gpus]
    if changed:
        bulk_update_rows(changed, _GPU_FIELDS)
    new = [g for p in plans for g in p.new_gpus]
    Gpu.objects.bulk_create(new)
    seen = [pk for p in plans for pk in p.seen_gpu_ids]
    if seen:
        Gpu.objects.filter(pk__in=seen).update(last_seen_at=run.now)
    mig = [(gpu, rows) for p in plans for gpu, rows in p.mig]
    if mig:
        MigDevice.objects.filter(gpu__in=[g for g, _ in mig if g.pk]).delete()
        MigDevice.objects.bulk_create(
            MigDevice(
                gpu=gpu,
                index=i,
                uuid=u,
                profile=prof,
                gpu_instance_id=gi,
                compute_instance_id=ci,
                memory_total_mib=mem,
            )
            for gpu, rows in mig
            for i, u, prof, gi, ci, mem in rows
        )
    events = [
        audit_event_build(
            actor=run.actor,
            action=f"node.{p.outcome}",
            obj=p.node,
            before=p.before,
            after=p.after,
            reason=f"imported from {run.source}",
        )
        for p in plans
        if p.outcome != "unchanged"
    ]
    AuditEvent.objects.bulk_create(events)


def inventory_parse_file(
    *,
    data: bytes,
    source: InventorySource | str,
    node: str | None = None,
    filename: str = "",
) -> ParseResult:
    """Decode and parse one file into node snapshots without writing anything.

    ``data`` is the raw file content. nvidia-smi output needs ``node`` (the host it came from);
    Slurm input is the JSON of slurmrestd ``GET /slurm/<version>/nodes``; Kubernetes input is a
    Node or NodeList as JSON or YAML (``kubectl get nodes -o json``); for these two, ``node``
    keeps only that node. Bytes that are not UTF-8 are replaced and reported with their line
    number; the rest of the file is still read. Raises :class:`pools.errors.InvalidInput` for
    an unknown source, a missing ``node`` for nvidia-smi, an empty file, or one over
    ``INVENTORY_UPLOAD_MAX_BYTES`` (:class:`pools.errors.UploadTooLarge`).
    """
    try:
        source = InventorySource(source)
    except ValueError:
        choices = ", ".join(s.value for s in InventorySource)
        raise InvalidInput(
            f"Unknown source {source!r}; use one of: {choices}.", field="source"
        ) from None
    label = filename or "The file"
    limit = settings.INVENTORY_UPLOAD_MAX_BYTES
    if len(data) > limit:
        raise UploadTooLarge(
            f"{label} is {len(data):,} bytes; the limit is {limit:,} bytes.",
            field="file",
            size=len(data),
            limit=limit,
        )
    if not data.strip():
        raise InvalidInput(f"{label} is empty.", field="file")
    if source == InventorySource.NVIDIA_SMI and not (node and node.strip()):
        raise InvalidInput(
            "nvidia-smi output needs the name of the node it came from.", field="node"
        )
    text, decode_issues = _decode(data)
    if source == InventorySource.NVIDIA_SMI:
        result = _with_topology(parse_nvidia_smi(text, hostname=node.strip()), text)
    elif source == InventorySource.SLURM:
        result = parse_slurm_nodes(text)
    else:
        result = parse_kubernetes_nodes(text)
    nodes = result.nodes
    if node and source != InventorySource.NVIDIA_SMI:
        nodes = tuple(n for n in nodes if n.hostname == node)
    issues = tuple(decode_issues) + result.issues
    if filename:
        issues = tuple(_in_file(issue, filename) for issue in issues)
    return ParseResult(nodes=nodes, issues=issues)


def _with_topology(result: ParseResult, text: str) -> ParseResult:
    """Add what ``nvidia-smi topo -m`` / ``nvlink -s`` sections of the same capture say about
    NVLink domains to its node (:mod:`pools.inventory.topology`); what they leave unknown stays
    unknown, and a matrix naming cards the capture does not list is reported, not stored."""
    host = parse_topology(text)
    if not (host.matrix or host.nvlink_status) or len(result.nodes) != 1:
        return result
    (snapshot,) = result.nodes
    issues = list(result.issues)
    issues.extend(
        ParseIssue(f"topology: {issue.message}", line=issue.line, node=snapshot.hostname)
        for issue in host.issues
    )
    listed = {gpu.index for gpu in snapshot.gpus}
    if host.domains is None:
        return ParseResult(nodes=result.nodes, issues=tuple(issues))
    if listed and set(host.gpus) != listed:
        issues.append(
            ParseIssue(
                f"topology names GPUs {sorted(host.gpus)} but the capture lists {sorted(listed)}: "
                "NVLink domains not stored",
                node=snapshot.hostname,
            )
        )
        return ParseResult(nodes=result.nodes, issues=tuple(issues))
    domains = tuple(tuple(sorted(domain.gpus)) for domain in host.domains)
    return ParseResult(nodes=(replace(snapshot, nvlink_domains=domains),), issues=tuple(issues))


def _in_file(issue: ParseIssue, filename: str) -> ParseIssue:
    return ParseIssue(
        f"{filename}: {issue.message}", line=issue.line, field=issue.field, node=issue.node
    )


def inventory_import_file(
    *,
    data: bytes,
    source: InventorySource | str,
    node: str | None = None,
    pool: Pool | None = None,
    actor: Any | None = None,
    filename: str = "",
) -> ImportReport:
    """Parse one uploaded or local file (see :func:`inventory_parse_file`) and import it.

    Raises what :func:`inventory_parse_file` raises, before anything is written.
    """
    result = inventory_parse_file(data=data, source=source, node=node, filename=filename)
    return inventory_import(
        result=result, source=InventorySource(source), pool=pool, actor=actor, filename=filename
    )


def inventory_import_files(
    *,
    files: list[tuple[str, bytes, str | None]],
    source: InventorySource | str,
    pool: Pool | None = None,
    actor: Any | None = None,
) -> ImportReport:
    """Import many files as one run: ``files`` is ``[(filename, data, node or None)]``.

    Every file is parsed first; a file that cannot be used at all (empty, too large, no node
    for nvidia-smi) becomes an issue of the report instead of stopping the others. Then all
    nodes are imported in one run (one alias lookup, one report), each node in its own
    transaction. Raises :class:`InvalidInput` only for an unknown source or no files.
    """
    try:
        source = InventorySource(source)
    except ValueError:
        choices = ", ".join(s.value for s in InventorySource)
        raise InvalidInput(
            f"Unknown source {source!r}; use one of: {choices}.", field="source"
        ) from None
    if not files:
        raise InvalidInput("No files to import.", field="files")
    nodes: list[NodeSnapshot] = []
    issues: list[ParseIssue] = []
    for filename, data, node in files:
        try:
            result = inventory_parse_file(data=data, source=source, node=node, filename=filename)
        except InvalidInput as exc:
            issues.append(ParseIssue(exc.message, field=exc.data.get("field"), node=node))
            continue
        nodes.extend(result.nodes)
        issues.extend(result.issues)
    names = ", ".join(name for name, _, _ in files[:3]) + (" …" if len(files) > 3 else "")
    return inventory_import(
        result=ParseResult(nodes=tuple(nodes), issues=tuple(issues)),
        source=source,
        pool=pool,
        actor=actor,
        filename=names,
    )


def _decode(data: bytes) -> tuple[str, list[ParseIssue]]:
    try:
        return data.decode("utf-8-sig"), []
    except UnicodeDecodeError:
        pass
    issues = []
    lines = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            issues.append(
                ParseIssue(
                    f"bytes that are not UTF-8 at column {exc.start + 1}; replaced", line=number
                )
            )
            lines.append(raw.decode("utf-8", errors="replace"))
    return "\n".join(lines), issues
