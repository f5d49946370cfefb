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

DeviceClasses (``resource.k8s.io/v1``, cluster-scoped) name the devices a claim may get: each
holds CEL ``selectors`` over ``device.driver`` and ``device.attributes[<domain>].<name>``, and
a claim's request names one class (``exactly.deviceClassName``) plus its own selectors.
:func:`product_selector` is the one place the two spellings of a GPU model meet: NVML's name,
which the driver publishes as ``productName`` (``NVIDIA A100-SXM4-80GB``), and GPU Feature
Discovery's ``nvidia.com/gpu.product`` label, NVML's name with each space as ``-``
(``NVIDIA-A100-SXM4-80GB``, see ``tests/fixtures/kubernetes/nodes.json`` beside the slices'
fixture), by which the portal keys quotas.
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


@dataclasses.dataclass(frozen=True)
class DeviceClassInfo:
    """One DeviceClass: its ``name``, the CEL expressions of its ``spec.selectors`` (all must
    hold for a device, in order) and ``spec.extendedResourceName`` (``None`` without one)."""

    name: str
    selectors: tuple[str, ...]
    extended_resource_name: str | None = None


def device_classes(items: Iterable[Mapping[str, Any]]) -> list[DeviceClassInfo]:
    """The DeviceClasses of a list response, by name; selectors that are not CEL are left out."""
    found = []
    for item in items:
        spec = item.get("spec") or {}
        expressions = tuple(
            str(selector["cel"]["expression"])
            for selector in spec.get("selectors") or []
            if isinstance(selector.get("cel"), Mapping) and "expression" in selector["cel"]
        )
        found.append(
            DeviceClassInfo(
                name=str((item.get("metadata") or {}).get("name")),
                selectors=expressions,
                extended_resource_name=spec.get("extendedResourceName"),
            )
        )
    return sorted(found, key=lambda info: info.name)


def dra_cards(slices: Iterable[Mapping[str, Any]]) -> tuple[dict[str, list[GpuSnapshot]], dict]:
    """Per node name, the cards NVIDIA's DRA driver publishes, in device-name order, and per
    node the driver version its cards report (``None`` when they disagree or say none)."""
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
            node_cards.setdefault(uuid or f"{pool.get('name')}/{device.get('name')}", _card(device))
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
    by_node, drivers = dra_cards(slices)
    issues = list(result.issues)
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


def _card(device: Mapping[str, Any]) -> GpuSnapshot:
    attributes = device.get("attributes") or {}
    name = str(device.get("name") or "")
    minor = name.removeprefix("gpu-")
    memory = ((device.get("capacity") or {}).get("memory") or {}).get("value")
    memory_mib: int | None = None
    if memory is not None:
        try:
            memory_mib = int(parse_k8s_quantity(str(memory)) // _MIB)
        except ValueError:
            memory_mib = None
    return GpuSnapshot(
        index=int(minor) if minor.isdigit() else None,
        model_name=_value(attributes, "productName"),
        uuid=_value(attributes, "uuid"),
        pci_bus_id=_value(attributes, "resource.kubernetes.io/pciBusID"),
        memory_total_mib=memory_mib,
    )


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
