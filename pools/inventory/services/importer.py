"""Upsert parsed inventory snapshots into nodes and GPUs, one transaction per node.

The parsers (:mod:`pools.inventory.nvidia_smi`, :mod:`scheduler_adapters.slurm.nodes`,
:mod:`scheduler_adapters.kubernetes_nodes`) turn text into :class:`NodeSnapshot` objects
(files are read by :mod:`pools.inventory.services.import_files`); this module writes them, as
:mod:`pools.inventory.services.import_plan` plans each node. A node either imports whole or not
at all, and the report says which nodes were created, updated, unchanged or rejected, and why.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DatabaseError, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from pools.audit.models import AuditEvent
from pools.audit.services import audit_event_build
from pools.clusters.models import Cluster
from pools.common.validators import hostname_validator
from pools.inventory.bulk import bulk_update_rows
from pools.inventory.models import Gpu, InventoryImport, MigDevice, Node, Pool, node_cluster_id
from pools.inventory.services.gpu_models import GpuModelResolver
from pools.inventory.services.import_plan import (
    MIG_ROW_FIELDS,
    NODE_FIELDS,
    ImportRun,
    NodePlan,
    clean_uuid,
    plan_node,
)
from scheduler_adapters.kubernetes_nodes import mig_per_card
from scheduler_adapters.types import (
    MAX_GPUS_PER_NODE,
    GpuSnapshot,
    InventorySource,
    MigDeviceSnapshot,
    NodeSnapshot,
    ParseIssue,
    ParseResult,
)


@dataclass
class ImportReport:
    """Outcome of one import: hostnames per outcome, plus every issue and warning.

    ``issues`` are reasons something was not imported (a line or a whole node); ``warnings``
    are things imported with a caveat (a masked UUID, an unrecognised model);
    ``overcommitted``: each pool × GPU model whose granted windows now hold more cards than
    usable (``settings.INVENTORY_OVERCOMMIT_CHECK``), with ``text`` and the allocation ids.
    """

    source: str
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    issues: list[ParseIssue] = field(default_factory=list)
    warnings: list[ParseIssue] = field(default_factory=list)
    gpus_seen: int = 0
    changes: dict[str, list[str]] = field(default_factory=dict)
    # host name -> slug of the cluster of the node imported under it (nodes of a cluster only;
    # names are unique per cluster, so the report's links name it)
    node_clusters: dict[str, str] = field(default_factory=dict)
    record_id: int | None = None
    overcommitted: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when everything in the input was imported."""
        return not self.issues and not self.rejected

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ImportReport:
        """The report :meth:`as_dict` wrote (a stored background import's)."""
        return cls(
            source=data["source"],
            created=list(data["created"]),
            updated=list(data["updated"]),
            unchanged=list(data["unchanged"]),
            rejected=list(data["rejected"]),
            issues=[ParseIssue(**i) for i in data["issues"]],
            warnings=[ParseIssue(**w) for w in data["warnings"]],
            gpus_seen=data["gpus_seen"],
            changes=dict(data.get("changes", {})),
            node_clusters=dict(data.get("node_clusters", {})),
            record_id=data["import_id"],
            overcommitted=list(data["overcommitted"]),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "ok": self.ok,
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "rejected": self.rejected,
            "gpus_seen": self.gpus_seen,
            "changes": self.changes,
            "node_clusters": self.node_clusters,
            "issues": [_issue_dict(i) for i in self.issues],
            "warnings": [_issue_dict(i) for i in self.warnings],
            "overcommitted": self.overcommitted,
            "import_id": self.record_id,
        }


def _issue_dict(issue: ParseIssue) -> dict[str, Any]:
    return {"message": issue.message, "line": issue.line, "field": issue.field, "node": issue.node}


CHUNK_SIZE = 250


_PARKING_INDEX = 32767  # largest PositiveSmallIntegerField value on every backend


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


def inventory_import(
    *,
    result: ParseResult,
    source: InventorySource,
    pool: Pool | None = None,
    within: Sequence[Pool] | None = None,
    cluster: Cluster | None = None,
    actor: Any | None = None,
    filename: str = "",
    on_progress: Callable[[int, int], None] | None = None,
) -> ImportReport:
    """Write every node of ``result``; return the report and store it as an InventoryImport.
    ``on_progress(done, total)`` is called after each chunk of nodes (a background import's
    progress).

    A node is rejected, and nothing of it written, when the parser could not read it (an issue
    names it, but no snapshot does), when its host name is invalid, when it
    appears twice in the input, when two of its GPUs share a UUID, or when a UUID it reports is
    already held by a GPU of another node (a conflict to resolve by hand, never a silent move).
    Nodes are written in chunks of ``CHUNK_SIZE``, each chunk in one transaction with its node
    rows locked; if the database refuses a chunk, its nodes are retried one transaction each,
    so one bad node never takes others down and no node is ever half written. ``pool``, when
    given, places every node in that pool; otherwise Slurm nodes join the pool whose partition
    they are in and Kubernetes nodes the pool whose node selector their labels match — among
    ``within`` when given (one cluster's pools, the import of ``cluster``).

    Nodes are the nodes of one cluster (a host name is unique per cluster: two clusters may
    name nodes alike, and one cluster's import never takes or rewrites the other's): of
    ``pool``'s cluster when a pool is given, of ``cluster`` with ``within`` (``None``: the
    environment's, :func:`~pools.inventory.models.node_cluster_id`). A file imported without a
    pool updates the one node of each name in any cluster (a new one joins no cluster); a name
    several clusters have is rejected, naming them (import it with its pool).
    """
    report = ImportReport(source=str(source), issues=list(result.issues))
    # a node the parser could not read (its GRES, say) is named by its issues: rejected too
    parsed = {node.hostname for node in result.nodes}
    report.rejected.extend(
        sorted({i.node for i in result.issues if i.node and i.node not in parsed})
    )
    run = ImportRun(
        source=InventorySource(source),
        resolver=GpuModelResolver.load(),
        now=timezone.now(),
        actor=actor,
        pool=pool,
        pools=_candidate_pools(pool, within),
        cluster_id=node_cluster_id(pool.cluster if pool is not None else cluster),
        any_cluster=pool is None and within is None,
    )
    snapshots = _screen([_mig_single_cards(n, run, report) for n in result.nodes], report)
    for start in range(0, len(snapshots), CHUNK_SIZE):
        _write_chunk_or_nodes(snapshots[start : start + CHUNK_SIZE], run, report)
        if on_progress is not None:
            on_progress(min(start + CHUNK_SIZE, len(snapshots)), len(snapshots))
    report.record_id = _import_record(report, filename=filename, actor=actor).pk
    if report.created or report.updated or report.unchanged:  # the fleet as it now stands
        check = import_string(settings.INVENTORY_OVERCOMMIT_CHECK)
        report.overcommitted = [{"text": str(o), **o.as_dict()} for o in check(now=run.now)]
    return report


def _write_chunk_or_nodes(chunk: list[NodeSnapshot], run: ImportRun, report: ImportReport) -> None:
    """Write ``chunk`` in one transaction; if the database refuses it, each of its nodes in a
    transaction of its own, a node refused again rejected with the database's message. The
    outcome goes into ``report``."""
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


def _import_record(report: ImportReport, *, filename: str, actor: Any) -> InventoryImport:
    """Store ``report`` as an :class:`InventoryImport` (its counts and issues; the file name
    cut to 255 characters; ``actor`` only when authenticated) and return it."""
    return InventoryImport.objects.create(
        source=report.source,
        filename=filename[:255],
        actor=actor if getattr(actor, "is_authenticated", False) else None,
        nodes_created=len(report.created),
        nodes_updated=len(report.updated),
        nodes_unchanged=len(report.unchanged),
        nodes_rejected=len(report.rejected),
        gpus_seen=report.gpus_seen,
        errors=[_issue_dict(i) for i in report.issues],
    )


def _candidate_pools(pool: Pool | None, within: Sequence[Pool] | None) -> list[Pool]:
    if pool is not None:
        return []
    return list(Pool.objects.all()) if within is None else list(within)


def _record(report: ImportReport, outcome: tuple[list, list]) -> None:
    plans, rejected = outcome
    for hostname, issue in rejected:
        report.rejected.append(hostname)
        report.issues.append(issue)
    cluster_ids = {plan.node.cluster_id for plan in plans} - {None}
    slugs = dict(Cluster.objects.filter(pk__in=cluster_ids).values_list("pk", "slug"))
    for plan in plans:
        getattr(report, plan.outcome).append(plan.node.hostname)
        if plan.node.cluster_id is not None:
            report.node_clusters[plan.node.hostname] = slugs[plan.node.cluster_id]
        if plan.outcome == "updated":
            report.changes[plan.node.hostname] = plan.changes
        report.gpus_seen += len(plan.new_gpus) + len(plan.changed_gpus) + len(plan.seen_gpu_ids)
        report.warnings.extend(plan.warnings)


def _mig_single_cards(snapshot: NodeSnapshot, run: ImportRun, report: ImportReport) -> NodeSnapshot:
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
    uuids = [u for g in snapshot.gpus if (u := clean_uuid(g.uuid))]
    duplicate = next((u for u in uuids if uuids.count(u) > 1), None)
    if duplicate:
        return "uuid", f"GPU UUID {duplicate} appears twice on this node"
    return None


def _locked_nodes(hosts: list[str], run: ImportRun) -> dict[str, list[Node]]:
    """The stored nodes named ``hosts`` (of the run's cluster unless it takes any cluster),
    locked, by name, each name's nodes by id (several: the name is in several clusters)."""
    found = Node.objects.select_for_update().filter(hostname__in=hosts).order_by("pk")
    if not run.any_cluster:
        found = found.filter(cluster_id=run.cluster_id)
    same_name: dict[str, list[Node]] = defaultdict(list)
    for node in found:
        same_name[node.hostname].append(node)
    return same_name


def _stored_cards(
    nodes: list[Node],
) -> tuple[dict[int, list[Gpu]], dict[int, list[tuple]]]:
    """``(GPUs by node id, MIG device rows by GPU id)`` stored for ``nodes``; a row holds the
    :data:`MIG_ROW_FIELDS` values, as :func:`plan_node` compares them."""
    gpus_by_node: dict[int, list[Gpu]] = {n.pk: [] for n in nodes}
    for gpu in Gpu.objects.filter(node__in=nodes):
        gpus_by_node[gpu.node_id].append(gpu)
    mig_rows: dict[int, list[tuple]] = defaultdict(list)
    for gpu_id, *row in MigDevice.objects.filter(gpu__node__in=nodes).values_list(
        "gpu_id", *MIG_ROW_FIELDS
    ):
        mig_rows[gpu_id].append(tuple(row))
    return gpus_by_node, mig_rows


def _uuid_holders(snapshots: list[NodeSnapshot]) -> dict[str, tuple[int, str]]:
    """A card's UUID -> the node holding it, ``(id, name)``, for the UUIDs the ``snapshots``
    report: a node of another cluster may share the name, so the id decides."""
    wanted = {u for s in snapshots for g in s.gpus if (u := clean_uuid(g.uuid))}
    if not wanted:
        return {}
    return {
        uuid: (node_id, hostname)
        for uuid, node_id, hostname in Gpu.objects.filter(uuid__in=wanted).values_list(
            "uuid", "node_id", "node__hostname"
        )
    }


def _uuid_held(snapshot: NodeSnapshot, uuid: str, holder: str) -> ParseIssue:
    """The issue rejecting ``snapshot``'s node: its card ``uuid`` is held by node ``holder``."""
    return ParseIssue(
        f"GPU UUID {uuid} is already held by node {holder}; not moved "
        "(resolve by hand: remove the card from the other node first)",
        field="uuid",
        node=snapshot.hostname,
    )


def _write_chunk(snapshots: list[NodeSnapshot], run: ImportRun) -> tuple[list[NodePlan], list]:
    """Plan and write a chunk of nodes inside the caller's transaction."""
    same_name = _locked_nodes([s.hostname for s in snapshots], run)
    nodes = {name: named[0] for name, named in same_name.items() if len(named) == 1}
    gpus_by_node, mig_rows = _stored_cards(list(nodes.values()))
    held = _uuid_holders(snapshots)
    plans: list[NodePlan] = []
    rejected: list[tuple[str, ParseIssue]] = []
    for snapshot in snapshots:
        if len(snapshot.gpus) > MAX_GPUS_PER_NODE:
            rejected.append((snapshot.hostname, _too_many_cards(snapshot)))
            continue
        if len(same_name.get(snapshot.hostname, ())) > 1:
            rejected.append((snapshot.hostname, _in_several_clusters(same_name[snapshot.hostname])))
            continue
        node = nodes.get(snapshot.hostname)
        mine = (node.pk if node else None, snapshot.hostname)
        uuids = [u for g in snapshot.gpus if (u := clean_uuid(g.uuid))]
        clash = next((u for u in uuids if held.get(u, mine) != mine), None)
        if clash:
            rejected.append((snapshot.hostname, _uuid_held(snapshot, clash, held[clash][1])))
            continue
        held.update(dict.fromkeys(uuids, mine))
        existing = gpus_by_node.get(node.pk, []) if node else []
        plans.append(plan_node(node, existing, snapshot, run, mig_rows))
    _drop_duplicate_mig_uuids(plans)
    _write_plans(plans, run)
    return plans, rejected


def _drop_duplicate_mig_uuids(plans: list[NodePlan]) -> None:
    """A MIG UUID names one slice of one card: one reported by two cards of this chunk, or
    already stored for a card not rewritten here, is stored as unknown on the card being
    written, with a warning (as placeholders are). One query."""
    reporters: dict[str, list[Gpu]] = defaultdict(list)
    for plan in plans:
        for gpu, rows in plan.mig:
            for row in rows:
                if row[1]:
                    reporters[row[1]].append(gpu)
    if not reporters:
        return
    rewritten = [gpu.pk for plan in plans for gpu, _ in plan.mig if gpu.pk]
    elsewhere = set(
        MigDevice.objects.filter(uuid__in=list(reporters))
        .exclude(gpu_id__in=rewritten)
        .values_list("uuid", flat=True)
    )
    twice = {u for u, gpus in reporters.items() if len(gpus) > 1 or u in elsewhere}
    if not twice:
        return
    for plan in plans:
        kept = []
        for gpu, rows in plan.mig:
            dropped = [row[1] for row in rows if row[1] in twice]
            if dropped:
                plan.warnings.append(
                    ParseIssue(
                        f"GPU {gpu.index}: {len(dropped)} MIG device UUID(s) are also reported "
                        f"by another card ({dropped[0]}…); stored as unknown",
                        field="uuid",
                        node=plan.node.hostname,
                    )
                )
                rows = [(r[0], "" if r[1] in twice else r[1], *r[2:]) for r in rows]
            kept.append((gpu, rows))
        plan.mig = kept


def _in_several_clusters(nodes: list[Node]) -> ParseIssue:
    where = ", ".join(
        sorted(
            Cluster.objects.filter(pk=n.cluster_id).values_list("slug", flat=True).first()
            or "the environment's"
            for n in nodes
        )
    )
    return ParseIssue(
        f"clusters {where} each have a node named {nodes[0].hostname}: import it with its "
        "pool, which names the cluster",
        field="hostname",
        node=nodes[0].hostname,
    )


def _too_many_cards(snapshot: NodeSnapshot) -> ParseIssue:
    return ParseIssue(
        f"{len(snapshot.gpus):,} GPUs on one node: at most {MAX_GPUS_PER_NODE} are taken "
        "(a corrupt count, never imported)",
        field="gpus",
        node=snapshot.hostname,
    )


def _write_plans(plans: list[NodePlan], run: ImportRun) -> None:
    """Apply every plan with bulk statements; the caller holds the transaction."""
    _write_nodes(plans, run)
    _write_gpus(plans, run)
    _write_mig_devices(plans)
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


def _write_nodes(plans: list[NodePlan], run: ImportRun) -> None:
    """Create the plans' new nodes, update the changed ones and stamp the unchanged ones seen
    (``last_seen_at`` / ``last_source`` of the run)."""
    Node.objects.bulk_create([p.node for p in plans if p.created])
    changed_nodes = [p.node for p in plans if p.node_changed and not p.created]
    if changed_nodes:
        bulk_update_rows(
            changed_nodes,
            [f.removesuffix("_id") for f in NODE_FIELDS]
            + ["last_source", "last_seen_at", "updated_at"],
        )
    seen_nodes = [p.node.pk for p in plans if not p.node_changed]
    if seen_nodes:
        Node.objects.filter(pk__in=seen_nodes).update(
            last_seen_at=run.now, last_source=str(run.source)
        )


def _write_gpus(plans: list[NodePlan], run: ImportRun) -> None:
    """Delete the plans' gone GPUs, move the re-indexed ones (through parking indices), update
    the changed ones, create the new ones and stamp the unchanged ones seen at the run's
    ``now``, in that order."""
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


def _write_mig_devices(plans: list[NodePlan]) -> None:
    """Replace the MIG devices of every GPU the plans list with MIG rows (``(index, uuid,
    profile, GPU instance, compute instance, memory MiB, GRES type)``; none: all removed)."""
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
                gres_type=gres,
            )
            for gpu, rows in mig
            for i, u, prof, gi, ci, mem, gres in rows
        )
