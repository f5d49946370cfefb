"""Inventory files into the importer: decode, check and parse one file per source (nvidia-smi
with its topology sections, slurmrestd nodes JSON, Kubernetes Nodes), then import one file or
many as one run (:func:`pools.inventory.services.importer.inventory_import`). The page, the API
and ``manage.py import_inventory`` all come in here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.conf import settings

from pools.common.errors import InvalidInput, UnsupportedFormat, UploadTooLarge
from pools.inventory.models import Pool
from pools.inventory.nvidia_smi import parse_nvidia_smi
from pools.inventory.services.importer import ImportReport, inventory_import
from pools.inventory.topology import parse_topology
from scheduler_adapters.kubernetes_nodes import parse_kubernetes_nodes
from scheduler_adapters.slurm.nodes import parse_slurm_nodes, slurm_nodes_refusal
from scheduler_adapters.types import InventorySource, NodeSnapshot, ParseIssue, ParseResult


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
    number; the rest of the file is still read. Raises :class:`pools.common.errors.InvalidInput` for
    an unknown source, a missing ``node`` for nvidia-smi, a slurmrestd file of a data-parser
    version the reader does not know, an empty file, or one over
    ``INVENTORY_UPLOAD_MAX_BYTES`` (:class:`pools.common.errors.UploadTooLarge`).
    """
    source = _source(source)
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
        refusal = slurm_nodes_refusal(text)
        if refusal is not None:
            raise UnsupportedFormat(f"{label}: {refusal}", field="file")
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


def _source(source: InventorySource | str) -> InventorySource:
    """``source`` as an :class:`InventorySource`; :class:`InvalidInput` (field ``source``)
    naming the known ones otherwise."""
    try:
        return InventorySource(source)
    except ValueError:
        choices = ", ".join(s.value for s in InventorySource)
        raise InvalidInput(
            f"Unknown source {source!r}; use one of: {choices}.", field="source"
        ) from None


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
    unindexed = sum(gpu.index is None for gpu in snapshot.gpus)
    if unindexed:
        # the matrix names cards by index: a card without one cannot be placed in a domain
        issues.append(
            ParseIssue(
                f"topology names GPUs {sorted(host.gpus)} but the capture lists {unindexed} "
                f"card{'s' if unindexed > 1 else ''} without an index: NVLink domains not stored",
                node=snapshot.hostname,
            )
        )
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
    transaction. Raises :class:`InvalidInput` only for an unknown source or no files, and
    :class:`UnsupportedFormat` (nothing imported) for a file in a format version it cannot read.
    """
    source = _source(source)
    if not files:
        raise InvalidInput("No files to import.", field="files")
    nodes: list[NodeSnapshot] = []
    issues: list[ParseIssue] = []
    for filename, data, node in files:
        try:
            result = inventory_parse_file(data=data, source=source, node=node, filename=filename)
        except UnsupportedFormat:
            raise
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
