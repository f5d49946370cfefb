"""GPUs published through Dynamic Resource Allocation: ``resource.k8s.io/v1`` ResourceSlices
(GA since Kubernetes 1.34) of NVIDIA's DRA driver, into the node snapshots of
:mod:`~scheduler_adapters.kubernetes_nodes`. No I/O.

What the driver publishes (NVIDIA/k8s-dra-driver-gpu, ``cmd/gpu-kubelet-plugin/deviceinfo.go``
``GpuInfo.GetDevice``/``Attributes`` and ``partitions.go`` ``fullGpuCapacity``, read at commit
22407113): one ResourceSlice pool per node (``spec.driver: gpu.nvidia.com``, ``spec.nodeName``),
one device per card named ``gpu-<minor>`` with the attributes ``type`` (string ``gpu``; MIG
devices are ``mig``, passthrough ``vfio``), ``uuid``, ``productName`` (NVML's name, e.g.
``NVIDIA A100-SXM4-80GB``), ``brand``, ``architecture``, ``cudaComputeCapability``,
``driverVersion`` and ``cudaDriverVersion`` (versions), and a PCI bus id attribute, with the
card's ``memory`` as a capacity (bytes as a quantity). Its DeviceClass ``gpu.nvidia.com``
selects ``device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type ==
'gpu'`` (``deployments/helm/.../deviceclass-gpu.yaml``).

Rules (the ResourceSlice API, k8s.io/api resource/v1 ``ResourcePool``): only the slices of a
pool's highest ``generation`` count (older ones are being replaced); a card is one device of
type ``gpu``, counted once by its UUID however many slices repeat it. A node that also
advertises ``nvidia.com/gpu`` through the device plugin is the same cards seen twice: the DRA
devices, which name each card, replace the device plugin's count for that node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from scheduler_adapters.types import GpuSnapshot, ParseIssue, ParseResult
from scheduler_adapters.units import parse_k8s_quantity

DRA_API_VERSION = "resource.k8s.io/v1"
NVIDIA_GPU_DRIVER = "gpu.nvidia.com"
GPU_DEVICE_TYPE = "gpu"
_MIB = 1024 * 1024
# No card comes near this: the largest NVIDIA card memory is 288 GB HBM3e (B300, NVIDIA's
# Blackwell Ultra datasheet); a device memory above 16 TiB is a misread quantity, not a card.
MAX_CARD_MEMORY_MIB = 16 * 1024 * 1024


def dra_cards(
    slices: Iterable[Mapping[str, Any]], issues: list[ParseIssue] | None = None
) -> tuple[dict[str, list[GpuSnapshot]], dict]:
    """Per node name, the cards NVIDIA's DRA driver publishes, in device-name order, and per
    node the driver version its cards report (``None`` when they disagree or say none).

    A device ``memory`` capacity that is not above 0, above :data:`MAX_CARD_MEMORY_MIB` or not a
    quantity leaves that card's memory unknown (``None``); the other cards are read, and
    ``issues`` (when given) gets a :class:`ParseIssue` naming the node, slice and device.
    """
    newest: dict[tuple[str, str], int] = {}
    kept: list[Mapping[str, Any]] = []
    for item in slices:
        spec = item.get("spec") or {}
        if spec.get("driver") != NVIDIA_GPU_DRIVER or not spec.get("nodeName"):
            continue
        pool = spec.get("pool") or {}
        key = (spec["nodeName"], str(pool.get("name")))
        generation = int(pool.get("generation") or 0)
        newest[key] = max(newest.get(key, generation), generation)
        kept.append(item)
    cards: dict[str, dict[str, GpuSnapshot]] = {}
    drivers: dict[str, set[str | None]] = {}
    for item in kept:
        spec = item["spec"]
        pool = spec.get("pool") or {}
        if int(pool.get("generation") or 0) != newest[(spec["nodeName"], str(pool.get("name")))]:
            continue
        for device in spec.get("devices") or []:
            attributes = device.get("attributes") or {}
            if _value(attributes, "type") != GPU_DEVICE_TYPE:
                continue
            uuid = _value(attributes, "uuid")
            node_cards = cards.setdefault(spec["nodeName"], {})
            key = uuid or f"{pool.get('name')}/{device.get('name')}"
            if key not in node_cards:
                node_cards[key] = _card(device, item, issues)
            drivers.setdefault(spec["nodeName"], set()).add(_value(attributes, "driverVersion"))
    by_node = {
        node: sorted(found.values(), key=lambda gpu: (gpu.index is None, gpu.index or 0))
        for node, found in cards.items()
    }
    versions = {
        node: next(iter(seen)) if len(seen) == 1 else None for node, seen in drivers.items()
    }
    return by_node, versions


def with_dra_cards(result: ParseResult, slices: Iterable[Mapping[str, Any]]) -> ParseResult:
    """``result`` (from the Node objects) with each node's cards taken from its DRA devices
    when the driver publishes any (see the module docstring); an issue says so where the
    device plugin counted differently, and names DRA nodes that are not among the Nodes."""
    issues = list(result.issues)
    by_node, drivers = dra_cards(slices, issues)
    nodes = []
    for node in result.nodes:
        gpus = by_node.pop(node.hostname, None)
        if gpus is None:
            nodes.append(node)
            continue
        if node.gpus and len(node.gpus) != len(gpus):
            issues.append(
                ParseIssue(
                    f"the device plugin counts {len(node.gpus)} nvidia.com/gpu, the DRA driver "
                    f"publishes {len(gpus)} GPUs; the DRA devices are used",
                    node=node.hostname,
                )
            )
        nodes.append(
            dataclasses.replace(
                node,
                gpus=tuple(gpus),
                driver_version=drivers.get(node.hostname) or node.driver_version,
                gpus_unknown=False,
            )
        )
    for hostname in sorted(by_node):
        issues.append(
            ParseIssue(
                "ResourceSlices publish GPUs for a node the cluster does not list",
                node=hostname,
            )
        )
    return ParseResult(nodes=tuple(nodes), issues=tuple(issues))


def _card(
    device: Mapping[str, Any], item: Mapping[str, Any], issues: list[ParseIssue] | None
) -> GpuSnapshot:
    """One card from ``device`` of the ResourceSlice ``item``."""
    attributes = device.get("attributes") or {}
    name = str(device.get("name") or "")
    minor = name.removeprefix("gpu-")
    return GpuSnapshot(
        index=int(minor) if minor.isdigit() else None,
        model_name=_value(attributes, "productName"),
        uuid=_value(attributes, "uuid"),
        pci_bus_id=_value(attributes, "resource.kubernetes.io/pciBusID"),
        memory_total_mib=_memory_mib(device, item, issues),
    )


def _memory_mib(
    device: Mapping[str, Any], item: Mapping[str, Any], issues: list[ParseIssue] | None
) -> int | None:
    """The device's ``capacity.memory`` (a quantity of bytes) in whole MiB, ``None`` when it
    says none or none a card can have (reported to ``issues``)."""
    memory = ((device.get("capacity") or {}).get("memory") or {}).get("value")
    if memory is None:
        return None
    try:
        value = parse_k8s_quantity(str(memory))
    except ValueError as exc:
        problem = str(exc)
    else:
        # compare before dividing: 1e309 // 2**20 overflows Decimal's 28 digits
        if 0 < value <= MAX_CARD_MEMORY_MIB * _MIB:
            return int(value // _MIB)
        problem = f"memory {memory!r} is no card's memory (above 0, at most 16 TiB)"
    if issues is not None:
        slice_name = (item.get("metadata") or {}).get("name")
        issues.append(
            ParseIssue(
                f"ResourceSlice {slice_name} device {device.get('name')}: {problem}; "
                "its memory is unknown",
                field=f"devices[{device.get('name')}].capacity.memory",
                node=item["spec"]["nodeName"],
            )
        )
    return None


def _value(attributes: Mapping[str, Any], name: str) -> Any:
    """A DeviceAttribute's value (``{"string": ...}``, ``{"version": ...}``, ``{"int": ...}``
    or ``{"bool": ...}``), under its bare name or the driver's qualified one."""
    attribute = attributes.get(name) or attributes.get(f"{NVIDIA_GPU_DRIVER}/{name}")
    if not isinstance(attribute, Mapping):
        return None
    for kind in ("string", "version", "int", "bool"):
        if kind in attribute:
            return attribute[kind]
    return None
