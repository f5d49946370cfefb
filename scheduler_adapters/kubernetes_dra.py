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
import functools
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


@dataclasses.dataclass(frozen=True)
class DeviceClassInfo:
    """One DeviceClass: its ``name``, the CEL expressions of its ``spec.selectors`` (all must
    hold for a device), ``spec.extendedResourceName`` (``None`` without one) and ``products``:
    the GPU models (GFD labels, sorted) of the published cards it selects, ``None`` (unknown)
    when a selector could not be evaluated here for some card (see :func:`selects`)."""

    name: str
    selectors: tuple[str, ...]
    extended_resource_name: str | None = None
    products: tuple[str, ...] | None = ()


def device_classes(
    items: Iterable[Mapping[str, Any]], slices: Iterable[Mapping[str, Any]] = ()
) -> list[DeviceClassInfo]:
    """The DeviceClasses of a list response, by name, each with the models of the cards in
    ``slices`` (ResourceSlices, newest pool generation) that all its selectors select."""
    devices = [
        (item["spec"]["driver"], device)
        for item in _current_slices(slices)
        for device in item["spec"].get("devices") or []
        if _value(device.get("attributes") or {}, "type") == GPU_DEVICE_TYPE
    ]
    found = []
    for item in items:
        spec = item.get("spec") or {}
        expressions = tuple(
            str(selector["cel"]["expression"])
            for selector in spec.get("selectors") or []
            if isinstance(selector.get("cel"), Mapping) and "expression" in selector["cel"]
        )
        products: set[str] | None = set()
        for driver, device in devices:
            chosen = selects(expressions, driver, device)
            if chosen is None:
                products = None
                break
            name = _value(device.get("attributes") or {}, "productName")
            if chosen and name:
                products.add(gfd_label(str(name)))
        found.append(
            DeviceClassInfo(
                name=str((item.get("metadata") or {}).get("name")),
                selectors=expressions,
                extended_resource_name=spec.get("extendedResourceName"),
                products=None if products is None else tuple(sorted(products)),
            )
        )
    return sorted(found, key=lambda info: info.name)


def selects(expressions: Iterable[str], driver: str, device: Mapping[str, Any]) -> bool | None:
    """Whether every CEL selector in ``expressions`` holds for ``device`` (one entry of a
    ResourceSlice's ``spec.devices``, published by ``driver``), evaluated with cel-python on
    the variable the DRA API defines: ``device.driver``, ``device.attributes[<domain>]
    [<name>]`` (a bare attribute name is in the driver's domain) and ``device.capacity``
    likewise. ``None`` (unknown) when an expression does not evaluate here: cel-python lacks
    Kubernetes' CEL libraries (``semver()``, ``quantity()``, the strings extension), so
    versions and capacities are plain strings, and a missing attribute is an error as in
    Kubernetes."""
    import celpy  # imported on first use: 0.2 s of start-up no other path needs (issue 34)

    activation = {"device": celpy.json_to_cel(_cel_device(driver, device))}
    for expression in expressions:
        try:
            result = _program(expression).evaluate(activation)
        except (celpy.CELParseError, celpy.CELEvalError):
            return None
        if not isinstance(result, celpy.celtypes.BoolType):
            return None
        if not result:
            return False
    return True


@functools.lru_cache(maxsize=256)
def _program(expression: str) -> Any:
    """``expression`` compiled once (cel-python's parse is the costly part), reused per device."""
    import celpy

    environment = celpy.Environment()
    return environment.program(environment.compile(expression))


def gfd_label(product_name: str) -> str:
    """GPU Feature Discovery's ``nvidia.com/gpu.product`` label for NVML's product name, which
    NVIDIA's DRA driver publishes as ``productName``: each space becomes ``-``
    (``NVIDIA A100-SXM4-80GB`` -> ``NVIDIA-A100-SXM4-80GB``). A label is already its own."""
    return product_name.replace(" ", "-")


def product_names(slices: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """GFD label -> NVML product name of every GPU model NVIDIA's DRA driver publishes in
    ``slices`` (the inverse of :func:`gfd_label`, which cannot be undone from a label alone:
    ``-`` may have been a space or not)."""
    return {
        gfd_label(gpu.model_name): gpu.model_name
        for gpus in dra_cards(slices)[0].values()
        for gpu in gpus
        if gpu.model_name
    }


def product_selector(product_name: str) -> str:
    """The CEL selector that keeps a claim (or a DeviceClass) on one GPU model, for NVML's
    ``product_name`` as the driver publishes it, e.g. ``device.attributes["gpu.nvidia.com"]
    .productName == "NVIDIA A100-SXM4-80GB"`` (a CEL string literal, quotes escaped)."""
    literal = product_name.replace("\\", "\\\\").replace('"', '\\"')
    return f'device.attributes["{NVIDIA_GPU_DRIVER}"].productName == "{literal}"'


def dra_cards(
    slices: Iterable[Mapping[str, Any]], issues: list[ParseIssue] | None = None
) -> tuple[dict[str, list[GpuSnapshot]], dict]:
    """Per node name, the cards NVIDIA's DRA driver publishes, in device-name order, and per
    node the driver version its cards report (``None`` when they disagree or say none).

    A device ``memory`` capacity that is not above 0, above :data:`MAX_CARD_MEMORY_MIB` or not a
    quantity leaves that card's memory unknown (``None``); the other cards are read, and
    ``issues`` (when given) gets a :class:`ParseIssue` naming the node, slice and device.
    """
    cards: dict[str, dict[str, GpuSnapshot]] = {}
    drivers: dict[str, set[str | None]] = {}
    for item in _current_slices(slices):
        spec = item["spec"]
        pool = spec.get("pool") or {}
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


def claim_template(
    name: str, namespace: str, device_class: str, product_name: str
) -> dict[str, Any]:
    """A ``resource.k8s.io/v1`` ResourceClaimTemplate for one card of ``device_class`` whose
    ``productName`` is ``product_name`` (NVML's spelling), by :func:`product_selector`; a
    request's ``count`` defaults to 1 and its ``allocationMode`` to ``ExactCount`` (the
    ``DeviceRequest`` API), the only mode Kueue's DRA quota accounting supports."""
    return {
        "apiVersion": DRA_API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": device_class,
                                "selectors": [
                                    {"cel": {"expression": product_selector(product_name)}}
                                ],
                            },
                        }
                    ]
                }
            }
        },
    }


def _current_slices(slices: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """NVIDIA's driver's node-local ResourceSlices in their pool's newest generation."""
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
    return [
        item
        for item in kept
        if int((item["spec"].get("pool") or {}).get("generation") or 0)
        == newest[(item["spec"]["nodeName"], str((item["spec"].get("pool") or {}).get("name")))]
    ]


def _cel_device(driver: str, device: Mapping[str, Any]) -> dict[str, Any]:
    """``device`` as the DRA CEL variable: attributes and capacities by domain, then name."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, attribute in (device.get("attributes") or {}).items():
        domain, _, bare = name.rpartition("/")
        value = next(
            (attribute[k] for k in ("string", "version", "int", "bool") if k in attribute), None
        )
        attributes.setdefault(domain or driver, {})[bare] = value
    capacity: dict[str, dict[str, Any]] = {}
    for name, quantity in (device.get("capacity") or {}).items():
        domain, _, bare = name.rpartition("/")
        capacity.setdefault(domain or driver, {})[bare] = str((quantity or {}).get("value"))
    return {"driver": driver, "attributes": attributes, "capacity": capacity}


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
