"""The patterns and fixed vocabularies the nvidia-smi readers share."""

from __future__ import annotations

import re

from scheduler_adapters.types import GpuHealth

# What nvidia-smi prints instead of a value, with or without brackets. Which one appears for the
# same field changes between driver releases and card classes, so they all mean "unknown".
PLACEHOLDERS = frozenset(
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
ERROR_MARKERS = (
    "unknown error",
    "gpu is lost",
    "gpu requires reset",
    "err!",
    "unable to determine",
)

# Longer lines are not nvidia-smi output; skipping them keeps every regex below cheap.
MAX_LINE = 10_000

COMMAND = re.compile(r"\s*#?\s*\$\s+(?P<command>\S.*)")
RULE = re.compile(r"#{8,}\s*")
PCI = re.compile(
    r"(?P<domain>[0-9A-Fa-f]{4,8}):(?P<bus>[0-9A-Fa-f]{2}):(?P<device>[0-9A-Fa-f]{2})\.(?P<fn>[0-7])"
)
QUERY_GPU_HEADER = re.compile(
    r"GPU\s+(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])"
)
LIST_GPU = re.compile(r"GPU\s+(?P<index>[0-9]{1,6}):(?P<rest>.*)")
LIST_MIG = re.compile(
    r"\s+MIG\s+(?P<profile>\S+)\s+Device\s+(?P<index>[0-9]{1,6}):(?P<rest>.*)", re.IGNORECASE
)
HANDLE_ERROR = re.compile(
    r".*Unable to determine the device handle for\s+(?:GPU\s*)?(?P<pci>[0-9A-Fa-f:.]{7,20})"
    r"\s*:\s*(?P<reason>.*)",
    re.IGNORECASE,
)
NO_DEVICES = "no devices were found"
# Drivers from 2026 (610.x) print "KMD Version" and "CUDA UMD Version" beside the old labels, and
# mark the old ones "[Deprecated; ... Use KMD Version instead]"; the new label wins when both
# appear, and a value that is not a version ("Deprecated") is never stored.
DRIVER_LABELS = (
    re.compile(r"\bKMD\s+Version\s*:\s*(?P<value>[^\s|]+)", re.IGNORECASE),
    re.compile(r"\bDriver\s+Version\s*:\s*(?P<value>[^\s|]+)", re.IGNORECASE),
)
CUDA_LABELS = (
    re.compile(r"\bCUDA\s+UMD\s+Version\s*:\s*(?P<value>[^\s|]+)", re.IGNORECASE),
    re.compile(r"\bCUDA\s+Version\s*:\s*(?P<value>[^\s|]+)", re.IGNORECASE),
)
VERSION = re.compile(r"[0-9]{1,4}(?:\.[0-9]{1,4}){1,3}")
NUMBER = re.compile(r"(?P<number>[0-9]{1,12}(?:\.[0-9]{1,9})?)\s*(?P<unit>\S*)")
COLUMN = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_.]*)\s*(?:\[[^\]]*\])?")

# nvidia-smi accepts several names for one --query-gpu field; fold them onto one.
COLUMN_ALIASES = {
    "gpu_name": "name",
    "gpu_serial": "serial",
    "gpu_uuid": "uuid",
    "gpu_bus_id": "pci.bus_id",
    "gpu.power.draw.average": "power.draw.average",
    "gpu.power.draw.instant": "power.draw.instant",
}
IDENTITY_COLUMNS = ("index", "name", "uuid", "pci.bus_id", "serial")
KNOWN_COLUMNS = frozenset(
    {
        *IDENTITY_COLUMNS,
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
POWER_COLUMNS = ("power.draw", "power.draw.average", "power.draw.instant")

HEALTH_RANK = {GpuHealth.UNKNOWN: 0, GpuHealth.OK: 1, GpuHealth.ERROR: 2}
