"""One cell of nvidia-smi output into a value: placeholders stay ``None``, units checked."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pools.inventory.gpu_names import is_truncated_name, pci_device_id_key
from pools.inventory.nvidia_smi._patterns import ERROR_MARKERS, NUMBER, PCI, PLACEHOLDERS
from scheduler_adapters.types import GpuHealth, ParseIssue


@dataclass(frozen=True)
class At:
    """Where a value came from, so a bad one is reported without losing anything else."""

    issues: list[ParseIssue]
    node: str | None
    line: int | None
    field: str | None = None

    def report(self, message: str) -> None:
        self.issues.append(ParseIssue(message, line=self.line, field=self.field, node=self.node))


def clean_value(raw: str | None) -> str | None:
    """Strip a value; ``None`` for a placeholder."""
    if raw is None:
        return None
    text = raw.replace("\x00", "").strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1].strip()
    return None if text.casefold() in PLACEHOLDERS else text


def gpu_name_of(raw: str | None, at: At) -> str | None:
    """A model name, or ``None`` when absent or cut short by the table view (``... 4090 ...``)."""
    text = clean_value(raw)
    if text is not None and is_truncated_name(text):
        at.report(
            f"model name {text[:60]!r} is truncated (nvidia-smi's table view); not stored: "
            "import -L, -q, -q -x or --query-gpu output"
        )
        return None
    return text


def device_id_of(raw: str | None, at: At) -> str | None:
    """nvidia-smi's PCI device id as printed (``0x233010DE``), ``None`` when absent or bad."""
    text = clean_value(raw)
    if text is None:
        return None
    if pci_device_id_key(text) is None:
        at.report(f"expected an NVIDIA PCI device id such as 0x233010DE, got {text[:40]!r}")
        return None
    return text


def is_error(raw: str | None) -> bool:
    folded = (raw or "").casefold()
    return any(marker in folded for marker in ERROR_MARKERS)


def float_value(raw: str | None, unit: str, at: At) -> float | None:
    text = clean_value(raw)
    if text is None:
        return None
    match = NUMBER.fullmatch(text)
    if match is None or match["unit"] not in ("", unit):
        at.report(f"expected a number{' in ' + unit if unit else ''}, got {text[:40]!r}")
        return None
    return float(match["number"])


def int_value(raw: str | None, unit: str, at: At) -> int | None:
    value = float_value(raw, unit, at)
    if value is None:
        return None
    if not value.is_integer():
        at.report(f"expected a whole number, got {value}")
        return None
    return int(value)


def mig_mode_of(raw: str | None, at: At) -> bool | None:
    text = clean_value(raw)
    if text is None:
        return None
    mode = {"enabled": True, "disabled": False}.get(text.casefold())
    if mode is None:
        at.report(f"unknown MIG mode {text[:40]!r}")
    return mode


def pci_address(raw: str | None) -> str | None:
    """Write a PCI bus id the way ``nvidia-smi -q`` does: ``00000000:3B:00.0``."""
    text = clean_value(raw)
    match = PCI.fullmatch(text or "")
    if match is None:
        return text
    domain = int(match["domain"], 16)
    return f"{domain:08X}:{match['bus'].upper()}:{match['device'].upper()}.{match['fn']}"


def health_of(identity: Iterable[str | None], *, named: bool) -> GpuHealth:
    if any(is_error(raw) for raw in identity):
        return GpuHealth.ERROR
    return GpuHealth.OK if named else GpuHealth.UNKNOWN


def split_uuid(rest: str) -> tuple[str, str | None]:
    """Split ``'NVIDIA H100 (UUID: GPU-...)'`` into name and UUID."""
    text = rest.strip()
    head, marker, tail = text.rpartition("(UUID:")
    if not marker or not tail.endswith(")"):
        return text, None
    return head.strip(), clean_value(tail[:-1])
