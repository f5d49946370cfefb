"""What importing one node changes, worked out before anything is written: the node's fields
from its snapshot, its GPUs matched by UUID then index, MIG slices, and the warnings about
values not stored. :mod:`pools.inventory.services.importer` writes the plans.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pools.common.choices import GpuHealth, NodeState, Scheduler
from pools.inventory.driver_versions import cuda_beyond_table, parse_driver_version
from pools.inventory.gpu_names import is_truncated_name
from pools.inventory.models import Gpu, Node, Pool
from pools.inventory.services.driver_groups import cuda_driver_table, driver_group_for_version
from pools.inventory.services.gpu_models import GpuModelResolver, ResolvedModel
from scheduler_adapters.types import GpuSnapshot, InventorySource, NodeSnapshot, ParseIssue

_SCHEDULER_OF_SOURCE = {
    InventorySource.SLURM: Scheduler.SLURM,
    InventorySource.KUBERNETES: Scheduler.KUBERNETES,
}


# Publishers of captures mask identifiers by zeroing them; an all-zero UUID is never issued by
# NVML, so it names no card and must not take part in uniqueness checks.
_MASKED_UUID = re.compile(r"^(GPU|MIG)-[0-]+$", re.IGNORECASE)
# ...or by numbering them: MIG-00000001-0000-0000-0000-000000000001 in a published H100 MIG
# capture, the same on every node it is imported for. NVML's MIG UUIDs are random 128-bit
# values: 24 or more zero hex digits out of 32 happen by chance with probability
# C(32,24)·(1/16)^24 ≈ 1e-22, so such a MIG UUID is a placeholder. (GPU UUIDs keep the
# all-zero rule: a GPU UUID held by two nodes is refused outright by the import.)
_PLACEHOLDER_ZEROS = 24
_MIG_UUID_HEX = re.compile(r"^MIG-((?:[0-9a-f]{8})(?:-[0-9a-f]{4}){3}-[0-9a-f]{12})$", re.I)


# The node columns an import sets: compared to see whether a node changed, and written back.
NODE_FIELDS = (
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


@dataclass
class ImportRun:
    """What one import run loads once: the alias lookup, pools, driver groups seen, the clock."""

    source: InventorySource
    resolver: GpuModelResolver
    now: Any
    actor: Any
    pool: Pool | None
    pools: list[Pool]
    # the cluster whose nodes these are (``Node.cluster_id``; None: the environment's), or
    # ``any_cluster``: a file imported without a pool, matched to the one node of each name
    cluster_id: int | None = None
    any_cluster: bool = False
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
class NodePlan:
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
    field_changes: list[str] = field(default_factory=list)

    @property
    def changes(self) -> list[str]:
        """What an update changed, in words (empty for a new or unchanged node): each node
        field that differs (``driver_version 535.129.03 → 550.54.15``, ``labels changed``),
        then the GPU rows added, changed and gone and the cards whose MIG slices changed."""
        if self.created:
            return []
        counts = (
            (len(self.new_gpus), "GPU(s) added"),
            (len(self.changed_gpus), "GPU(s) changed"),
            (len(self.gone_gpu_ids), "GPU(s) no longer reported"),
            (len(self.mig), "card(s) with new MIG slices"),
        )
        return self.field_changes + [f"{n} {what}" for n, what in counts if n]

    @property
    def outcome(self) -> str:
        if self.created:
            return "created"
        changed = self.node_changed or self.new_gpus or self.changed_gpus or self.gone_gpu_ids
        return "updated" if changed or self.mig else "unchanged"


def is_placeholder_uuid(uuid: str) -> bool:
    """Whether a GPU/MIG UUID is a masked placeholder, or a MIG UUID a numbered one (see
    ``_PLACEHOLDER_ZEROS``)."""
    if _MASKED_UUID.match(uuid):
        return True
    match = _MIG_UUID_HEX.match(uuid)
    return bool(match) and match.group(1).count("0") >= _PLACEHOLDER_ZEROS


def clean_uuid(uuid: str | None) -> str | None:
    """The UUID, or ``None`` when there is none or it is a placeholder."""
    if not uuid:
        return None
    return None if is_placeholder_uuid(uuid) else uuid


def _node_values(node: Node) -> tuple:
    return tuple(getattr(node, f) for f in NODE_FIELDS)


# Fields said as "old → new"; the others (pool, lists, mappings) as "<name> changed". The
# driver group follows the driver version and the NVLink read time the domains: not repeated.
_SAID_WITH_VALUES = {"scheduler", "state", "state_reason", "driver_version", "cuda_version",
                     "gpu_replicas", "gpus_allocated"}  # fmt: skip
_NOT_SAID = {"driver_group_id", "nvlink_read_at"}


def _field_changes(before: tuple, after: tuple) -> list[str]:
    said = []
    for name, old, new in zip(NODE_FIELDS, before, after, strict=True):
        if old == new or name in _NOT_SAID:
            continue
        label = name.removesuffix("_id").replace("_", " ")
        if name in _SAID_WITH_VALUES:
            said.append(f"{label} {old if old not in (None, '') else '—'} → "
                        f"{new if new not in (None, '') else '—'}")  # fmt: skip
        else:
            said.append(f"{label} changed")
    return said


def _node_state(node: Node, gpu_count: int) -> dict[str, Any]:
    return {
        "pool_id": node.pool_id,
        "state": node.state,
        "driver_version": node.driver_version,
        "cuda_version": node.cuda_version,
        "scheduler": node.scheduler,
        "gpus": gpu_count,
    }


# The fields of a MIG slice the planner compares, in the order of its rows (tuples): the
# stored slices are read with ``values_list(*MIG_ROW_FIELDS)`` and compared with the reported.
MIG_ROW_FIELDS = (
    "index",
    "uuid",
    "profile",
    "gpu_instance_id",
    "compute_instance_id",
    "memory_total_mib",
    "gres_type",
)


def plan_node(
    node: Node | None,
    existing: list[Gpu],
    snapshot: NodeSnapshot,
    run: ImportRun,
    mig_rows: dict[int, list[tuple]],
) -> NodePlan:
    """The writes that bring ``node`` (``None``: a new one) and its ``existing`` GPUs to what
    ``snapshot`` says; the models are changed in memory only. ``mig_rows`` maps a stored GPU's
    id to its MIG slices as rows of :data:`MIG_ROW_FIELDS` (absent: none), read for a whole
    chunk in one query: a ``prefetch_related`` built a queryset per card, 9 s of an import of
    100,000 cards. A snapshot whose cards are unknown (``gpus_unknown``) leaves the GPUs alone."""
    created = node is None
    if created:
        node = Node(hostname=snapshot.hostname, cluster_id=run.cluster_id)
    before_values = None if created else _node_values(node)
    before = None if created else _node_state(node, len(existing))
    _apply_node_fields(node, snapshot, run=run)
    odd = _implausible(snapshot)
    plan = NodePlan(
        node=node,
        created=created,
        node_changed=created or before_values != _node_values(node),
        before=before,
        after=_node_state(node, len(existing if snapshot.gpus_unknown else snapshot.gpus)),
        field_changes=[] if created else _field_changes(before_values, _node_values(node)),
    )
    plan.warnings.extend(odd)
    if not snapshot.gpus_unknown:
        _plan_gpus(plan, existing, snapshot, run, mig_rows)
    for gpu in existing:
        if gpu.uuid and is_placeholder_uuid(gpu.uuid):
            gpu.uuid = None
    plan.warnings.extend(_placeholder_warnings(snapshot))
    plan.warnings.extend(_cuda_table_behind(snapshot))
    return plan


def _placeholder_warnings(snapshot: NodeSnapshot) -> list[ParseIssue]:
    found = []
    for snap in snapshot.gpus:
        if snap.uuid and clean_uuid(snap.uuid) is None:
            found.append(
                ParseIssue(
                    f"GPU {snap.index}: UUID {snap.uuid} is a masked placeholder; "
                    "stored as unknown",
                    field="uuid",
                    node=snapshot.hostname,
                )
            )
        masked = [m.uuid for m in snap.mig_devices if m.uuid and clean_uuid(m.uuid) is None]
        if masked:
            found.append(
                ParseIssue(
                    f"GPU {snap.index}: {len(masked)} MIG device UUID(s) are placeholders, "
                    f"masked or numbered, not issued by NVML ({masked[0]}…); stored as unknown",
                    field="uuid",
                    node=snapshot.hostname,
                )
            )
    return found


def _cuda_table_behind(snapshot: NodeSnapshot) -> list[ParseIssue]:
    """A warning when the node reports a CUDA version newer than the portal's CUDA table gives
    its driver (NVIDIA's release notes, ``catalogue/cuda_drivers.json``): the table is out of
    date, and the driver group shows the older figure until it is updated."""
    beyond = cuda_beyond_table(snapshot.driver_version, snapshot.cuda_version, cuda_driver_table())
    if beyond is None:
        return []
    reported, known = beyond
    table = "no CUDA version" if known is None else f"CUDA {known[0]}.{known[1]}"
    return [
        ParseIssue(
            f"driver {snapshot.driver_version} reports CUDA {reported[0]}.{reported[1]}, newer "
            f"than the portal's CUDA table knows for it ({table}): the table "
            "(pools/inventory/catalogue/cuda_drivers.json) needs NVIDIA's newer release notes; "
            "until then its driver group shows the older figure",
            field="cuda_version",
            node=snapshot.hostname,
        )
    ]


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


def _apply_node_fields(node: Node, snapshot: NodeSnapshot, *, run: ImportRun) -> None:
    node.last_source = str(run.source)
    node.last_seen_at = run.now
    node.updated_at = run.now
    _apply_node_placement(node, snapshot, run=run)
    _apply_node_reported(node, snapshot, run=run)


def _apply_node_placement(node: Node, snapshot: NodeSnapshot, *, run: ImportRun) -> None:
    """Pool, scheduler (of the source, else the pool's for a node without one) and state."""
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


def _apply_node_reported(node: Node, snapshot: NodeSnapshot, *, run: ImportRun) -> None:
    """What the source reported (driver, CUDA, partitions, labels, replicas, allocated cards,
    NVLink domains); a value it did not report keeps the stored one."""
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


def _plan_gpus(
    plan: NodePlan,
    existing: list[Gpu],
    snapshot: NodeSnapshot,
    run: ImportRun,
    mig_rows: dict[int, list[tuple]],
) -> None:
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
        uuid = clean_uuid(snap.uuid)
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
        rows = _mig_device_rows(snap)
        current = sorted(mig_rows.get(gpu.pk, [])) if gpu.pk else []
        if rows != current and (rows or snap.mig_mode is False):
            plan.mig.append((gpu, rows))
    plan.gone_gpu_ids = [g.pk for g in existing if g.pk not in kept]
    _renumber_clashes(plan.new_gpus, taken={g.index for g in existing if g.pk in kept})


def _mig_device_rows(snap: GpuSnapshot) -> list[tuple]:
    """The snapshot's MIG devices as sorted rows ``(index, uuid, profile, GPU instance id,
    compute instance id, memory MiB, GRES type)``, missing text as ``""``: the form the stored
    rows are compared in."""
    return sorted(
        (
            m.index,
            clean_uuid(m.uuid) or "",
            m.profile or "",
            m.gpu_instance_id,
            m.compute_instance_id,
            m.memory_total_mib,
            m.gres_type or "",
        )
        for m in snap.mig_devices
    )


def _apply_gpu_fields(
    gpu: Gpu, snap: GpuSnapshot, *, index: int, uuid: str | None, plan: NodePlan, run: ImportRun
) -> bool:
    """Set on ``gpu`` what ``snap`` reports of it (at ``index``, with the cleaned ``uuid``):
    values not reported (``None``) are left alone, the model resolves through the run's
    resolver (an unrecognised name is warned on the ``plan``), a re-indexed row is listed in
    ``plan.reindexed``. Returns whether any field changed (then ``last_seen_at`` is the run's
    ``now``)."""
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
    if snap.model_name and found.gpu_model is None:
        plan.warnings.append(_unrecognised_model(snap.model_name, found, index, plan))
    touched = _apply_model(gpu, snap.model_name, found) or touched
    health = str(snap.health)
    if health != GpuHealth.UNKNOWN and gpu.health != health:
        gpu.health = health
        touched = True
    if touched:
        gpu.last_seen_at = run.now
    return touched


def _unrecognised_model(name: str, found: ResolvedModel, index: int, plan: NodePlan) -> ParseIssue:
    """The warning that GPU ``index`` of ``plan``'s node reports a model ``name`` the resolver
    did not recognise (``found``: its match, with no model): ambiguous among its candidates
    (listed for an admin to map) or unrecognised, with the resolver's reason."""
    listed = (
        f"ambiguous, could be {', '.join(found.candidates)} ({found.reason}); "
        "listed for an admin to map"
        if found.candidates
        else f"{found.reason}; listed as unrecognised"
    )
    return ParseIssue(
        f"GPU {index}: model {name!r} {listed}", field="model", node=plan.node.hostname
    )


def _apply_model(gpu: Gpu, name: str | None, found: ResolvedModel) -> bool:
    """Set ``gpu``'s model from the reported model ``name`` and its resolver match ``found``;
    returns whether anything changed. A recognised card keeps its name unless a source reports
    a different model (a card swap); an unrecognised name never replaces a recognised one; a
    missing or truncated name changes nothing."""
    if not name or is_truncated_name(name):
        return False
    model = found.gpu_model
    if model is not None and gpu.gpu_model_id != model.pk:
        gpu.raw_model_name, gpu.gpu_model = name[:120], model
        gpu.model_candidates = []
        return True
    if model is None and gpu.gpu_model_id is None:
        candidates = list(found.candidates)
        if gpu.raw_model_name != name or gpu.model_candidates != candidates:
            gpu.raw_model_name, gpu.model_candidates = name[:120], candidates
            return True
    return False


def _renumber_clashes(gpus: list[Gpu], *, taken: set[int]) -> None:
    seen = set(taken)
    for gpu in gpus:
        while gpu.index in seen:
            gpu.index += 1
        seen.add(gpu.index)
