"""Read ``nvidia-smi`` output into an inventory snapshot of one host.

Pure functions: no Django, no ORM, no I/O. The caller runs or receives the commands, decodes the
bytes (replacement characters and NUL bytes are tolerated) and passes the text with the host name.

What is read, recognised by content or by a ``$ nvidia-smi ...`` command line above the output:

* ``nvidia-smi -L``: index, name and UUID of each GPU; its MIG devices with profile and UUID.
* ``nvidia-smi -q``: driver and CUDA versions, name, serial, UUID, PCI bus id, memory, MIG mode,
  MIG devices (GPU instance, compute instance, memory), utilisation, memory used, power draw.
* ``nvidia-smi -q -x``: the same as XML.
* ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]``.
* ``nvidia-smi`` (the table) and ``nvidia-smi --version``: the driver and CUDA versions only.
* A capture file: several of the above, each under a ``# $ nvidia-smi ...`` header line. What the
  sections say about one GPU is merged (matched by UUID, else PCI bus id, else index).

Units: memory in MiB (int), utilisation in % and power in W (float). ``None`` means the source did
not say: placeholders such as ``[N/A]`` or ``[Not Supported]`` never become 0.
"""

from __future__ import annotations

import re
import shlex
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException

from pools.inventory.gpu_names import is_truncated_name, pci_device_id_key
from scheduler_adapters.types import (
    GpuHealth,
    GpuSnapshot,
    InventorySource,
    MigDeviceSnapshot,
    NodeSnapshot,
    ParseIssue,
    ParseResult,
)

# What nvidia-smi prints instead of a value, with or without brackets. Which one appears for the
# same field changes between driver releases and card classes, so they all mean "unknown".
_PLACEHOLDERS = frozenset(
    {
        "",
        "n/a",
        "not supported",
        "unknown error",
        "insufficient permissions",
        "requested functionality has been deprecated",
        "gpu is lost",
        "gpu requires reset",
    }
)
# Text in an identity field (name, brand, serial, UUID, bus id) that means the card is failing.
_ERROR_MARKERS = (
    "unknown error",
    "gpu is lost",
    "gpu requires reset",
    "err!",
    "unable to determine",
)

# Longer lines are not nvidia-smi output; skipping them keeps every regex below cheap.
_MAX_LINE = 10_000

_COMMAND = re.compile(r"\s*#?\s*\$\s+(?P<command>\S.*)")
_RULE = re.compile(r"#{8,}\s*")
_PCI = re.compile(
    r"(?P<domain>[0-9A-Fa-f]{4,8}):(?P<bus>[0-9A-Fa-f]{2}):(?P<device>[0-9A-Fa-f]{2})\.(?P<fn>[0-7])"
)
_QUERY_GPU_HEADER = re.compile(
    r"GPU\s+(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])"
)
_LIST_GPU = re.compile(r"GPU\s+(?P<index>[0-9]{1,6}):(?P<rest>.*)")
_LIST_MIG = re.compile(
    r"\s+MIG\s+(?P<profile>\S+)\s+Device\s+(?P<index>[0-9]{1,6}):(?P<rest>.*)", re.IGNORECASE
)
_HANDLE_ERROR = re.compile(
    r".*Unable to determine the device handle for\s+(?:GPU\s*)?(?P<pci>[0-9A-Fa-f:.]{7,20})"
    r"\s*:\s*(?P<reason>.*)",
    re.IGNORECASE,
)
_NO_DEVICES = "no devices were found"
# Drivers from 2026 (610.x) print "KMD Version" and "CUDA UMD Version" beside the old labels, and
# mark the old ones "[Deprecated; ... Use KMD Version instead]"; the new label wins when both
# appear, and a value that is not a version ("Deprecated") is never stored.
_DRIVER_LABELS = (
    re.compile(r"\bKMD\s+Version\s*:\s*(?P<value>[^\s|]+)", re.IGNORECASE),
    re.compile(r"\bDriver\s+Version\s*:\s*(?P<value>[^\s|]+)", re.IGNORECASE),
)
_CUDA_LABELS = (
    re.compile(r"\bCUDA\s+UMD\s+Version\s*:\s*(?P<value>[^\s|]+)", re.IGNORECASE),
    re.compile(r"\bCUDA\s+Version\s*:\s*(?P<value>[^\s|]+)", re.IGNORECASE),
)
_VERSION = re.compile(r"[0-9]{1,4}(?:\.[0-9]{1,4}){1,3}")
_NUMBER = re.compile(r"(?P<number>[0-9]{1,12}(?:\.[0-9]{1,9})?)\s*(?P<unit>\S*)")
_COLUMN = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_.]*)\s*(?:\[[^\]]*\])?")

# nvidia-smi accepts several names for one --query-gpu field; fold them onto one.
_COLUMN_ALIASES = {
    "gpu_name": "name",
    "gpu_serial": "serial",
    "gpu_uuid": "uuid",
    "gpu_bus_id": "pci.bus_id",
    "gpu.power.draw.average": "power.draw.average",
    "gpu.power.draw.instant": "power.draw.instant",
}
_IDENTITY_COLUMNS = ("index", "name", "uuid", "pci.bus_id", "serial")
_KNOWN_COLUMNS = frozenset(
    {
        *_IDENTITY_COLUMNS,
        "timestamp",
        "count",
        "driver_version",
        "kmd_version",
        "pci.device_id",
        "memory.total",
        "memory.used",
        "memory.free",
        "utilization.gpu",
        "utilization.memory",
        "power.draw",
        "power.draw.average",
        "power.draw.instant",
        "mig.mode.current",
        "mig.mode.pending",
        "fan.speed",
        "temperature.gpu",
    }
)
# power.draw is the board's average over 1 s on Ampere and newer, instantaneous before.
_POWER_COLUMNS = ("power.draw", "power.draw.average", "power.draw.instant")

_HEALTH_RANK = {GpuHealth.UNKNOWN: 0, GpuHealth.OK: 1, GpuHealth.ERROR: 2}


# --- public API -------------------------------------------------------------------------------


def parse_nvidia_smi(
    text: str, *, hostname: str, columns: Sequence[str] | None = None
) -> ParseResult:
    """Read one host's nvidia-smi output into a ``ParseResult`` with at most one node.

    ``text`` is any output listed in the module docstring, or a capture file of several.
    ``columns`` names the fields of ``--query-gpu`` CSV printed with ``noheader`` (the command
    line above the output names them too, when present); without a header and without columns
    the CSV is reported and not read.

    The node is ``NodeSnapshot(hostname, source=InventorySource.NVIDIA_SMI)`` with the raw
    ``driver_version`` (``"590.48.01"``) and ``cuda_version`` (``"13.1"``, ``None`` for N/A) and
    each GPU once, sorted by index. MIG devices sit under their parent GPU, never as GPUs.
    When sections disagree, the later one wins, so in a capture with an idle and a load run the
    readings (utilisation %, memory used MiB, power W) are the load run's.

    Health: ``ERROR`` when an identity field carries an error string (``Unknown Error``),
    ``OK`` when ``-q``, XML or CSV gave the GPU's name, ``UNKNOWN`` when only ``-L`` listed it.

    Never raises on bad text. Problems come back as ``ParseIssue`` with the 1-based line in
    ``text``: a bad token makes that value ``None``; a CSV row with the wrong number of fields is
    skipped; XML that is not well-formed rejects the whole snapshot (no node); input with nothing
    recognisable gives the issue "no nvidia-smi output found" and no node.
    """
    acc = _Accumulator(hostname)
    for section in _sections(text):
        _READERS[section.kind](section, acc, columns)
    return acc.result()


@dataclass(frozen=True)
class QueryGpuRows:
    """The rows of ``--query-gpu`` CSV, with placeholders turned into ``None``.

    ``columns`` are the field names lower-cased, without their ``[unit]`` suffix and with
    nvidia-smi's aliases folded (``gpu_name`` -> ``name``). Each row maps them to the cell text,
    units kept (``"81559 MiB"``), or ``None`` for a placeholder or error string. ``lines`` holds
    each row's 1-based line number in the text.
    """

    columns: tuple[str, ...]
    rows: tuple[dict[str, str | None], ...]
    lines: tuple[int, ...]
    issues: tuple[ParseIssue, ...]


def query_gpu_rows(text: str, *, columns: Sequence[str] | None = None) -> QueryGpuRows:
    """Read ``--query-gpu`` CSV cell by cell, for fields a ``GpuSnapshot`` does not hold.

    Accepts the same CSV as :func:`parse_nvidia_smi`, optionally under its ``$ nvidia-smi``
    command line; ``columns`` as there. Never raises; problems are in ``issues``.
    """
    issues: list[ParseIssue] = []
    section = next((s for s in _sections(text) if s.kind == "csv"), None)
    if section is None:
        issues.append(ParseIssue("no --query-gpu CSV found"))
        return QueryGpuRows((), (), (), tuple(issues))
    table = _csv_table(_numbered(section, issues, None), section, columns, issues, None)
    if table is None:
        return QueryGpuRows((), (), (), tuple(issues))
    header, rows = table
    return QueryGpuRows(
        columns=header,
        rows=tuple({name: _clean(cell) for name, cell in row.items()} for _, row in rows),
        lines=tuple(line for line, _ in rows),
        issues=tuple(issues),
    )


# --- values -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _At:
    """Where a value came from, so a bad one is reported without losing anything else."""

    issues: list[ParseIssue]
    node: str | None
    line: int | None
    field: str | None = None

    def report(self, message: str) -> None:
        self.issues.append(ParseIssue(message, line=self.line, field=self.field, node=self.node))


def _clean(raw: str | None) -> str | None:
    """Strip a value; ``None`` for a placeholder."""
    if raw is None:
        return None
    text = raw.replace("\x00", "").strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1].strip()
    return None if text.casefold() in _PLACEHOLDERS else text


def _name(raw: str | None, at: _At) -> str | None:
    """A model name, or ``None`` when absent or cut short by the table view (``... 4090 ...``)."""
    text = _clean(raw)
    if text is not None and is_truncated_name(text):
        at.report(
            f"model name {text[:60]!r} is truncated (nvidia-smi's table view); not stored: "
            "import -L, -q, -q -x or --query-gpu output"
        )
        return None
    return text


def _device_id(raw: str | None, at: _At) -> str | None:
    """nvidia-smi's PCI device id as printed (``0x233010DE``), ``None`` when absent or bad."""
    text = _clean(raw)
    if text is None:
        return None
    if pci_device_id_key(text) is None:
        at.report(f"expected an NVIDIA PCI device id such as 0x233010DE, got {text[:40]!r}")
        return None
    return text


def _is_error(raw: str | None) -> bool:
    folded = (raw or "").casefold()
    return any(marker in folded for marker in _ERROR_MARKERS)


def _float(raw: str | None, unit: str, at: _At) -> float | None:
    text = _clean(raw)
    if text is None:
        return None
    match = _NUMBER.fullmatch(text)
    if match is None or match["unit"] not in ("", unit):
        at.report(f"expected a number{' in ' + unit if unit else ''}, got {text[:40]!r}")
        return None
    return float(match["number"])


def _int(raw: str | None, unit: str, at: _At) -> int | None:
    value = _float(raw, unit, at)
    if value is None:
        return None
    if not value.is_integer():
        at.report(f"expected a whole number, got {value}")
        return None
    return int(value)


def _mig_mode(raw: str | None, at: _At) -> bool | None:
    text = _clean(raw)
    if text is None:
        return None
    mode = {"enabled": True, "disabled": False}.get(text.casefold())
    if mode is None:
        at.report(f"unknown MIG mode {text[:40]!r}")
    return mode


def _pci(raw: str | None) -> str | None:
    """Write a PCI bus id the way ``nvidia-smi -q`` does: ``00000000:3B:00.0``."""
    text = _clean(raw)
    match = _PCI.fullmatch(text or "")
    if match is None:
        return text
    domain = int(match["domain"], 16)
    return f"{domain:08X}:{match['bus'].upper()}:{match['device'].upper()}.{match['fn']}"


def _health(identity: Iterable[str | None], *, named: bool) -> GpuHealth:
    if any(_is_error(raw) for raw in identity):
        return GpuHealth.ERROR
    return GpuHealth.OK if named else GpuHealth.UNKNOWN


def _split_uuid(rest: str) -> tuple[str, str | None]:
    """Split ``'NVIDIA H100 (UUID: GPU-...)'`` into name and UUID."""
    text = rest.strip()
    head, marker, tail = text.rpartition("(UUID:")
    if not marker or not tail.endswith(")"):
        return text, None
    return head.strip(), _clean(tail[:-1])


# --- GPUs being assembled ---------------------------------------------------------------------


@dataclass
class _Mig:
    index: int
    uuid: str | None = None
    profile: str | None = None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    memory_total_mib: int | None = None

    def absorb(self, newer: _Mig) -> None:
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
class _Gpu:
    index: int | None = None
    model_name: str | None = None
    uuid: str | None = None
    serial: str | None = None
    pci_bus_id: str | None = None
    pci_device_id: str | None = None
    memory_total_mib: int | None = None
    mig_mode: bool | None = None
    health: GpuHealth = GpuHealth.UNKNOWN
    migs: dict[int, _Mig] = field(default_factory=dict)
    # Only the readings the source covers, even when they are None: a later sample replaces an
    # earlier one whole, so idle and load values never mix.
    readings: dict[str, float | int | None] = field(default_factory=dict)
    # False when one listing gave this UUID to several GPUs (masked captures do).
    uuid_is_key: bool = True

    def same_card(self, other: _Gpu) -> bool:
        if self.uuid_is_key and other.uuid_is_key and self.uuid and other.uuid:
            return self.uuid == other.uuid
        if self.pci_bus_id and other.pci_bus_id:
            return self.pci_bus_id == other.pci_bus_id
        if self.index is not None and other.index is not None:
            return self.index == other.index
        return False

    def absorb(self, newer: _Gpu) -> list[str]:
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
        self.health = max(self.health, newer.health, key=_HEALTH_RANK.__getitem__)
        self.readings.update(newer.readings)
        for index, mig in newer.migs.items():
            self.migs.setdefault(index, _Mig(index)).absorb(mig)
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
class _Accumulator:
    """What all sections of one input told about the host."""

    hostname: str
    gpus: list[_Gpu] = field(default_factory=list)
    issues: list[ParseIssue] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    read_anything: bool = False
    listed: bool = False
    rejected: bool = False

    def at(self, line: int | None, field_name: str | None = None) -> _At:
        return _At(self.issues, self.hostname, line, field_name)

    def issue(
        self, message: str, *, line: int | None = None, field_name: str | None = None
    ) -> None:
        self.at(line, field_name).report(message)

    def set_version(self, name: str, raw: str | None, line: int | None) -> None:
        value = _clean(raw)
        if value is None:
            return
        # "610.47 [Deprecated; ... Use KMD Version instead]" keeps its version, "Deprecated" none.
        match = _VERSION.match(value)
        if match is None:
            self.issue(f"{name} {value[:60]!r} is not a version; not stored", line=line)
            return
        value = match[0]
        self.read_anything = True
        old = self.versions.get(name)
        if old is not None and old != value:
            self.issue(f"sections disagree on {name}: {old!r} then {value!r}", line=line)
        self.versions[name] = value

    def add_gpus(self, gpus: list[_Gpu], *, line: int) -> None:
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


def _mark_shared_uuids(gpus: list[_Gpu], at: _At) -> None:
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


def _failed_gpu(line: str, at: _At) -> _Gpu | None:
    """A card nvidia-smi could not open still belongs in the inventory, as an error."""
    match = _HANDLE_ERROR.fullmatch(line)
    if match is None:
        return None
    at.report(f"GPU {match['pci']} cannot be read: {match['reason'].strip()[:80]}")
    return _Gpu(pci_bus_id=_pci(match["pci"]), health=GpuHealth.ERROR)


# --- sections ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Section:
    """The output of one command: ``lines[0]`` is line ``first_line`` of the input."""

    kind: str
    lines: tuple[str, ...]
    first_line: int
    columns: tuple[str, ...] | None = None
    noheader: bool | None = None


def _sections(text: str) -> list[_Section]:
    lines = [line.removesuffix("\r") for line in text.removeprefix("\ufeff").split("\n")]
    starts = [n for n, line in enumerate(lines) if _is_command(line)]
    if not starts:
        kind = _sniff(lines)
        return [] if kind is None else [_Section(kind, tuple(lines), 1)]
    sections = []
    for n, start in enumerate(starts):
        stop = starts[n + 1] if n + 1 < len(starts) else len(lines)
        body_start = _skip_section_banner(lines, start + 1, stop)
        body_stop = next((i for i in range(body_start, stop) if _RULE.fullmatch(lines[i])), stop)
        body = tuple(lines[body_start:body_stop])
        kind, columns, noheader = _command_kind(_COMMAND.fullmatch(lines[start])["command"])
        if kind is not None:
            sections.append(
                _Section(_by_content(kind, body), body, body_start + 1, columns, noheader)
            )
    return sections


def _is_command(line: str) -> bool:
    return len(line) <= _MAX_LINE and _COMMAND.fullmatch(line) is not None


def _skip_section_banner(lines: list[str], start: int, stop: int) -> int:
    # A capture file puts comment lines and a rule of '#' between the command and its output.
    for n in range(start, stop):
        if _RULE.fullmatch(lines[n]):
            return n + 1
        if not lines[n].lstrip().startswith("#"):
            break
    return start


def _command_kind(command: str) -> tuple[str | None, tuple[str, ...] | None, bool | None]:
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    if words[:1] == ["sudo"]:
        words = words[1:]
    if not words or words[0].rsplit("/", 1)[-1].removesuffix(".exe") != "nvidia-smi":
        return None, None, None
    args = words[1:]
    if args and not args[0].startswith("-"):
        return None, None, None  # a subcommand: topo, nvlink, pmon, dmon, mig, ...
    query = _option(args, "--query-gpu")
    if query is not None:
        fmt = (_option(args, "--format") or "").casefold()
        return "csv", tuple(c for c in query.split(",") if c.strip()), "noheader" in fmt
    if any(a.startswith(("--query-", "--help")) or a in ("-h", "-B") for a in args):
        return None, None, None
    if "-L" in args or "--list-gpus" in args:
        return "list", None, None
    if "-q" in args or "--query" in args:
        return ("xml" if "-x" in args or "--xml-format" in args else "query"), None, None
    return "versions", None, None  # the table, --version, and anything else: banner only


def _option(args: list[str], name: str) -> str | None:
    for n, arg in enumerate(args):
        if arg == name and n + 1 < len(args):
            return args[n + 1]
        if arg.startswith(name + "="):
            return arg[len(name) + 1 :]
    return None


def _by_content(kind: str, lines: Iterable[str]) -> str:
    # `-q` output that is XML: the header lost its `-x`, the output did not.
    first = next((line.strip() for line in lines if line.strip()), "")
    return "xml" if kind == "query" and first.startswith("<") else kind


def _sniff(lines: list[str]) -> str | None:
    """Name the output a bare text (no command line) holds, or ``None``."""
    # XML may come on one long line, so it is recognised before long lines are dropped.
    if _by_content("query", lines) == "xml":
        return "xml"
    body = [line.strip() for line in lines if line.strip() and len(line) <= _MAX_LINE]
    if not body:
        return None
    if any(_looks_like_query(line) for line in body):
        return "query"
    if any(_LIST_GPU.fullmatch(line) or _NO_DEVICES in line.casefold() for line in body):
        return "list"
    if any(label.search(line) for line in body for label in _DRIVER_LABELS + _CUDA_LABELS):
        return "versions"
    if "," in body[0]:
        return "csv"
    return None


def _looks_like_query(line: str) -> bool:
    return (
        "NVSMI LOG" in line
        or re.fullmatch(r"Attached GPUs\s*:.*", line) is not None
        or _QUERY_GPU_HEADER.fullmatch(line) is not None
    )


def _numbered(
    section: _Section, issues: list[ParseIssue], node: str | None
) -> Iterator[tuple[int, str]]:
    """Yield ``(line number, line)``, skipping lines too long to be nvidia-smi output."""
    for n, line in enumerate(section.lines, start=section.first_line):
        if len(line) > _MAX_LINE:
            _At(issues, node, n).report(f"line longer than {_MAX_LINE} characters skipped")
            continue
        yield n, line


# --- readers ----------------------------------------------------------------------------------


def _read_versions(
    section: _Section, acc: _Accumulator, columns: Sequence[str] | None = None
) -> None:
    """Read the driver and CUDA versions from the table banner or ``--version``."""
    _scan_versions(list(_numbered(section, acc.issues, acc.hostname)), acc)


def _scan_versions(lines: list[tuple[int, str]], acc: _Accumulator) -> None:
    found: dict[str, tuple[str, int]] = {}
    for name, labels in (("driver_version", _DRIVER_LABELS), ("cuda_version", _CUDA_LABELS)):
        for label in labels:
            for n, line in lines:
                match = label.search(line)
                # The first label is the host's; later ones in -q may belong to a vGPU host.
                if match and _VERSION.fullmatch(match["value"]):
                    found[name] = (match["value"], n)
                    break
            if name in found:
                break
    for n, line in lines:
        if "nvidia-smi has failed" in line.casefold():
            acc.issue(line.strip()[:200], line=n)
    for name, (value, n) in found.items():
        acc.set_version(name, value, n)


def _read_list(section: _Section, acc: _Accumulator, columns: Sequence[str] | None = None) -> None:
    """Read ``nvidia-smi -L``: ``GPU 0: <name> (UUID: ...)`` and its indented MIG lines."""
    gpus: list[_Gpu] = []
    for n, line in _numbered(section, acc.issues, acc.hostname):
        if not line.strip():
            continue
        if _NO_DEVICES in line.casefold():
            acc.read_anything = acc.listed = True
        elif gpu := _failed_gpu(line, acc.at(n)) or _list_gpu(line, acc.at(n, "name")):
            gpus.append(gpu)
        elif (mig := _list_mig(line)) and gpus:
            gpus[-1].migs[mig.index] = mig
            # MIG devices exist only while MIG mode is on.
            gpus[-1].mig_mode = True
        else:
            acc.issue(f"unrecognised line in nvidia-smi -L output: {line.strip()[:80]!r}", line=n)
    if gpus:
        acc.add_gpus(gpus, line=section.first_line)


def _list_gpu(line: str, at: _At) -> _Gpu | None:
    match = _LIST_GPU.fullmatch(line.strip())
    if match is None:
        return None
    name, uuid = _split_uuid(match["rest"])
    failed = _is_error(name) or _is_error(uuid)
    return _Gpu(
        index=int(match["index"]),
        model_name=None if failed else _name(name, at),
        uuid=None if _is_error(uuid) else uuid,
        health=GpuHealth.ERROR if failed else GpuHealth.UNKNOWN,
    )


def _list_mig(line: str) -> _Mig | None:
    match = _LIST_MIG.fullmatch(line)
    if match is None:
        return None
    _, uuid = _split_uuid(match["rest"])
    return _Mig(index=int(match["index"]), uuid=uuid, profile=match["profile"])


def _read_csv(section: _Section, acc: _Accumulator, columns: Sequence[str] | None) -> None:
    """Read ``--query-gpu`` CSV; a GPU per row, when the columns identify one."""
    failed, lines = [], []
    for n, line in _numbered(section, acc.issues, acc.hostname):
        gpu = _failed_gpu(line, acc.at(n))
        if gpu is not None:
            failed.append(gpu)
        elif _NO_DEVICES in line.casefold():
            acc.read_anything = acc.listed = True
        else:
            lines.append((n, line))
    table = _csv_table(lines, section, columns, acc.issues, acc.hostname)
    if table is None:
        if failed:
            acc.add_gpus(failed, line=section.first_line)
        return
    header, rows = table
    for n, row in rows:
        driver = _clean(row.get("kmd_version")) or _clean(row.get("driver_version"))
        acc.set_version("driver_version", driver, n)
    if not any(name in header for name in _IDENTITY_COLUMNS):
        if not any(name in header for name in ("driver_version", "kmd_version")):
            acc.issue("CSV has no column that identifies a GPU", line=section.first_line)
        return
    if not rows and not failed:
        acc.issue("CSV has a header but no rows", line=section.first_line)
        return
    acc.add_gpus(failed + [_gpu_from_row(row, acc, n) for n, row in rows], line=section.first_line)


def _csv_table(
    lines: Iterable[tuple[int, str]],
    section: _Section,
    columns: Sequence[str] | None,
    issues: list[ParseIssue],
    node: str | None,
) -> tuple[tuple[str, ...], list[tuple[int, dict[str, str]]]] | None:
    """Split CSV into a header and rows of raw cells; ``None`` when the columns are unknown."""
    numbered = [(n, line) for n, line in lines if line.strip()]
    if not numbered:
        return None
    # nvidia-smi never quotes a cell, so a plain split is exact; the csv module would read a
    # stray quote in a value as the start of a quoted field and swallow the following cells.
    first = [cell.strip() for cell in numbered[0][1].split(",")]
    if section.noheader is not True and _looks_like_header(first):
        header, data = tuple(_column_name(c) for c in first), numbered[1:]
    elif section.columns or columns:
        names = section.columns or columns
        header, data = tuple(_column_name(c) for c in names), numbered
    else:
        _At(issues, node, numbered[0][0]).report(
            "CSV has no header line: export it without noheader, or put the command above it "
            "as '# $ nvidia-smi --query-gpu=... --format=csv,noheader'"
        )
        return None
    rows = []
    for n, line in data:
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(header):
            _At(issues, node, n).report(
                f"expected {len(header)} fields, found {len(cells)}; row skipped"
            )
            continue
        rows.append((n, dict(zip(header, cells, strict=True))))
    return header, rows


def _looks_like_header(cells: list[str]) -> bool:
    if not all(_COLUMN.fullmatch(cell) for cell in cells):
        return False
    return any(_column_name(cell) in _KNOWN_COLUMNS for cell in cells)


def _column_name(cell: str) -> str:
    match = _COLUMN.fullmatch(cell.strip())
    name = (match["name"] if match else cell.strip()).casefold()
    return _COLUMN_ALIASES.get(name, name)


def _gpu_from_row(row: dict[str, str], acc: _Accumulator, line: int) -> _Gpu:
    gpu = _Gpu(
        index=_int(row.get("index"), "", acc.at(line, "index")),
        model_name=_name(row.get("name"), acc.at(line, "name")),
        uuid=_clean(row.get("uuid")),
        serial=_clean(row.get("serial")),
        pci_bus_id=_pci(row.get("pci.bus_id")),
        pci_device_id=_device_id(row.get("pci.device_id"), acc.at(line, "pci.device_id")),
        memory_total_mib=_int(row.get("memory.total"), "MiB", acc.at(line, "memory.total")),
        mig_mode=_mig_mode(row.get("mig.mode.current"), acc.at(line, "mig.mode.current")),
    )
    identity = (row.get(name) for name in ("name", "uuid", "serial", "pci.bus_id"))
    gpu.health = _health(identity, named=gpu.model_name is not None)
    if "memory.used" in row:
        at = acc.at(line, "memory.used")
        gpu.readings["memory_used_mib"] = _int(row["memory.used"], "MiB", at)
    if "utilization.gpu" in row:
        at = acc.at(line, "utilization.gpu")
        gpu.readings["utilization_gpu_percent"] = _float(row["utilization.gpu"], "%", at)
    power = [_float(row[c], "W", acc.at(line, c)) for c in _POWER_COLUMNS if c in row]
    if power:
        gpu.readings["power_draw_w"] = next((w for w in power if w is not None), None)
    return gpu


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


def _read_query(section: _Section, acc: _Accumulator, columns: Sequence[str] | None = None) -> None:
    """Read ``nvidia-smi -q`` text: a ``GPU <bus id>`` block per card."""
    numbered = list(_numbered(section, acc.issues, acc.hostname))
    _scan_versions(numbered, acc)
    failed, lines = [], []
    for n, line in numbered:
        gpu = _failed_gpu(line, acc.at(n))
        if gpu is None:
            lines.append((n, line))
        else:
            failed.append(gpu)
    root = _entry_tree(lines)
    blocks = []
    for entry in root.children:
        match = _QUERY_GPU_HEADER.fullmatch(entry.key) if entry.value is None else None
        if match:
            blocks.append((entry, _pci(match["pci"])))
    _read_tree(root, blocks, _TEXT_LAYOUT, acc, failed, line=section.first_line)


def _read_xml(section: _Section, acc: _Accumulator, columns: Sequence[str] | None = None) -> None:
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
        found = next((v for v in values if _VERSION.match(_clean(v) or "")), None)
        acc.set_version(name, found, section.first_line)
    blocks = [(gpu, _pci(gpu.element.get("id"))) for gpu in tree.all("gpu")]
    # The id attribute is only a bus id when it looks like one.
    blocks = [(gpu, pci if pci and _PCI.fullmatch(pci) else None) for gpu, pci in blocks]
    _read_tree(tree, blocks, _XML_LAYOUT, acc, [], line=section.first_line)


def _read_tree(
    root: _Node,
    blocks: list[tuple[_Node, str | None]],
    layout: _Layout,
    acc: _Accumulator,
    failed: list[_Gpu],
    *,
    line: int,
) -> None:
    """Turn the GPU blocks of a ``-q`` tree (text or XML) into GPUs."""
    attached_entry = root.find(layout.attached)
    attached = None
    if attached_entry is not None:
        attached = _int(attached_entry.value, "", acc.at(attached_entry.line, layout.attached))
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


def _leaf(node: _Node, path: tuple[str, ...], acc: _Accumulator) -> tuple[str | None, _At] | None:
    entry = node.find(*path)
    if entry is None:
        return None
    return entry.value, acc.at(entry.line, "/".join(path))


def _gpu_from_tree(
    node: _Node, layout: _Layout, acc: _Accumulator, *, pci: str | None, index: int | None
) -> _Gpu:
    value = {}
    where = {}
    for name in ("name", "brand", "serial", "uuid", "pci", "device_id"):
        found = _leaf(node, getattr(layout, name), acc)
        value[name], where[name] = found if found else (None, acc.at(node.line, name))
    gpu = _Gpu(
        index=index,
        model_name=None if _is_error(value["name"]) else _name(value["name"], where["name"]),
        uuid=_clean(value["uuid"]),
        serial=_clean(value["serial"]),
        pci_bus_id=_pci(value["pci"]) or pci,
        pci_device_id=_device_id(value["device_id"], where["device_id"]),
    )
    del value["device_id"]
    gpu.health = _health(value.values(), named=gpu.model_name is not None)
    if found := _leaf(node, layout.memory_total, acc):
        gpu.memory_total_mib = _int(found[0], "MiB", found[1])
    if found := _leaf(node, layout.mig_mode, acc):
        gpu.mig_mode = _mig_mode(*found)
    if found := _leaf(node, layout.memory_used, acc):
        gpu.readings["memory_used_mib"] = _int(found[0], "MiB", found[1])
    if found := _leaf(node, layout.utilization, acc):
        gpu.readings["utilization_gpu_percent"] = _float(found[0], "%", found[1])
    power = [_float(f[0], "W", f[1]) for f in (_leaf(node, p, acc) for p in layout.power) if f]
    if power:
        gpu.readings["power_draw_w"] = next((w for w in power if w is not None), None)
    devices = node.all(layout.mig_device)
    for group in node.all(layout.mig_group):
        devices += group.all(layout.mig_device)
    for device in devices:
        if (mig := _mig_from_tree(device, layout, acc)) is not None:
            gpu.migs[mig.index] = mig
    return gpu


def _mig_from_tree(node: _Node, layout: _Layout, acc: _Accumulator) -> _Mig | None:
    def number(path: tuple[str, ...], unit: str) -> int | None:
        found = _leaf(node, path, acc)
        return _int(found[0], unit, found[1]) if found else None

    index = number(layout.mig_index, "")
    if index is None:
        acc.issue("MIG device without an index skipped", line=node.line)
        return None
    memory = next((m for m in (number(p, "MiB") for p in layout.mig_memory) if m is not None), None)
    uuid = _leaf(node, layout.mig_uuid, acc)
    return _Mig(
        index=index,
        uuid=_clean(uuid[0]) if uuid else None,
        gpu_instance_id=number(layout.mig_gi, ""),
        compute_instance_id=number(layout.mig_ci, ""),
        memory_total_mib=memory,
    )


_READERS = {
    "versions": _read_versions,
    "list": _read_list,
    "query": _read_query,
    "xml": _read_xml,
    "csv": _read_csv,
}
