"""Upsert parsed inventory snapshots into nodes and GPUs, one transaction per node.

The parsers (:mod:`pools.inventory.nvidia_smi`, :mod:`scheduler_adapters.slurm.nodes`,
:mod:`scheduler_adapters.kubernetes_nodes`) turn text into :class:`NodeSnapshot` objects; this
module writes them. A node either imports whole or not at all, and the report says which nodes
were created, updated, unchanged or rejected, and why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from pools.audit import audit_event_record
from pools.choices import GpuHealth, NodeState, Scheduler
from pools.errors import InvalidInput, UploadTooLarge
from pools.inventory.nvidia_smi import parse_nvidia_smi
from pools.models import Gpu, InventoryImport, MigDevice, Node, Pool, hostname_validator
from pools.services.driver_groups import driver_group_for_version
from pools.services.gpu_models import GpuModelResolver
from scheduler_adapters.kubernetes_nodes import parse_kubernetes_nodes
from scheduler_adapters.slurm.nodes import parse_slurm_nodes
from scheduler_adapters.types import (
    GpuSnapshot,
    InventorySource,
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


class NodeRejected(Exception):
    """Raised inside a node's transaction to roll it back; carries the reason."""

    def __init__(self, issue: ParseIssue) -> None:
        super().__init__(issue.message)
        self.issue = issue


def inventory_import(
    *,
    result: ParseResult,
    source: InventorySource,
    pool: Pool | None = None,
    actor: Any | None = None,
    filename: str = "",
) -> ImportReport:
    """Write every node of ``result``; return the report and store it as an InventoryImport.

    Each node is upserted in its own transaction with its row locked, so a rejected node leaves
    nothing behind and the others are kept. A node is rejected when its host name is invalid,
    when two of its GPUs share a UUID, or when a UUID it reports is already held by a GPU of
    another node (a conflict to resolve by hand, never a silent move). ``pool``, when given,
    places every node in that pool; otherwise Slurm nodes join the pool whose partition they are
    in and Kubernetes nodes the pool whose node selector their labels match.
    """
    report = ImportReport(source=str(source), issues=list(result.issues))
    resolver = GpuModelResolver.load()
    pools = list(Pool.objects.all()) if pool is None else []
    now = timezone.now()
    for snapshot in result.nodes:
        try:
            with transaction.atomic():
                outcome = _import_node(
                    snapshot, source=source, pool=pool or _pool_for(snapshot, pools),
                    resolver=resolver, actor=actor, now=now, warnings=report.warnings,
                )
        except NodeRejected as rejected:
            report.rejected.append(snapshot.hostname)
            report.issues.append(rejected.issue)
            continue
        report.gpus_seen += len(snapshot.gpus)
        getattr(report, outcome).append(snapshot.hostname)
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


def _pool_for(snapshot: NodeSnapshot, pools: list[Pool]) -> Pool | None:
    for candidate in pools:
        if candidate.scheduler == Scheduler.SLURM and candidate.slurm_partition:
            if candidate.slurm_partition in snapshot.partitions:
                return candidate
        if candidate.scheduler == Scheduler.KUBERNETES and candidate.k8s_node_selector:
            selector = candidate.k8s_node_selector
            if all(snapshot.labels.get(k) == v for k, v in selector.items()):
                return candidate
    return None


def _clean_uuid(uuid: str | None) -> str | None:
    if not uuid:
        return None
    return None if _MASKED_UUID.match(uuid) else uuid


def _import_node(
    snapshot: NodeSnapshot,
    *,
    source: InventorySource,
    pool: Pool | None,
    resolver: GpuModelResolver,
    actor: Any,
    now,
    warnings: list[ParseIssue],
) -> str:
    hostname = snapshot.hostname
    try:
        hostname_validator(hostname)
    except ValidationError:
        raise NodeRejected(
            ParseIssue(f"invalid node name {hostname!r}: {hostname_validator.message}",
                       field="hostname", node=hostname)
        ) from None
    uuids = _checked_uuids(snapshot, warnings)

    node = Node.objects.select_for_update().filter(hostname=hostname).first()
    created = node is None
    if created:
        node = Node(hostname=hostname)
    before = _node_state(node) if not created else None

    if uuids:
        held = (
            Gpu.objects.filter(uuid__in=uuids)
            .exclude(node_id=node.pk)
            .select_related("node")
            .first()
        )
        if held is not None:
            raise NodeRejected(
                ParseIssue(
                    f"GPU UUID {held.uuid} is already held by node {held.node.hostname}; "
                    "not moved (resolve by hand: remove the card from the other node first)",
                    field="uuid",
                    node=hostname,
                )
            )

    _apply_node_fields(node, snapshot, source=source, pool=pool, now=now)
    node.save()
    gpus_changed = _sync_gpus(node, snapshot, resolver=resolver, now=now, warnings=warnings)
    after = _node_state(node)
    if created:
        audit_event_record(actor=actor, action="node.created", obj=node, after=after,
                           reason=f"imported from {source}")
        return "created"
    if gpus_changed or before != after:
        audit_event_record(actor=actor, action="node.updated", obj=node, before=before,
                           after=after, reason=f"imported from {source}")
        return "updated"
    return "unchanged"


def _checked_uuids(snapshot: NodeSnapshot, warnings: list[ParseIssue]) -> list[str]:
    seen: set[str] = set()
    for gpu in snapshot.gpus:
        if gpu.uuid and _clean_uuid(gpu.uuid) is None:
            warnings.append(
                ParseIssue(f"GPU {gpu.index}: UUID {gpu.uuid} is a masked placeholder; "
                           "stored as unknown", field="uuid", node=snapshot.hostname)
            )
        uuid = _clean_uuid(gpu.uuid)
        if uuid is None:
            continue
        if uuid in seen:
            raise NodeRejected(
                ParseIssue(f"GPU UUID {uuid} appears twice on this node", field="uuid",
                           node=snapshot.hostname)
            )
        seen.add(uuid)
    return sorted(seen)


def _node_state(node: Node) -> dict[str, Any]:
    return {
        "pool": node.pool.slug if node.pool_id else None,
        "state": node.state,
        "driver_version": node.driver_version,
        "cuda_version": node.cuda_version,
        "scheduler": node.scheduler,
        "gpus": node.gpus.count() if node.pk else 0,
    }


def _apply_node_fields(node: Node, snapshot: NodeSnapshot, *, source, pool, now) -> None:
    node.last_source = str(source)
    node.last_seen_at = now
    if pool is not None:
        node.pool = pool
    scheduler = _SCHEDULER_OF_SOURCE.get(source)
    if scheduler is not None:
        node.scheduler = scheduler
    elif pool is not None and node.scheduler == Scheduler.NONE:
        node.scheduler = pool.scheduler
    if snapshot.state is not None:
        node.state = NodeState(str(snapshot.state))
        node.state_reason = (snapshot.state_reason or "")[:255]
    elif not node.state:
        node.state = NodeState.UNKNOWN
    if snapshot.driver_version:
        node.driver_version = snapshot.driver_version
        node.driver_group = driver_group_for_version(snapshot.driver_version)
    if snapshot.cuda_version:
        node.cuda_version = snapshot.cuda_version
    if snapshot.partitions:
        node.partitions = list(snapshot.partitions)
    if snapshot.labels:
        node.labels = dict(snapshot.labels)
    if snapshot.gpu_replicas is not None:
        node.gpu_replicas = snapshot.gpu_replicas


def _sync_gpus(
    node: Node,
    snapshot: NodeSnapshot,
    *,
    resolver: GpuModelResolver,
    now,
    warnings: list[ParseIssue],
) -> bool:
    """Make the node's GPU rows match the snapshot; return True if anything changed.

    GPUs are matched by UUID, then by index. A value the source did not report (``None``)
    never overwrites a known one, so a Slurm import (types and counts only) does not erase
    what nvidia-smi said about the same cards.
    """
    existing = list(node.gpus.all())
    by_uuid = {g.uuid: g for g in existing if g.uuid}
    by_index = {g.index: g for g in existing}
    kept: set[int] = set()
    dirty: set[int] = set()
    changed = False
    to_create: list[Gpu] = []
    mig_work: list[tuple[Gpu, GpuSnapshot]] = []

    for position, snap in enumerate(snapshot.gpus):
        index = snap.index if snap.index is not None else position
        uuid = _clean_uuid(snap.uuid)
        gpu = by_uuid.get(uuid) if uuid else None
        gpu = gpu or by_index.get(index)
        if gpu is None or gpu.pk in kept:
            gpu = Gpu(node=node, index=index)
            to_create.append(gpu)
        else:
            kept.add(gpu.pk)
        model = resolver.resolve(snap.model_name)
        if snap.model_name and model is None:
            warnings.append(
                ParseIssue(f"GPU {index}: model {snap.model_name!r} matches no catalogue alias; "
                           "listed as unrecognised", field="model", node=node.hostname)
            )
        values = {
            "index": index,
            "uuid": uuid,
            "serial": snap.serial or None,
            "pci_bus_id": snap.pci_bus_id or None,
            "memory_total_mib": snap.memory_total_mib,
            "mig_mode": snap.mig_mode,
        }
        touched = False
        for name, value in values.items():
            if value is not None and getattr(gpu, name) != value:
                setattr(gpu, name, value)
                touched = True
        # A recognised card keeps its name unless a source reports a different model
        # (a card swap); an unrecognised name never replaces a recognised one.
        if snap.model_name:
            if model is not None and gpu.gpu_model_id != model.pk:
                gpu.raw_model_name, gpu.gpu_model = snap.model_name[:120], model
                touched = True
            elif model is None and gpu.gpu_model_id is None and gpu.raw_model_name != snap.model_name:
                gpu.raw_model_name = snap.model_name[:120]
                touched = True
        health = str(snap.health)
        if health != GpuHealth.UNKNOWN and gpu.health != health:
            gpu.health = health
            touched = True
        gpu.last_seen_at = now
        if touched and gpu.pk:
            dirty.add(gpu.pk)
        changed |= touched
        if snap.mig_devices:
            mig_work.append((gpu, snap))

    gone = [g.pk for g in existing if g.pk not in kept]
    if gone:
        Gpu.objects.filter(pk__in=gone).delete()
        changed = True
    for gpu in existing:
        if gpu.pk in dirty:
            gpu.save()
    seen_again = [g.pk for g in existing if g.pk in kept and g.pk not in dirty]
    if seen_again:
        Gpu.objects.filter(pk__in=seen_again).update(last_seen_at=now)
    if to_create:
        _renumber_clashes(to_create)
        Gpu.objects.bulk_create(to_create)
        changed = True
    for gpu, snap in mig_work:
        changed |= _sync_mig(gpu, snap)
    return changed


def _renumber_clashes(gpus: list[Gpu]) -> None:
    seen: set[int] = set()
    for gpu in gpus:
        while gpu.index in seen:
            gpu.index += 1
        seen.add(gpu.index)


def _sync_mig(gpu: Gpu, snap: GpuSnapshot) -> bool:
    wanted = [
        (m.index, m.uuid or "", m.profile or "", m.gpu_instance_id, m.compute_instance_id,
         m.memory_total_mib)
        for m in snap.mig_devices
    ]
    current = [
        (m.index, m.uuid, m.profile, m.gpu_instance_id, m.compute_instance_id, m.memory_total_mib)
        for m in gpu.mig_devices.order_by("index")
    ] if gpu.pk else []
    if current == sorted(wanted, key=lambda row: row[0]):
        return False
    MigDevice.objects.filter(gpu=gpu).delete()
    MigDevice.objects.bulk_create(
        MigDevice(gpu=gpu, index=i, uuid=u, profile=p, gpu_instance_id=gi,
                  compute_instance_id=ci, memory_total_mib=mem)
        for i, u, p, gi, ci, mem in wanted
    )
    return True


def inventory_import_file(
    *,
    data: bytes,
    source: InventorySource | str,
    node: str | None = None,
    pool: Pool | None = None,
    actor: Any | None = None,
    filename: str = "",
) -> ImportReport:
    """Decode, parse and import one uploaded or local file; the entry point of every caller.

    ``data`` is the raw file content. nvidia-smi output needs ``node`` (the host it came from);
    Slurm input is the JSON of slurmrestd ``GET /slurm/<version>/nodes``; Kubernetes input is a
    Node or NodeList as JSON or YAML (``kubectl get nodes -o json``). Bytes that are not UTF-8
    are replaced and reported with their line number; the rest of the file is still read.
    Raises :class:`pools.errors.InvalidInput` (nothing written) for an unknown source, a missing
    ``node`` for nvidia-smi, an empty file, or one over ``INVENTORY_UPLOAD_MAX_BYTES``.
    """
    try:
        source = InventorySource(source)
    except ValueError:
        choices = ", ".join(s.value for s in InventorySource)
        raise InvalidInput(f"Unknown source {source!r}; use one of: {choices}.",
                           field="source") from None
    limit = settings.INVENTORY_UPLOAD_MAX_BYTES
    if len(data) > limit:
        raise UploadTooLarge(
            f"{filename or 'The file'} is {len(data):,} bytes; the limit is {limit:,} bytes.",
            field="file", size=len(data), limit=limit,
        )
    if not data.strip():
        raise InvalidInput(f"{filename or 'The file'} is empty.", field="file")
    if source == InventorySource.NVIDIA_SMI and not node:
        raise InvalidInput("nvidia-smi output needs the name of the node it came from.",
                           field="node")
    text, decode_issues = _decode(data)
    if source == InventorySource.NVIDIA_SMI:
        result = parse_nvidia_smi(text, hostname=node.strip())
    elif source == InventorySource.SLURM:
        result = parse_slurm_nodes(text)
    else:
        result = parse_kubernetes_nodes(text)
    if node and source != InventorySource.NVIDIA_SMI:
        result = ParseResult(
            nodes=tuple(n for n in result.nodes if n.hostname == node), issues=result.issues
        )
    if decode_issues:
        result = ParseResult(nodes=result.nodes, issues=tuple(decode_issues) + result.issues)
    return inventory_import(result=result, source=source, pool=pool, actor=actor,
                            filename=filename)


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
            issues.append(ParseIssue(
                f"bytes that are not UTF-8 at column {exc.start + 1}; replaced", line=number))
            lines.append(raw.decode("utf-8", errors="replace"))
    return "\n".join(lines), issues
