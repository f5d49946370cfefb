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

from pools.inventory.nvidia_smi._assembly import Accumulator
from pools.inventory.nvidia_smi._sections import split_sections
from pools.inventory.nvidia_smi._text import read_csv, read_list, read_versions
from pools.inventory.nvidia_smi._tree import read_query, read_xml
from scheduler_adapters.types import ParseResult


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


_READERS = {
    "versions": read_versions,
    "list": read_list,
    "query": read_query,
    "xml": read_xml,
    "csv": read_csv,
}
