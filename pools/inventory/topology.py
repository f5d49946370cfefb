"""Read which cards of one host share an NVLink/NVSwitch domain, from ``nvidia-smi`` output.

Pure functions: no Django, no ORM, no I/O. Two commands are read, recognised by content or by a
``# $ nvidia-smi ...`` header line above their output (the capture-file convention of
``tests/fixtures/nvidia-smi/README.md``):

* ``nvidia-smi topo -m`` (``--matrix``): a GPU × device matrix. Each cell says how two devices
  reach each other; NVIDIA's legend under the matrix defines the codes: ``X`` self, ``NV#`` a
  bonded set of # NVLinks, ``PIX`` at most one PCIe bridge, ``PXB`` several PCIe bridges, ``PHB``
  a PCIe host bridge, ``NODE`` between host bridges of one NUMA node, ``SYS`` across NUMA nodes
  (older drivers print ``SOC`` for it). Devices are GPUs (``GPU0``...) and NICs (``mlx5_0`` on older
  drivers, ``NIC0`` with a ``NIC Legend:`` block naming them on newer ones); the trailing columns
  are ``CPU Affinity``, ``NUMA Affinity`` and ``GPU NUMA ID``. Tab-separated as printed, or spaces
  when copied from a rendered page.
* ``nvidia-smi nvlink --status`` (``-s``): per GPU, each link's speed (GB/s) or ``<inactive>``, or
  a sentence that the device has no NVLink, that every link is inactive, or that MIG mode hides
  them.

An **NVLink domain** is a connected component of the graph whose edges are GPU pairs joined by at
least one NVLink (``NV#``, # ≥ 1): on an NVSwitch board (DGX/HGX A100 ``NV12``, H100 ``NV18``) all
eight cards form one domain, on a PCIe box with bridges each bridged pair is one, a card with no
link is a domain of its own. ``all_to_all`` says whether every pair of the domain is linked
directly (NVSwitch, full mesh) or only through other cards (the V100 hybrid cube mesh).

**Unknown stays unknown, never "connected"**: a pair is joined only when the matrix says ``NV#``
for it (both ways when both are printed) and ``nvlink -s`` does not say either card's links are
inactive or absent. No matrix at all gives ``domains=None`` (unknown), except where ``nvlink -s``
says *every* card has no active link (each card is then its own domain, a fact) or the host has one
card. A cell that cannot be read makes the pair not joined and is reported, so a domain is never
larger than the evidence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_COMMAND = re.compile(r"^\s*#\s*\$\s+nvidia-smi\s+(?P<args>.*)$")
_RULE = re.compile(r"^#{8,}\s*$")
_GPU_LABEL = re.compile(r"^GPU(?P<index>[0-9]{1,4})$")
_NVLINK_CODE = re.compile(r"^NV(?P<links>[0-9]{1,3})$")
_PCIE_CODES = frozenset({"PIX", "PXB", "PHB", "NODE", "SYS", "SOC"})
_TRAILING = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_NIC_LEGEND = re.compile(r"^\s*(?P<column>NIC[0-9]{1,4})\s*:\s*(?P<name>\S+)\s*$")
_STATUS_GPU = re.compile(
    r"^GPU\s+(?P<index>[0-9]{1,4}):\s*(?P<name>.*?)\s*(?:\(UUID:\s*(?P<uuid>[^)]*)\))?\s*$"
)
_STATUS_LINK = re.compile(r"^\s*Link\s+(?P<link>[0-9]{1,3}):\s*(?P<value>.*?)\s*$")
_LINK_SPEED = re.compile(r"^(?P<gbps>[0-9]+(?:\.[0-9]+)?)\s*GB/s$")
# nvidia-smi's sentences for a card without usable links (seen in the fixtures' captures)
_NO_NVLINK = ("does not have or support nvlink", "all links are inactive")
_HIDDEN = ("not supported for devices in mig mode",)


@dataclass(frozen=True)
class TopologyIssue:
    """A line or cell that was not understood; ``line`` is 1-based within the text parsed."""

    line: int | None
    message: str


@dataclass(frozen=True)
class TopologyMatrix:
    """What ``nvidia-smi topo -m`` printed.

    ``links`` maps an ordered GPU-index pair to the raw cell (``"NV12"``, ``"PIX"`` ...), both
    directions kept as printed; ``nvlinks`` the bonded NVLink count of each unordered pair
    (``(low, high)``) whose cell is ``NV#`` both ways. ``cpu_affinity`` / ``numa_affinity`` per GPU
    index, ``None`` when absent or ``N/A``. ``nics`` the NIC column names, resolved through the
    ``NIC Legend`` when there is one (``NIC0`` -> ``mlx5_0``).
    """

    gpus: tuple[int, ...]
    links: Mapping[tuple[int, int], str]
    nvlinks: Mapping[tuple[int, int], int]
    cpu_affinity: Mapping[int, str | None]
    numa_affinity: Mapping[int, str | None]
    nics: tuple[str, ...]


@dataclass(frozen=True)
class GpuNvlinkStatus:
    """One card in ``nvidia-smi nvlink --status``.

    ``active_links``: links with a speed; ``link_gbps``: their speeds in GB/s (per direction, as
    printed). ``state``: ``"active"`` (at least one link up), ``"none"`` (no NVLink hardware, or
    every link inactive), ``"unknown"`` (hidden by MIG mode, or nothing said).
    """

    index: int
    name: str | None
    uuid: str | None
    state: str
    active_links: int
    link_gbps: tuple[float, ...]


@dataclass(frozen=True)
class NvlinkDomain:
    """Cards (GPU indices) joined by NVLink; ``all_to_all``: every pair linked directly;
    ``links_per_pair``: the smallest bonded NVLink count between two of its cards (``None`` for a
    single card)."""

    gpus: frozenset[int]
    all_to_all: bool
    links_per_pair: int | None


@dataclass(frozen=True)
class HostInterconnect:
    """The interconnect of one host as read.

    ``domains``: every card in exactly one domain, sorted by lowest index; ``None`` when the
    input cannot tell (unknown, never "all connected"). ``gpus``: every index the input named.
    """

    gpus: tuple[int, ...]
    domains: tuple[NvlinkDomain, ...] | None
    matrix: TopologyMatrix | None
    nvlink_status: Mapping[int, GpuNvlinkStatus]
    issues: tuple[TopologyIssue, ...] = field(default=())


def parse_topology(text: str) -> HostInterconnect:
    """Read ``topo -m`` and/or ``nvlink --status`` output (one command or a capture file of
    several) into the host's NVLink domains. Never raises on content: what cannot be read is an
    issue."""
    issues: list[TopologyIssue] = []
    matrix: TopologyMatrix | None = None
    status: dict[int, GpuNvlinkStatus] = {}
    for kind, start, lines in _sections(text):
        if kind == "topo":
            read = _parse_matrix(lines, start, issues)
            if read is not None:
                if matrix is not None:
                    issues.append(TopologyIssue(start, "a second topology matrix was ignored"))
                else:
                    matrix = read
        elif kind == "nvlink":
            status.update(_parse_nvlink_status(lines, start, issues))
    return _interconnect(matrix, status, issues)


def _sections(text: str) -> list[tuple[str, int, list[str]]]:
    """Split into (kind, first line number, lines); kind ``topo``, ``nvlink`` or ``other``.

    With ``# $ nvidia-smi`` headers the header names the command; without, the content decides
    (a header row starting with ``GPU0`` is a matrix, ``GPU n: name`` lines are a link status).
    """
    raw = _ANSI.sub("", text.replace("\r\n", "\n").replace("\x00", "")).split("\n")
    headed = [i for i, line in enumerate(raw) if _COMMAND.match(line)]
    if not headed:
        return [(_guess_kind(raw), 1, raw)]
    out: list[tuple[str, int, list[str]]] = []
    bounds = [*headed, len(raw)]
    for here, nxt in zip(bounds, bounds[1:], strict=False):
        args = _COMMAND.match(raw[here])["args"].split()  # type: ignore[index]
        kind = "other"
        if args[:1] == ["topo"] and ({"-m", "--matrix"} & set(args[1:])):
            kind = "topo"
        elif args[:1] == ["nvlink"] and ({"-s", "--status"} & set(args[1:])):
            kind = "nvlink"
        body = raw[here + 1 : nxt]
        first = 0
        while first < len(body) and _RULE.match(body[first]):
            first += 1  # the exporter's captures put a rule of #s under each header
        end = next((i for i in range(first, len(body)) if _RULE.match(body[i])), len(body))
        out.append((kind, here + 2 + first, body[first:end]))
    return out


def _guess_kind(lines: list[str]) -> str:
    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.split()[0] == "GPU0" and "GPU" in stripped:
            return "topo"
        if _STATUS_GPU.match(stripped):
            return "nvlink"
    return "other"


def _split_row(line: str) -> list[str]:
    return [cell for cell in re.split(r"\s+", line.strip()) if cell]


def _header_columns(line: str) -> list[str] | None:
    """Device column names of a matrix header row, or ``None`` when ``line`` is not one."""
    body = line.strip()
    for name in _TRAILING:
        body = body.replace(name, " ")
    cells = _split_row(body)
    if not cells or cells[0] != "GPU0":
        return None
    return cells


def _parse_matrix(
    lines: list[str], start: int, issues: list[TopologyIssue]
) -> TopologyMatrix | None:
    header_at, columns = _find_header(lines)
    if header_at is None:
        if any(line.strip() for line in lines):
            issues.append(TopologyIssue(start, "no topology matrix header (a row naming GPU0)"))
        return None
    gpu_columns = [
        int(m["index"]) for m in (_GPU_LABEL.match(name) for name in columns) if m is not None
    ]
    n_gpus = len(gpu_columns)
    if columns[:n_gpus] != [f"GPU{i}" for i in gpu_columns]:
        issues.append(TopologyIssue(start + header_at, "GPU columns are not first in the header"))
        return None
    legend = _nic_legend(lines[header_at + 1 :])
    rows, cpu, numa = _matrix_rows(lines, header_at, len(columns), start, issues)
    links = _matrix_links(rows, gpu_columns, issues)
    missing = sorted(set(gpu_columns) - set(rows))
    if missing:
        issues.append(TopologyIssue(None, "no row for " + ", ".join(f"GPU{i}" for i in missing)))
    return TopologyMatrix(
        gpus=tuple(sorted(gpu_columns)),
        links=links,
        nvlinks=_nvlink_counts(links, rows, issues),
        cpu_affinity=cpu,
        numa_affinity=numa,
        nics=tuple(legend.get(name, name) for name in columns[n_gpus:]),
    )


def _find_header(lines: list[str]) -> tuple[int | None, list[str]]:
    """``(offset, device columns)`` of the first matrix header row, ``(None, [])`` if none."""
    for offset, line in enumerate(lines):
        found = _header_columns(line)
        if found is not None:
            return offset, found
    return None, []


def _matrix_rows(
    lines: list[str], header_at: int, width: int, start: int, issues: list[TopologyIssue]
) -> tuple[dict[int, list[str]], dict[int, str | None], dict[int, str | None]]:
    """``(cells, CPU affinity, NUMA affinity)`` by GPU index of the GPU rows after the header,
    up to the legend; a short row is padded with ``?`` and reported."""
    rows: dict[int, list[str]] = {}
    cpu: dict[int, str | None] = {}
    numa: dict[int, str | None] = {}
    for offset in range(header_at + 1, len(lines)):
        cells = _split_row(lines[offset])
        if not cells:
            continue
        if cells[0].rstrip(":") == "Legend":
            break
        label = _GPU_LABEL.match(cells[0])
        if label is None:
            continue  # a NIC row: what it says about GPUs is in the GPU rows already
        index = int(label["index"])
        values = cells[1:]
        if len(values) < width:
            issues.append(
                TopologyIssue(
                    start + offset, f"GPU{index}: {len(values)} cells for {width} columns"
                )
            )
            values = values + ["?"] * (width - len(values))
        rows[index] = values[:width]
        extra = [value for value in values[width:] if value]
        cpu[index] = _affinity(extra[0]) if len(extra) > 0 else None
        numa[index] = _affinity(extra[1]) if len(extra) > 1 else None
    return rows, cpu, numa


def _matrix_links(
    rows: dict[int, list[str]], gpu_columns: list[int], issues: list[TopologyIssue]
) -> dict[tuple[int, int], str]:
    """The link code of each ordered GPU pair; a diagonal other than ``X`` and unknown codes
    are reported."""
    links: dict[tuple[int, int], str] = {}
    for index, values in rows.items():
        for column, value in zip(gpu_columns, values[: len(gpu_columns)], strict=True):
            if column == index:
                if value != "X":
                    issues.append(TopologyIssue(None, f"GPU{index} to itself is {value!r}, not X"))
                continue
            if not (_NVLINK_CODE.match(value) or value in _PCIE_CODES):
                issues.append(
                    TopologyIssue(None, f"GPU{index}-GPU{column}: {value!r} is not a known link")
                )
            links[(index, column)] = value
    return links


def _nvlink_counts(
    links: dict[tuple[int, int], str], rows: dict[int, list[str]], issues: list[TopologyIssue]
) -> dict[tuple[int, int], int]:
    """NVLinks per GPU pair ``(a, b)`` with ``a < b``: the fewer of the two directions; a pair
    NVLinked one way only is reported and left out."""
    nvlinks: dict[tuple[int, int], int] = {}
    for (a, b), value in links.items():
        if a > b:
            continue
        there = _NVLINK_CODE.match(value)
        back_value = links.get((b, a))
        back = _NVLINK_CODE.match(back_value) if back_value is not None else None
        if there and back_value is None and b not in rows:
            continue  # the other row is missing: reported above, pair stays unknown
        if bool(there) != bool(back):
            issues.append(
                TopologyIssue(
                    None, f"GPU{a}-GPU{b} is {value!r} one way and {back_value!r} the other"
                )
            )
            continue
        if there and back:
            count = int(there["links"])
            if count != int(back["links"]):
                issues.append(
                    TopologyIssue(None, f"GPU{a}-GPU{b}: {value} one way, {back_value} the other")
                )
                count = min(count, int(back["links"]))
            if count >= 1:
                nvlinks[(a, b)] = count
    return nvlinks


def _affinity(value: str) -> str | None:
    return None if value.upper() in {"N/A", "?"} else value


def _nic_legend(lines: Iterable[str]) -> dict[str, str]:
    legend: dict[str, str] = {}
    inside = False
    for line in lines:
        if line.strip().startswith("NIC Legend"):
            inside = True
            continue
        if inside:
            match = _NIC_LEGEND.match(line)
            if match:
                legend[match["column"]] = match["name"]
    return legend


def _parse_nvlink_status(
    lines: list[str], start: int, issues: list[TopologyIssue]
) -> dict[int, GpuNvlinkStatus]:
    cards: dict[int, dict[str, object]] = {}
    current: dict[str, object] | None = None
    for offset, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        header = _STATUS_GPU.match(stripped)
        if header:
            current = {
                "index": int(header["index"]),
                "name": header["name"] or None,
                "uuid": (header["uuid"] or "").strip() or None,
                "speeds": [],
                "inactive": 0,
                "said": None,
            }
            cards[int(header["index"])] = current
            continue
        if current is None:
            issues.append(TopologyIssue(start + offset, f"not under a GPU line: {stripped!r}"))
            continue
        link = _STATUS_LINK.match(stripped)
        if link:
            speed = _LINK_SPEED.match(link["value"])
            if speed:
                current["speeds"].append(float(speed["gbps"]))  # type: ignore[attr-defined]
            elif "inactive" in link["value"].lower():
                current["inactive"] = int(current["inactive"]) + 1  # type: ignore[arg-type]
            else:
                issues.append(TopologyIssue(start + offset, f"link value {link['value']!r}"))
            continue
        lowered = stripped.lower()
        if any(marker in lowered for marker in _NO_NVLINK):
            current["said"] = "none"
        elif any(marker in lowered for marker in _HIDDEN):
            current["said"] = "unknown"
        else:
            issues.append(TopologyIssue(start + offset, f"not understood: {stripped!r}"))
    return {index: _nvlink_card(index, card) for index, card in cards.items()}


def _nvlink_card(index: int, card: dict[str, object]) -> GpuNvlinkStatus:
    """One card of ``nvidia-smi nvlink -s``: ``active`` with link speeds, ``none`` when it said
    so or every link is inactive, else ``unknown``."""
    speeds = tuple(card["speeds"])  # type: ignore[arg-type]
    if speeds:
        state = "active"
    elif card["said"] == "none" or int(card["inactive"]) > 0:  # type: ignore[arg-type]
        state = "none"
    else:
        state = "unknown"
    return GpuNvlinkStatus(
        index=index,
        name=card["name"],  # type: ignore[arg-type]
        uuid=card["uuid"],  # type: ignore[arg-type]
        state=state,
        active_links=len(speeds),
        link_gbps=speeds,
    )


def _interconnect(
    matrix: TopologyMatrix | None,
    status: Mapping[int, GpuNvlinkStatus],
    issues: list[TopologyIssue],
) -> HostInterconnect:
    gpus = tuple(sorted(set(matrix.gpus if matrix else ()) | set(status)))
    if matrix is None:
        known = bool(status) and all(card.state == "none" for card in status.values())
        if len(gpus) == 1 and status and next(iter(status.values())).state != "unknown":
            known = True
        domains = tuple(NvlinkDomain(frozenset({i}), True, None) for i in gpus) if known else None
        return HostInterconnect(gpus, domains, None, dict(status), tuple(issues))
    edges: dict[tuple[int, int], int] = {}
    for (a, b), count in matrix.nvlinks.items():
        refused = [i for i in (a, b) if i in status and status[i].state == "none"]
        if refused:
            issues.append(
                TopologyIssue(
                    None,
                    f"GPU{a}-GPU{b} is NV{count} in the matrix but nvlink -s says GPU{refused[0]} "
                    "has no active link: not counted as joined",
                )
            )
            continue
        edges[(a, b)] = count
    parent = {i: i for i in matrix.gpus}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in edges:
        root_a, root_b = find(a), find(b)
        if root_a != root_b:
            parent[max(root_a, root_b)] = min(root_a, root_b)
    members: dict[int, set[int]] = {}
    for i in matrix.gpus:
        members.setdefault(find(i), set()).add(i)
    domains = []
    for root in sorted(members):
        cards = sorted(members[root])
        pairs = [(a, b) for n, a in enumerate(cards) for b in cards[n + 1 :]]
        counts = [edges[pair] for pair in pairs if pair in edges]
        domains.append(
            NvlinkDomain(
                gpus=frozenset(cards),
                all_to_all=len(counts) == len(pairs),
                links_per_pair=min(counts) if counts else None,
            )
        )
    return HostInterconnect(gpus, tuple(domains), matrix, dict(status), tuple(issues))


HGX_BOARD_SIZES = frozenset({4, 8})
"""Cards on an HGX baseboard: 4 (NVLink all-to-all) or 8 (through NVSwitch). NVIDIA's HGX A100
and H100 boards join every SXM module of the board, so an SXM node of 4 or 8 cards of one model
is one domain; other counts (a partial board, a VM slice) are not guessed."""


def catalogue_domains(
    gpu_indices: Iterable[int], *, form_factor: str | None, nvlink_gbps: int | None
) -> tuple[frozenset[int], ...] | None:
    """NVLink domains of one node from the GPU catalogue's facts, when no capture says more.

    * ``nvlink_gbps`` ``None`` (the catalogue's "no NVLink": every GeForce card, L40S, L4 ...):
      each card is a domain of its own, a fact.
    * ``form_factor == "sxm"`` with NVLink and 4 or 8 cards: one domain of all of them
      (:data:`HGX_BOARD_SIZES`).
    * anything else (PCIe or NVL cards that may or may not carry bridges, odd counts):
      ``None``, unknown. A guess would claim cards joined that are not.
    """
    cards = sorted(set(gpu_indices))
    if not cards:
        return ()
    if nvlink_gbps is None:
        return tuple(frozenset({i}) for i in cards)
    if form_factor == "sxm" and len(cards) in HGX_BOARD_SIZES:
        return (frozenset(cards),)
    return None
