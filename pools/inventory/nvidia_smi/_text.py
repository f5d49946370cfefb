"""Readers of the line formats: ``--version`` / the table, ``-L`` and ``--query-gpu`` CSV."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pools.inventory.nvidia_smi._assembly import Accumulator, Gpu, Mig, failed_gpu
from pools.inventory.nvidia_smi._patterns import (
    COLUMN,
    COLUMN_ALIASES,
    CUDA_LABELS,
    DRIVER_LABELS,
    IDENTITY_COLUMNS,
    KNOWN_COLUMNS,
    LIST_GPU,
    LIST_MIG,
    NO_DEVICES,
    POWER_COLUMNS,
    VERSION,
)
from pools.inventory.nvidia_smi._sections import Section, numbered_lines
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
    split_uuid,
)
from scheduler_adapters.types import GpuHealth, ParseIssue


def read_versions(section: Section, acc: Accumulator, columns: Sequence[str] | None = None) -> None:
    """Read the driver and CUDA versions from the table banner or ``--version``."""
    scan_versions(list(numbered_lines(section, acc.issues, acc.hostname)), acc)


def scan_versions(lines: list[tuple[int, str]], acc: Accumulator) -> None:
    found: dict[str, tuple[str, int]] = {}
    for name, labels in (("driver_version", DRIVER_LABELS), ("cuda_version", CUDA_LABELS)):
        for label in labels:
            for n, line in lines:
                match = label.search(line)
                # The first label is the host's; later ones in -q may belong to a vGPU host.
                if match and VERSION.fullmatch(match["value"]):
                    found[name] = (match["value"], n)
                    break
            if name in found:
                break
    for n, line in lines:
        if "nvidia-smi has failed" in line.casefold():
            acc.issue(line.strip()[:200], line=n)
    for name, (value, n) in found.items():
        acc.set_version(name, value, n)


def read_list(section: Section, acc: Accumulator, columns: Sequence[str] | None = None) -> None:
    """Read ``nvidia-smi -L``: ``GPU 0: <name> (UUID: ...)`` and its indented MIG lines."""
    gpus: list[Gpu] = []
    for n, line in numbered_lines(section, acc.issues, acc.hostname):
        if not line.strip():
            continue
        if NO_DEVICES in line.casefold():
            acc.read_anything = acc.listed = True
        elif gpu := failed_gpu(line, acc.at(n)) or _list_gpu(line, acc.at(n, "name")):
            gpus.append(gpu)
        elif (mig := _list_mig(line)) and gpus:
            gpus[-1].migs[mig.index] = mig
            # MIG devices exist only while MIG mode is on.
            gpus[-1].mig_mode = True
        else:
            acc.issue(f"unrecognised line in nvidia-smi -L output: {line.strip()[:80]!r}", line=n)
    if gpus:
        acc.add_gpus(gpus, line=section.first_line)


def _list_gpu(line: str, at: At) -> Gpu | None:
    match = LIST_GPU.fullmatch(line.strip())
    if match is None:
        return None
    rest = match["rest"].strip()
    head, marker, _ = rest.rpartition("(UUID:")
    if marker and not rest.endswith(")"):  # cut short in its UUID: the name is still whole
        at.report(f"GPU {match['index']}: the line ends inside its UUID; read without one")
        rest = head.strip()
    name, uuid = split_uuid(rest)
    failed = is_error(name) or is_error(uuid)
    return Gpu(
        index=int(match["index"]),
        model_name=None if failed else gpu_name_of(name, at),
        uuid=None if is_error(uuid) else uuid,
        health=GpuHealth.ERROR if failed else GpuHealth.UNKNOWN,
    )


def _list_mig(line: str) -> Mig | None:
    match = LIST_MIG.fullmatch(line)
    if match is None:
        return None
    _, uuid = split_uuid(match["rest"])
    return Mig(index=int(match["index"]), uuid=uuid, profile=match["profile"])


def read_csv(section: Section, acc: Accumulator, columns: Sequence[str] | None) -> None:
    """Read ``--query-gpu`` CSV; a GPU per row, when the columns identify one."""
    failed, lines = [], []
    for n, line in numbered_lines(section, acc.issues, acc.hostname):
        gpu = failed_gpu(line, acc.at(n))
        if gpu is not None:
            failed.append(gpu)
        elif NO_DEVICES in line.casefold():
            acc.read_anything = acc.listed = True
        else:
            lines.append((n, line))
    table = csv_table(lines, section, columns, acc.issues, acc.hostname)
    if table is None:
        if failed:
            acc.add_gpus(failed, line=section.first_line)
        return
    header, rows = table
    for n, row in rows:
        driver = clean_value(row.get("kmd_version")) or clean_value(row.get("driver_version"))
        acc.set_version("driver_version", driver, n)
    if not any(name in header for name in IDENTITY_COLUMNS):
        if not any(name in header for name in ("driver_version", "kmd_version")):
            acc.issue("CSV has no column that identifies a GPU", line=section.first_line)
        return
    if not rows and not failed:
        acc.issue("CSV has a header but no rows", line=section.first_line)
        return
    acc.add_gpus(failed + [_gpu_from_row(row, acc, n) for n, row in rows], line=section.first_line)


def csv_table(
    lines: Iterable[tuple[int, str]],
    section: Section,
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
        At(issues, node, numbered[0][0]).report(
            "CSV has no header line: export it without noheader, or put the command above it "
            "as '# $ nvidia-smi --query-gpu=... --format=csv,noheader'"
        )
        return None
    rows = []
    for n, line in data:
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(header):
            At(issues, node, n).report(
                f"expected {len(header)} fields, found {len(cells)}; row skipped"
            )
            continue
        rows.append((n, dict(zip(header, cells, strict=True))))
    return header, rows


def _looks_like_header(cells: list[str]) -> bool:
    if not all(COLUMN.fullmatch(cell) for cell in cells):
        return False
    return any(_column_name(cell) in KNOWN_COLUMNS for cell in cells)


def _column_name(cell: str) -> str:
    match = COLUMN.fullmatch(cell.strip())
    name = (match["name"] if match else cell.strip()).casefold()
    return COLUMN_ALIASES.get(name, name)


def _gpu_from_row(row: dict[str, str], acc: Accumulator, line: int) -> Gpu:
    gpu = Gpu(
        index=int_value(row.get("index"), "", acc.at(line, "index")),
        model_name=gpu_name_of(row.get("name"), acc.at(line, "name")),
        uuid=clean_value(row.get("uuid")),
        serial=clean_value(row.get("serial")),
        pci_bus_id=pci_address(row.get("pci.bus_id")),
        pci_device_id=device_id_of(row.get("pci.device_id"), acc.at(line, "pci.device_id")),
        memory_total_mib=int_value(row.get("memory.total"), "MiB", acc.at(line, "memory.total")),
        mig_mode=mig_mode_of(row.get("mig.mode.current"), acc.at(line, "mig.mode.current")),
    )
    identity = (row.get(name) for name in ("name", "uuid", "serial", "pci.bus_id"))
    gpu.health = health_of(identity, named=gpu.model_name is not None)
    if "memory.used" in row:
        at = acc.at(line, "memory.used")
        gpu.readings["memory_used_mib"] = int_value(row["memory.used"], "MiB", at)
    if "utilization.gpu" in row:
        at = acc.at(line, "utilization.gpu")
        gpu.readings["utilization_gpu_percent"] = float_value(row["utilization.gpu"], "%", at)
    power = [float_value(row[c], "W", acc.at(line, c)) for c in POWER_COLUMNS if c in row]
    if power:
        gpu.readings["power_draw_w"] = next((w for w in power if w is not None), None)
    return gpu
