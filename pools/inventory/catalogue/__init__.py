"""Reference data the portal ships with: the GPU model catalogue and NVIDIA's driver/CUDA table.

Both live as JSON next to this module so that a data migration, the tests and any tool can read
them without Django. Every GPU value carries its citation in the entry's ``sources``; a ``null``
value's citation starts with ``none:`` (the card lacks the feature, e.g. FP8 on Ampere) or
``unknown:`` (no trustworthy source was found), so the two never get confused with each other or
with zero. Numbers are plain JSON numbers; convert with ``Decimal(str(value))`` when storing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent


def _read(name: str) -> dict[str, Any]:
    with (_HERE / name).open(encoding="utf-8") as fh:
        return json.load(fh)


def load_gpu_models() -> list[dict[str, Any]]:
    """Return the catalogue entries of ``gpu_models.json``, one dict per GPU model (SKU)."""
    return _read("gpu_models.json")["models"]


def load_cuda_driver_table() -> list[dict[str, Any]]:
    """Return the rows of ``cuda_drivers.json``: {"cuda": "12.2", "min_driver": "535.54.03"}, ...

    Each row gives the lowest Linux x86_64 driver that fully supports that CUDA minor version
    (the driver of its GA release, from NVIDIA's CUDA Toolkit release notes).
    """
    return _read("cuda_drivers.json")["rows"]


def load_ambiguous_names() -> list[dict[str, Any]]:
    """Return ``gpu_models.json``'s ``ambiguous_names``: ``{"value", "candidates", "source"}``.

    ``value`` is a name several SKUs answer to (``"NVIDIA H100"``, Slurm GRES type ``"a100"``);
    ``candidates`` are those SKUs' slugs. A card reported under such a name is resolved only by
    its PCI device id (see :func:`pools.inventory.gpu_names.model_match`).
    """
    return _read("gpu_models.json").get("ambiguous_names", [])
