"""Slurm host lists: ``gpu-a100-[01-03,07],cpu1`` -> the node names they stand for.

Syntax (``scontrol show hostnames``; https://slurm.schedmd.com/slurm.conf.html, "NodeName"):
names separated by commas outside brackets; each name may hold bracket groups of comma-separated
numbers and ``first-last`` ranges. Each range keeps the width of its first number
(``[08-10,7]`` -> ``08 09 10 7``, as scontrol prints it).
Several groups multiply out in order (``r[1-2]n[1-2]`` -> ``r1n1 r1n2 r2n1 r2n2``).
"""

from __future__ import annotations

import re
from itertools import product

_RANGE = re.compile(r"(?P<first>\d+)(?:-(?P<last>\d+))?")
# A host list from slurmctld names real nodes; a larger expansion is a corrupt string.
MAX_HOSTS = 100_000


def expand_hostlist(text: str) -> list[str]:
    """The node names of ``text`` in Slurm's order; ``""`` gives ``[]``.

    Raises ``ValueError`` naming the bad part for unbalanced brackets, a range that runs
    backwards, or an expansion of more than :data:`MAX_HOSTS` names.
    """
    names: list[str] = []
    for entry in _split_outside_brackets(text.strip()):
        if entry:
            names.extend(_expand_entry(entry))
        if len(names) > MAX_HOSTS:
            raise ValueError(f"host list {text[:80]!r} expands to more than {MAX_HOSTS} names")
    return names


def _split_outside_brackets(text: str) -> list[str]:
    entries, depth, start = [], 0, 0
    for position, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise ValueError(f"nested '[' in host list {text!r}")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in host list {text!r}")
        elif char == "," and depth == 0:
            entries.append(text[start:position].strip())
            start = position + 1
    if depth:
        raise ValueError(f"unbalanced '[' in host list {text!r}")
    entries.append(text[start:].strip())
    return entries


def _expand_entry(entry: str) -> list[str]:
    parts: list[list[str]] = []
    rest = entry
    while "[" in rest:
        head, _, tail = rest.partition("[")
        body, _, rest = tail.partition("]")
        parts.append([head])
        parts.append(_expand_numbers(body, entry))
    parts.append([rest])
    return ["".join(choice) for choice in product(*parts)]


def _expand_numbers(body: str, entry: str) -> list[str]:
    numbers: list[str] = []
    for part in body.split(","):
        match = _RANGE.fullmatch(part.strip())
        if match is None:
            raise ValueError(f"bad range {part!r} in host list entry {entry!r}")
        first, last = match["first"], match["last"] or match["first"]
        if int(last) < int(first):
            raise ValueError(f"range {part!r} runs backwards in host list entry {entry!r}")
        if int(last) - int(first) > MAX_HOSTS:
            raise ValueError(f"range {part!r} is too large in host list entry {entry!r}")
        width = len(first)
        numbers.extend(str(n).zfill(width) for n in range(int(first), int(last) + 1))
    return numbers
