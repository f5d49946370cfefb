"""Plain, frozen data shapes that parsers and adapters return.

Everything here is a snapshot of what a source reported, before the portal maps it onto its
own catalogue. ``None`` always means "the source did not say" (unknown), never zero.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

# Most cards one node may report: 64, well above the densest servers sold (an HGX board holds
# 8, PCIe chassis 10 to 20). More is a corrupt GRES ("gpu:4G"), label or capture, not hardware;
# every parser and the importer refuse such a node rather than write its cards.
MAX_GPUS_PER_NODE = 64


class InventorySource(StrEnum):
    """Where an inventory snapshot came from."""

    NVIDIA_SMI = "nvidia-smi"
    SLURM = "slurm"
    KUBERNETES = "kubernetes"


class NodeState(StrEnum):
    """Scheduler-neutral node state (Slurm ``idle/mixed/alloc`` are all ``up``)."""

    UP = "up"
    DRAIN = "drain"
    DOWN = "down"
    MAINTENANCE = "maintenance"


class GpuHealth(StrEnum):
    """Health of one card as far as the source tells."""

    OK = "ok"
    ERROR = "error"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ParseIssue:
    """One thing a parser could not read.

    ``line`` is 1-based in the input text when the input is text; ``field`` names the column,
    JSON path or XML element. ``node`` is the host the issue belongs to when known.
    """

    message: str
    line: int | None = None
    field: str | None = None
    node: str | None = None

    def __str__(self) -> str:
        where = []
        if self.node:
            where.append(f"node {self.node}")
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.field:
            where.append(f"field {self.field}")
        return f"{', '.join(where)}: {self.message}" if where else self.message


@dataclass(frozen=True)
class MigDeviceSnapshot:
    """A MIG instance under its parent GPU (``nvidia-smi -L`` / ``-q``).

    ``profile`` is NVIDIA's profile name such as ``3g.40gb``; ``memory_total_mib`` is MiB.
    """

    index: int
    uuid: str | None = None
    profile: str | None = None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    memory_total_mib: int | None = None
    # Slurm: the GRES type the slice is counted under (``1g.10gb``, AutoDetect's
    # ``nvidia_a100_80gb_pcie_1g.10gb``), which provisioning caps; None elsewhere.
    gres_type: str | None = None


@dataclass(frozen=True)
class GpuSnapshot:
    """One physical card as reported by a source.

    ``model_name`` is the raw string exactly as the source printed it (for example
    ``"NVIDIA H100 80GB HBM3"``, Slurm GRES type ``"a100"`` or Kubernetes label
    ``"NVIDIA-A100-SXM4-80GB"``), mapped to the catalogue later. ``memory_total_mib`` is MiB
    (nvidia-smi's and the Kubernetes ``nvidia.com/gpu.memory`` label's unit). ``mig_mode`` is
    ``True``/``False`` or ``None`` when not reported / not supported.
    """

    index: int | None
    model_name: str | None
    uuid: str | None = None
    serial: str | None = None
    pci_bus_id: str | None = None
    memory_total_mib: int | None = None
    mig_mode: bool | None = None
    mig_devices: tuple[MigDeviceSnapshot, ...] = ()
    # nvidia-smi's 32-bit PCI id as printed (``"0x233010DE"``: device 0x2330, vendor 0x10DE).
    pci_device_id: str | None = None
    health: GpuHealth = GpuHealth.UNKNOWN
    utilization_gpu_percent: float | None = None
    memory_used_mib: int | None = None
    power_draw_w: float | None = None


@dataclass(frozen=True)
class NodeSnapshot:
    """One host and its GPUs as one source saw it.

    ``driver_version`` is the raw NVIDIA driver string (``"535.129.03"``); ``cuda_version`` is
    the highest CUDA version the driver supports as printed by nvidia-smi (``"12.2"``), not the
    installed toolkit. ``partitions`` are Slurm partitions; ``labels`` Kubernetes node labels.
    ``gpu_replicas`` is the Kubernetes time-slicing factor (``nvidia.com/gpu.replicas``) when >1.
    """

    hostname: str
    source: InventorySource
    gpus: tuple[GpuSnapshot, ...] = ()
    driver_version: str | None = None
    cuda_version: str | None = None
    state: NodeState | None = None
    state_reason: str | None = None
    partitions: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    gpu_replicas: int | None = None
    # Kubernetes MIG "single" strategy: the node publishes slices, not cards (see MigSlices).
    mig_single: MigSlices | None = None
    # True when the source could not tell the node's cards: an importer keeps those it has.
    gpus_unknown: bool = False
    # Slurm: cards allocated to jobs now, from the node's GRES-used field (slurmctld keeps it
    # whatever AccountingStorageTRES says); None when the source does not say.
    gpus_allocated: int | None = None
    # NVLink/NVSwitch domains (GPU indices joined by NVLink), from nvidia-smi topo -m / nvlink
    # -s; None when the source does not say (never "all joined").
    nvlink_domains: tuple[tuple[int, ...], ...] | None = None


@dataclass(frozen=True)
class MigSlices:
    """What a Kubernetes node under MIG strategy *single* publishes instead of its cards.

    GPU Feature Discovery then overwrites ``nvidia.com/gpu.count`` / ``.memory`` / ``.product``
    with the slices' values (``internal/lm/mig-strategy.go``): ``count`` slices of ``profile``
    (``"1g.10gb"``), ``memory_mib`` each, cut from cards of ``base_model`` (the product label
    without ``-MIG-<profile>``). The number of physical cards is not on the node; the importer
    derives it from the card's memory (:func:`scheduler_adapters.kubernetes_nodes.mig_per_card`).
    """

    profile: str
    count: int
    memory_mib: int | None
    base_model: str


@dataclass(frozen=True)
class ParseResult:
    """What a parser returns: every node it could read, and every issue it met."""

    nodes: tuple[NodeSnapshot, ...] = ()
    issues: tuple[ParseIssue, ...] = ()


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


@dataclass(frozen=True)
class KueueCohort:
    """The team's ClusterQueue in a pool's Kueue cohort (elastic allocations, issue #19).

    ``name``: the ``cohortName``. ``borrowing``: per GPU product, the cards the team may borrow
    from the cohort (its elastic ceilings less their floors); that product's ``nominalQuota``
    is its quota less them, its ``borrowingLimit`` them. Every resource gets
    ``lendingLimit: 0``: the team's guaranteed cards are never lent to the cohort."""

    name: str
    borrowing: Mapping[str, int]

    def __post_init__(self) -> None:
        if len(self.name) > 63 or not _DNS_LABEL.fullmatch(self.name):
            raise ValueError(f"cohort {self.name!r} is not a DNS-1123 label")
        for product, cards in self.borrowing.items():
            if isinstance(cards, bool) or not isinstance(cards, int) or cards < 0:
                raise ValueError(f"borrowing of {product!r} must be a whole number >= 0")
