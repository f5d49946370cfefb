"""GPUs and MIG devices as the readers assemble them, merged across sections of a capture."""

from __future__ import annotations

from dataclasses import dataclass, field

from pools.inventory.nvidia_smi._patterns import HANDLE_ERROR, HEALTH_RANK, VERSION
from pools.inventory.nvidia_smi._values import At, clean_value, pci_address
from scheduler_adapters.types import (
    GpuHealth,
    GpuSnapshot,
    InventorySource,
    MigDeviceSnapshot,
    NodeSnapshot,
    ParseIssue,
    ParseResult,
)


@dataclass
class Mig:
    index: int
    uuid: str | None = None
    profile: str | None = None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    memory_total_mib: int | None = None

    def absorb(self, newer: Mig) -> None:
        for name in (
            "uuid",
            "profile",
            "gpu_instance_id",
            "compute_instance_id",
            "memory_total_mib",
        ):
            if getattr(newer, name) is not None:
                setattr(self, name, getattr(newer, name))

    def snapshot(self) -> MigDeviceSnapshot:
        return MigDeviceSnapshot(
            index=self.index,
            uuid=self.uuid,
            profile=self.profile,
            gpu_instance_id=self.gpu_instance_id,
            compute_instance_id=self.compute_instance_id,
            memory_total_mib=self.memory_total_mib,
        )


_FACTS = (
    "index",
    "model_name",
    "uuid",
    "serial",
    "pci_bus_id",
    "pci_device_id",
    "memory_total_mib",
)


@dataclass
class Gpu:
    index: int | None = None
    model_name: str | None = None
    uuid: str | None = None
    serial: str | None = None
    pci_bus_id: str | None = None
    pci_device_id: str | None = None
    memory_total_mib: int | None = None
    mig_mode: bool | None = None
    health: GpuHealth = GpuHealth.UNKNOWN
    migs: dict[int, Mig] = field(default_factory=dict)
    # Only the readings the source covers, even when they are None: a later sample replaces an
    # earlier one whole, so idle and load values never mix.
    readings: dict[str, float | int | None] = field(default_factory=dict)
    # False when one listing gave this UUID to several GPUs (masked captures do).
    uuid_is_key: bool = True

    def same_card(self, other: Gpu) -> bool:
        if self.uuid_is_key and other.uuid_is_key and self.uuid and other.uuid:
            return self.uuid == other.uuid
        if self.pci_bus_id and other.pci_bus_id:
            return self.pci_bus_id == other.pci_bus_id
        if self.index is not None and other.index is not None:
            return self.index == other.index
        return False

    def absorb(self, newer: Gpu) -> list[str]:
        """Take what ``newer`` knows; return the facts on which the two disagree."""
        conflicts = []
        for name in _FACTS:
            old, new = getattr(self, name), getattr(newer, name)
            if new is None:
                continue
            if old is not None and old != new:
                conflicts.append(f"{name} {old!r} then {new!r}")
            setattr(self, name, new)
        if newer.mig_mode is not None:
            self.mig_mode = newer.mig_mode
        self.health = max(self.health, newer.health, key=HEALTH_RANK.__getitem__)
        self.readings.update(newer.readings)
        for index, mig in newer.migs.items():
            self.migs.setdefault(index, Mig(index)).absorb(mig)
        self.uuid_is_key = self.uuid_is_key and newer.uuid_is_key
        return conflicts

    def snapshot(self) -> GpuSnapshot:
        return GpuSnapshot(
            index=self.index,
            model_name=self.model_name,
            uuid=self.uuid,
            serial=self.serial,
            pci_bus_id=self.pci_bus_id,
            pci_device_id=self.pci_device_id,
            memory_total_mib=self.memory_total_mib,
            mig_mode=self.mig_mode,
            mig_devices=tuple(self.migs[i].snapshot() for i in sorted(self.migs)),
            health=self.health,
            utilization_gpu_percent=self.readings.get("utilization_gpu_percent"),
            memory_used_mib=self.readings.get("memory_used_mib"),
            power_draw_w=self.readings.get("power_draw_w"),
        )


@dataclass
class Accumulator:
    """What all sections of one input told about the host."""

    hostname: str
    gpus: list[Gpu] = field(default_factory=list)
    issues: list[ParseIssue] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    read_anything: bool = False
    listed: bool = False
    rejected: bool = False

    def at(self, line: int | None, field_name: str | None = None) -> At:
        return At(self.issues, self.hostname, line, field_name)

    def issue(
        self, message: str, *, line: int | None = None, field_name: str | None = None
    ) -> None:
        self.at(line, field_name).report(message)

    def set_version(self, name: str, raw: str | None, line: int | None) -> None:
        value = clean_value(raw)
        if value is None:
            return
        # "610.47 [Deprecated; ... Use KMD Version instead]" keeps its version, "Deprecated" none.
        match = VERSION.match(value)
        if match is None:
            self.issue(f"{name} {value[:60]!r} is not a version; not stored", line=line)
            return
        value = match[0]
        self.read_anything = True
        old = self.versions.get(name)
        if old is not None and old != value:
            self.issue(f"sections disagree on {name}: {old!r} then {value!r}", line=line)
        self.versions[name] = value

    def add_gpus(self, gpus: list[Gpu], *, line: int) -> None:
        """Merge one section's GPUs into those already known."""
        self.read_anything = self.listed = True
        _mark_shared_uuids(gpus, self.at(line))
        known = list(self.gpus)
        for gpu in gpus:
            match = next((old for old in known if old.same_card(gpu)), None)
            if match is None:
                self.gpus.append(gpu)
                continue
            known.remove(match)
            for conflict in match.absorb(gpu):
                self.issue(f"sections disagree on GPU {conflict}", line=line)

    def result(self) -> ParseResult:
        if self.rejected:
            return ParseResult(issues=tuple(self.issues))
        if not self.read_anything:
            self.issue("no nvidia-smi output found (expected -L, -q, -q -x or --query-gpu output)")
            return ParseResult(issues=tuple(self.issues))
        if not self.listed:
            self.issue("no GPU listing found (-L, -q, -q -x or --query-gpu): GPUs unknown")
        order = {id(gpu): n for n, gpu in enumerate(self.gpus)}
        gpus = sorted(self.gpus, key=lambda g: (g.index is None, g.index or 0, order[id(g)]))
        node = NodeSnapshot(
            hostname=self.hostname,
            source=InventorySource.NVIDIA_SMI,
            gpus=tuple(gpu.snapshot() for gpu in gpus),
            driver_version=self.versions.get("driver_version"),
            cuda_version=self.versions.get("cuda_version"),
        )
        return ParseResult(nodes=(node,), issues=tuple(self.issues))


def _mark_shared_uuids(gpus: list[Gpu], at: At) -> None:
    seen: dict[str, int] = {}
    for gpu in gpus:
        if gpu.uuid:
            seen[gpu.uuid] = seen.get(gpu.uuid, 0) + 1
    for uuid, count in seen.items():
        if count > 1:
            at.report(f"UUID {uuid} is reported by {count} GPUs; matching them by PCI bus id")
    for gpu in gpus:
        if gpu.uuid and seen[gpu.uuid] > 1:
            gpu.uuid_is_key = False


def failed_gpu(line: str, at: At) -> Gpu | None:
    """A card nvidia-smi could not open still belongs in the inventory, as an error."""
    match = HANDLE_ERROR.fullmatch(line)
    if match is None:
        return None
    at.report(f"GPU {match['pci']} cannot be read: {match['reason'].strip()[:80]}")
    return Gpu(pci_bus_id=pci_address(match["pci"]), health=GpuHealth.ERROR)
