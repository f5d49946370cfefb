"""Readers of the tree formats: ``nvidia-smi -q`` text and ``-q -x`` XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException

from pools.inventory.nvidia_smi._assembly import Accumulator, Gpu, Mig, failed_gpu
from pools.inventory.nvidia_smi._patterns import PCI, QUERY_GPU_HEADER, VERSION
from pools.inventory.nvidia_smi._sections import Section, numbered_lines
from pools.inventory.nvidia_smi._text import scan_versions
from pools.inventory.nvidia_smi._values import (
    At,
    clean_value,
    device_id_of,
    float_value,
    gpu_name_of,
    health_of,
    int_value,
    is_error,
    mig_mode_of,
    pci_address,
)

# -q text and -q -x XML hold the same tree under different names; one reader serves both.


@dataclass(frozen=True)
class _Layout:
    driver: tuple[str, ...]
    cuda: tuple[str, ...]
    attached: str
    name: tuple[str, ...]
    brand: tuple[str, ...]
    serial: tuple[str, ...]
    uuid: tuple[str, ...]
    pci: tuple[str, ...]
    device_id: tuple[str, ...]
    memory_total: tuple[str, ...]
    memory_used: tuple[str, ...]
    utilization: tuple[str, ...]
    mig_mode: tuple[str, ...]
    power: tuple[tuple[str, ...], ...]
    mig_group: str
    mig_device: str
    mig_index: tuple[str, ...]
    mig_gi: tuple[str, ...]
    mig_ci: tuple[str, ...]
    mig_uuid: tuple[str, ...]
    mig_memory: tuple[tuple[str, ...], ...]


_TEXT_LAYOUT = _Layout(
    driver=("KMD Version", "Driver Version"),
    cuda=("CUDA UMD Version", "CUDA Version"),
    attached="Attached GPUs",
    name=("Product Name",),
    brand=("Product Brand",),
    serial=("Serial Number",),
    uuid=("GPU UUID",),
    pci=("PCI", "Bus Id"),
    device_id=("PCI", "Device Id"),
    memory_total=("FB Memory Usage", "Total"),
    memory_used=("FB Memory Usage", "Used"),
    utilization=("Utilization", "GPU"),
    mig_mode=("MIG Mode", "Current"),
    power=(
        ("GPU Power Readings", "Power Draw"),
        ("Power Readings", "Power Draw"),
        ("GPU Power Readings", "Average Power Draw"),
        ("GPU Power Readings", "Instantaneous Power Draw"),
    ),
    mig_group="MIG Devices",
    mig_device="MIG Device",
    mig_index=("Index",),
    mig_gi=("GPU Instance ID",),
    mig_ci=("Compute Instance ID",),
    mig_uuid=("MIG UUID",),
    mig_memory=(("Shared FB Memory Usage", "Total"), ("FB Memory Usage", "Total")),
)
_XML_LAYOUT = _Layout(
    driver=("kmd_version", "driver_version"),
    cuda=("cuda_umd_version", "cuda_version"),
    attached="attached_gpus",
    name=("product_name",),
    brand=("product_brand",),
    serial=("serial",),
    uuid=("uuid",),
    pci=("pci", "pci_bus_id"),
    device_id=("pci", "pci_device_id"),
    memory_total=("fb_memory_usage", "total"),
    memory_used=("fb_memory_usage", "used"),
    utilization=("utilization", "gpu_util"),
    mig_mode=("mig_mode", "current_mig"),
    power=(
        ("gpu_power_readings", "power_draw"),
        ("power_readings", "power_draw"),
        ("gpu_power_readings", "average_power_draw"),
        ("gpu_power_readings", "instant_power_draw"),
    ),
    mig_group="mig_devices",
    mig_device="mig_device",
    mig_index=("index",),
    mig_gi=("gpu_instance_id",),
    mig_ci=("compute_instance_id",),
    mig_uuid=("uuid",),
    mig_memory=(("shared_fb_memory_usage", "total"), ("fb_memory_usage", "total")),
)


@dataclass
class _Entry:
    """One ``Key : value`` line of ``nvidia-smi -q`` (``value`` is None for a heading)."""

    key: str
    value: str | None
    line: int
    children: list[_Entry] = field(default_factory=list)

    def find(self, *path: str) -> _Entry | None:
        node: _Entry | None = self
        for name in path:
            wanted = name.casefold()
            node = next((c for c in node.children if c.key.casefold() == wanted), None)
            if node is None:
                return None
        return node

    def all(self, name: str) -> list[_Entry]:
        wanted = name.casefold()
        return [c for c in self.children if c.key.casefold() == wanted]


@dataclass(frozen=True)
class _XmlEntry:
    """An XML element seen through the same interface as ``_Entry``."""

    element: ET.Element
    line: int

    @property
    def value(self) -> str:
        # Own text only: itertext() recurses, and a hostile document can nest deeply.
        return "".join([self.element.text or "", *(c.tail or "" for c in self.element)])

    def find(self, *path: str) -> _XmlEntry | None:
        element = self.element
        for name in path:
            element = element.find(name)
            if element is None:
                return None
        return _XmlEntry(element, self.line)

    def all(self, name: str) -> list[_XmlEntry]:
        return [_XmlEntry(e, self.line) for e in self.element.findall(name)]


_Node = _Entry | _XmlEntry


def _entry_tree(lines: Iterable[tuple[int, str]]) -> _Entry:
    root = _Entry("", None, 0)
    stack: list[tuple[int, _Entry]] = [(-1, root)]
    for n, line in lines:
        stripped = line.strip()
        if not stripped or stripped.startswith("="):
            continue
        expanded = line.expandtabs(4)
        indent = len(expanded) - len(expanded.lstrip())
        key, colon, rest = stripped.partition(":")
        # A colon inside a value ("GPU 00000000:00:09.0") is not followed by a blank.
        if colon and (not rest or rest[0].isspace()):
            entry = _Entry(key.strip(), rest.strip(), n)
        else:
            entry = _Entry(stripped, None, n)
        while stack[-1][0] >= indent:
            stack.pop()
        stack[-1][1].children.append(entry)
        stack.append((indent, entry))
    return root


def read_query(section: Section, acc: Accumulator, columns: Sequence[str] | None = None) -> None:
    """Read ``nvidia-smi -q`` text: a ``GPU <bus id>`` block per card."""
    numbered = list(numbered_lines(section, acc.issues, acc.hostname))
    scan_versions(numbered, acc)
    failed, lines = [], []
    for n, line in numbered:
        gpu = failed_gpu(line, acc.at(n))
        if gpu is None:
            lines.append((n, line))
        else:
            failed.append(gpu)
    root = _entry_tree(lines)
    blocks = []
    for entry in root.children:
        match = QUERY_GPU_HEADER.fullmatch(entry.key) if entry.value is None else None
        if match:
            blocks.append((entry, pci_address(match["pci"])))
    _read_tree(root, blocks, _TEXT_LAYOUT, acc, failed, line=section.first_line)


def read_xml(section: Section, acc: Accumulator, columns: Sequence[str] | None = None) -> None:
    """Read ``nvidia-smi -q -x``; a document that is not well-formed rejects the snapshot."""
    # An XML declaration must come first, so blank lines before it go; they still count.
    blank = next((n for n, line in enumerate(section.lines) if line.strip()), len(section.lines))
    start = section.first_line + blank
    text = "\n".join(section.lines[blank:]).strip()
    if not text:
        acc.issue("nvidia-smi -q -x printed nothing", line=section.first_line)
        return
    try:
        # defusedxml refuses entity declarations; expat never fetches the external DTD.
        root = SafeET.fromstring(text)
    except ET.ParseError as exc:
        acc.rejected = True
        line = start + exc.position[0] - 1 if getattr(exc, "position", None) else start
        acc.issue(f"nvidia-smi -q -x output is not well-formed XML: {exc}", line=line)
        return
    except (DefusedXmlException, ValueError, LookupError) as exc:
        acc.rejected = True
        acc.issue(f"nvidia-smi -q -x output refused: {exc}", line=start)
        return
    if root.tag != "nvidia_smi_log":
        acc.issue(
            f"XML root is <{str(root.tag)[:40]}>, not <nvidia_smi_log>", line=section.first_line
        )
        return
    tree = _XmlEntry(root, section.first_line)
    for name, paths in (("driver_version", _XML_LAYOUT.driver), ("cuda_version", _XML_LAYOUT.cuda)):
        values = (e.value for e in map(tree.find, paths) if e is not None)
        found = next((v for v in values if VERSION.match(clean_value(v) or "")), None)
        acc.set_version(name, found, section.first_line)
    blocks = [(gpu, pci_address(gpu.element.get("id"))) for gpu in tree.all("gpu")]
    # The id attribute is only a bus id when it looks like one.
    blocks = [(gpu, pci if pci and PCI.fullmatch(pci) else None) for gpu, pci in blocks]
    _read_tree(tree, blocks, _XML_LAYOUT, acc, [], line=section.first_line)


def _read_tree(
    root: _Node,
    blocks: list[tuple[_Node, str | None]],
    layout: _Layout,
    acc: Accumulator,
    failed: list[Gpu],
    *,
    line: int,
) -> None:
    """Turn the GPU blocks of a ``-q`` tree (text or XML) into GPUs."""
    attached_entry = root.find(layout.attached)
    attached = None
    if attached_entry is not None:
        attached = int_value(attached_entry.value, "", acc.at(attached_entry.line, layout.attached))
    if attached is not None and attached != len(blocks) + len(failed):
        listed = len(blocks) + len(failed)
        acc.issue(f"{layout.attached} says {attached} but {listed} GPUs are listed", line=line)
    # nvidia-smi lists GPUs in index order; with `-i` it lists fewer and the order says nothing.
    by_position = attached is not None and attached == len(blocks)
    gpus = [
        _gpu_from_tree(block, layout, acc, pci=pci, index=n if by_position else None)
        for n, (block, pci) in enumerate(blocks)
    ]
    if gpus or failed or attached == 0:
        acc.add_gpus(failed + gpus, line=line)


def _leaf(node: _Node, path: tuple[str, ...], acc: Accumulator) -> tuple[str | None, At] | None:
    entry = node.find(*path)
    if entry is None:
        return None
    return entry.value, acc.at(entry.line, "/".join(path))


def _gpu_from_tree(
    node: _Node, layout: _Layout, acc: Accumulator, *, pci: str | None, index: int | None
) -> Gpu:
    value = {}
    where = {}
    for name in ("name", "brand", "serial", "uuid", "pci", "device_id"):
        found = _leaf(node, getattr(layout, name), acc)
        value[name], where[name] = found if found else (None, acc.at(node.line, name))
    gpu = Gpu(
        index=index,
        model_name=None if is_error(value["name"]) else gpu_name_of(value["name"], where["name"]),
        uuid=clean_value(value["uuid"]),
        serial=clean_value(value["serial"]),
        pci_bus_id=pci_address(value["pci"]) or pci,
        pci_device_id=device_id_of(value["device_id"], where["device_id"]),
    )
    del value["device_id"]
    gpu.health = health_of(value.values(), named=gpu.model_name is not None)
    if found := _leaf(node, layout.memory_total, acc):
        gpu.memory_total_mib = int_value(found[0], "MiB", found[1])
    if found := _leaf(node, layout.mig_mode, acc):
        gpu.mig_mode = mig_mode_of(*found)
    if found := _leaf(node, layout.memory_used, acc):
        gpu.readings["memory_used_mib"] = int_value(found[0], "MiB", found[1])
    if found := _leaf(node, layout.utilization, acc):
        gpu.readings["utilization_gpu_percent"] = float_value(found[0], "%", found[1])
    power = [float_value(f[0], "W", f[1]) for f in (_leaf(node, p, acc) for p in layout.power) if f]
    if power:
        gpu.readings["power_draw_w"] = next((w for w in power if w is not None), None)
    devices = node.all(layout.mig_device)
    for group in node.all(layout.mig_group):
        devices += group.all(layout.mig_device)
    for device in devices:
        if (mig := _mig_from_tree(device, layout, acc)) is not None:
            gpu.migs[mig.index] = mig
    return gpu


def _mig_from_tree(node: _Node, layout: _Layout, acc: Accumulator) -> Mig | None:
    def number(path: tuple[str, ...], unit: str) -> int | None:
        found = _leaf(node, path, acc)
        return int_value(found[0], unit, found[1]) if found else None

    index = number(layout.mig_index, "")
    if index is None:
        acc.issue("MIG device without an index skipped", line=node.line)
        return None
    memory = next((m for m in (number(p, "MiB") for p in layout.mig_memory) if m is not None), None)
    uuid = _leaf(node, layout.mig_uuid, acc)
    return Mig(
        index=index,
        uuid=clean_value(uuid[0]) if uuid else None,
        gpu_instance_id=number(layout.mig_gi, ""),
        compute_instance_id=number(layout.mig_ci, ""),
        memory_total_mib=memory,
    )
