"""A capture split into sections, each recognised by its command line or its content."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pools.inventory.nvidia_smi._patterns import (
    COMMAND,
    CUDA_LABELS,
    DRIVER_LABELS,
    LIST_GPU,
    MAX_LINE,
    NO_DEVICES,
    QUERY_GPU_HEADER,
    RULE,
)
from pools.inventory.nvidia_smi._values import At
from scheduler_adapters.types import ParseIssue


@dataclass(frozen=True)
class Section:
    """The output of one command: ``lines[0]`` is line ``first_line`` of the input."""

    kind: str
    lines: tuple[str, ...]
    first_line: int
    columns: tuple[str, ...] | None = None
    noheader: bool | None = None


def split_sections(text: str) -> list[Section]:
    lines = [line.removesuffix("\r") for line in text.removeprefix("\ufeff").split("\n")]
    starts = [n for n, line in enumerate(lines) if _is_command(line)]
    if not starts:
        kind = _sniff(lines)
        return [] if kind is None else [Section(kind, tuple(lines), 1)]
    sections = []
    for n, start in enumerate(starts):
        stop = starts[n + 1] if n + 1 < len(starts) else len(lines)
        body_start = _skip_section_banner(lines, start + 1, stop)
        body_stop = next((i for i in range(body_start, stop) if RULE.fullmatch(lines[i])), stop)
        body = tuple(lines[body_start:body_stop])
        kind, columns, noheader = _command_kind(COMMAND.fullmatch(lines[start])["command"])
        if kind is not None:
            sections.append(
                Section(_by_content(kind, body), body, body_start + 1, columns, noheader)
            )
    return sections


def _is_command(line: str) -> bool:
    return len(line) <= MAX_LINE and COMMAND.fullmatch(line) is not None


def _skip_section_banner(lines: list[str], start: int, stop: int) -> int:
    # A capture file puts comment lines and a rule of '#' between the command and its output.
    for n in range(start, stop):
        if RULE.fullmatch(lines[n]):
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
    body = [line.strip() for line in lines if line.strip() and len(line) <= MAX_LINE]
    if not body:
        return None
    if any(_looks_like_query(line) for line in body):
        return "query"
    if any(LIST_GPU.fullmatch(line) or NO_DEVICES in line.casefold() for line in body):
        return "list"
    if any(label.search(line) for line in body for label in DRIVER_LABELS + CUDA_LABELS):
        return "versions"
    if "," in body[0]:
        return "csv"
    return None


def _looks_like_query(line: str) -> bool:
    return (
        "NVSMI LOG" in line
        or re.fullmatch(r"Attached GPUs\s*:.*", line) is not None
        or QUERY_GPU_HEADER.fullmatch(line) is not None
    )


def numbered_lines(
    section: Section, issues: list[ParseIssue], node: str | None
) -> Iterator[tuple[int, str]]:
    """Yield ``(line number, line)``, skipping lines too long to be nvidia-smi output."""
    for n, line in enumerate(section.lines, start=section.first_line):
        if len(line) > MAX_LINE:
            At(issues, node, n).report(f"line longer than {MAX_LINE} characters skipped")
            continue
        yield n, line
