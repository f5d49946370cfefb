"""NVIDIA driver and CUDA version arithmetic, on integer tuples and never on floats.

``float("418.87.01")`` raises and ``float("535.129") < float("535.54")`` orders two 535 drivers the
wrong way round (tricky input C02), so versions are parsed into tuples of ints and compared
component by component.

The driver -> CUDA question is answered from NVIDIA's release-notes table (see
``pools/inventory/catalogue/cuda_drivers.json``): a driver supports a CUDA version when it is at
least the
driver of that version's GA release. That is also what nvidia-smi's ``CUDA Version`` banner reports
(the highest CUDA the driver supports, not a toolkit that is installed). CUDA minor version
compatibility, which runs 12.x binaries on any >= 525 driver with reduced features, is ignored on
purpose: a pool either fully supports a request's CUDA version or is not offered for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from itertools import zip_longest
from typing import Any

_DRIVER = re.compile(r"[0-9]+(?:\.[0-9]+)+")
_CUDA = re.compile(r"([0-9]+)\.([0-9]+)(?:\.[0-9]+)?")
# What nvidia-smi prints instead of a value (with or without brackets); they mean "unknown".
_PLACEHOLDERS = frozenset(
    {"", "n/a", "na", "not supported", "unknown", "unknown error", "insufficient permissions"}
)


def _is_placeholder(raw: str | None) -> bool:
    return raw is None or raw.strip().strip("[]").strip().lower() in _PLACEHOLDERS


def parse_driver_version(raw: str) -> tuple[int, ...]:
    """Parse ``'418.87.01'`` into ``(418, 87, 1)``; raise ``ValueError`` on anything else.

    Leading zeros are dropped per component (``01`` is 1), as NVIDIA's own ordering requires.
    """
    text = raw.strip()
    if not _DRIVER.fullmatch(text):
        raise ValueError(f"not an NVIDIA driver version: {raw!r}")
    return tuple(int(part) for part in text.split("."))


def driver_branch(raw: str) -> int:
    """Return the driver branch, the first component: ``'535.129.03'`` -> ``535``."""
    return parse_driver_version(raw)[0]


def parse_cuda_version(raw: str | None) -> tuple[int, int] | None:
    """Parse a CUDA version into ``(major, minor)``.

    ``'12.2'`` -> ``(12, 2)``; a patch part is dropped (``'12.4.1'`` -> ``(12, 4)``). nvidia-smi
    placeholders such as ``'N/A'`` or ``'[Not Supported]'`` -> ``None`` (unknown, never 0).
    Anything else, including a bare major like ``'12'``, raises ``ValueError``: it does not name
    one CUDA version.
    """
    if _is_placeholder(raw):
        return None
    match = _CUDA.fullmatch(raw.strip())
    if match is None:
        raise ValueError(f"not a CUDA version: {raw!r}")
    return int(match.group(1)), int(match.group(2))


def driver_supports(max_cuda: str | None, wanted: tuple[int, int] | None) -> bool:
    """Whether a driver group whose ``max_cuda`` is this runs CUDA ``wanted`` (None: any).
    A node without a known driver supports nothing in particular."""
    if wanted is None:
        return True
    supported = parse_cuda_version(max_cuda or "")
    return supported is not None and supported >= wanted


def _at_least(version: tuple[int, ...], floor: tuple[int, ...]) -> bool:
    # Missing components count as 0, so 570.26 and 570.26.0 compare equal.
    for have, need in zip_longest(version, floor, fillvalue=0):
        if have != need:
            return have > need
    return True


def _rows(table: Iterable[Mapping[str, Any]]) -> list[tuple[tuple[int, int], tuple[int, ...]]]:
    rows = []
    for row in table:
        cuda = parse_cuda_version(row["cuda"])
        if cuda is None:
            raise ValueError(f"CUDA/driver table row without a CUDA version: {row!r}")
        rows.append((cuda, parse_driver_version(row["min_driver"])))
    if not rows:
        raise ValueError("empty CUDA/driver table")
    return sorted(rows)


def _max_cuda(
    driver: tuple[int, ...], rows: list[tuple[tuple[int, int], tuple[int, ...]]]
) -> tuple[int, int] | None:
    return max((cuda for cuda, floor in rows if _at_least(driver, floor)), default=None)


def max_cuda_for_driver(raw: str, table: Iterable[Mapping[str, Any]]) -> tuple[int, int] | None:
    """Return the highest CUDA version in ``table`` whose ``min_driver`` is <= the driver.

    ``None`` when the driver is older than every row (the table cannot say). Raises ``ValueError``
    when the driver string is not a version.
    """
    return _max_cuda(parse_driver_version(raw), _rows(table))


def cuda_beyond_table(
    driver: str | None, reported_cuda: str | None, table: Iterable[Mapping[str, Any]]
) -> tuple[tuple[int, int], tuple[int, int] | None] | None:
    """``(reported, known)`` when nvidia-smi's reported CUDA for ``driver`` is newer than the
    highest CUDA ``table`` gives that driver (``known``; None when the driver is older than
    every row): the table is out of date. None when it is not, or either input is unknown or
    unreadable (a placeholder, garbage). ``"610.10"``, ``"13.3"`` against a table ending at 13.2
    → ``((13, 3), (13, 2))``."""
    try:
        reported = parse_cuda_version(reported_cuda)
        known = max_cuda_for_driver(driver or "", table)
    except ValueError:
        return None
    if reported is None or (known is not None and reported <= known):
        return None
    return reported, known
