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

from collections.abc import Sequence
from dataclasses import dataclass

from pools.inventory.nvidia_smi._assembly import Accumulator
from pools.inventory.nvidia_smi._sections import numbered_lines, split_sections
from pools.inventory.nvidia_smi._text import csv_table, read_csv, read_list, read_versions
from pools.inventory.nvidia_smi._tree import read_query, read_xml
from pools.inventory.nvidia_smi._values import clean_value
from scheduler_adapters.types import ParseIssue, ParseResult


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
    acc = Accumulator(hostname)
    for section in split_sections(text):
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
    section = next((s for s in split_sections(text) if s.kind == "csv"), None)
    if section is None:
        issues.append(ParseIssue("no --query-gpu CSV found"))
        return QueryGpuRows((), (), (), tuple(issues))
    table = csv_table(numbered_lines(section, issues, None), section, columns, issues, None)
    if table is None:
        return QueryGpuRows((), (), (), tuple(issues))
    header, rows = table
    return QueryGpuRows(
        columns=header,
        rows=tuple({name: clean_value(cell) for name, cell in row.items()} for _, row in rows),
        lines=tuple(line for line, _ in rows),
        issues=tuple(issues),
    )


_READERS = {
    "versions": read_versions,
    "list": read_list,
    "query": read_query,
    "xml": read_xml,
    "csv": read_csv,
}
