"""Slurm GRES and TRES strings, as printed by scontrol, sinfo, squeue and slurmrestd.

GRES syntax (slurm.conf ``Gres=``, gres.conf, ``scontrol show node``)::

    item[,item...]            items separated by commas that are outside parentheses
    item ::= name[:type][:count][(suffix)]
    suffix ::= S:<socket ranges> | IDX:<index ranges> | IDX:N/A

``count`` may end in K/M/G/T/P (powers of 1024, gres.conf ``Count=``): ``tmp:844G``.
``type`` ``(null)`` means an untyped GPU (Slurm <= 25.11 prints it when topology is known).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from scheduler_adapters.units import parse_slurm_memory_mib

GPU = "gpu"

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_TYPE = re.compile(r"[^\s:,()=]+")
_COUNT = re.compile(r"(?P<number>\d+)(?P<suffix>[KMGTP]?)", re.IGNORECASE)
_COUNT_MULTIPLIER = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}
_INDEX_RANGE = re.compile(r"(?P<first>\d+)(?:-(?P<last>\d+))?")
_UNKNOWN = {"", "N/A"}
_NONE = "(null)"
_NULL_TYPE = "(null)"
# Index lists come from real hardware; a larger range is a corrupt string, not 10^9 GPUs.
_MAX_INDEX_RANGE = 4096


@dataclass(frozen=True)
class GresItem:
    """One GRES entry: ``gpu:a100:4(S:0-1)`` -> ``GresItem("gpu", "a100", 4, None)``.

    ``type`` is ``None`` when untyped (``gpu:8``, ``gpu:(null):4``). ``count`` is a plain
    integer, already multiplied out for size suffixes (``tmp:844G`` -> 844 * 2**30).
    ``indexes`` are the device indexes of an ``(IDX:...)`` suffix (``IDX:0,2-3`` -> (0, 2, 3),
    ``IDX:N/A`` -> ()), or ``None`` when the string gave none (``(S:...)`` is socket
    affinity, not indexes).
    """

    name: str
    type: str | None
    count: int
    indexes: tuple[int, ...] | None = None


GresList = tuple[GresItem, ...]


def parse_gres(text: str | None) -> GresList | None:
    """Read a GRES string; never raises.

    - ``"(null)"`` -> ``()``: the node has no GRES (a CPU node).
    - ``None``, ``""``, ``"N/A"`` and anything malformed -> ``None``: unknown. ``N/A`` is what
      squeue ``%b`` prints for ``--gpus`` jobs that do hold GPUs, so it must not read as 0.
    - otherwise one :class:`GresItem` per comma-separated entry, non-GPU entries (``mps:200``,
      ``shard:64``, ``tmp:844G``) included.

    Use :func:`parse_gres_strict` to learn why a string was rejected.
    """
    try:
        return parse_gres_strict(text)
    except ValueError:
        return None


def parse_gres_strict(text: str | None) -> GresList | None:
    """Like :func:`parse_gres`, but raises ``ValueError`` naming the bad entry when malformed."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError(f"GRES must be a string, got {type(text).__name__}")
    if "\0" in text:
        raise ValueError("NUL character in GRES string")
    stripped = text.strip()
    if stripped in _UNKNOWN:
        return None
    if stripped == _NONE:
        return ()
    return tuple(_parse_item(entry) for entry in _split_outside_parentheses(stripped))


def _split_outside_parentheses(text: str) -> list[str]:
    entries: list[str] = []
    depth = 0
    start = 0
    for position, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ')' in GRES {text!r}")
        elif char == "," and depth == 0:
            entries.append(text[start:position])
            start = position + 1
    if depth != 0:
        raise ValueError(f"unbalanced '(' in GRES {text!r}")
    entries.append(text[start:])
    return [entry.strip() for entry in entries]


def _parse_item(entry: str) -> GresItem:
    if not entry:
        raise ValueError("empty GRES entry")
    body, indexes = _split_suffix(entry)
    # "(null)" as a type contains parentheses, so it is swapped out before splitting on ':'.
    parts = body.replace(f":{_NULL_TYPE}", ":\0").split(":")
    name = parts[0]
    if not _NAME.fullmatch(name):
        raise ValueError(f"bad GRES name in {entry!r}")
    gres_type: str | None = None
    count = 1
    if len(parts) == 2:
        # "name:N" is a count, "name:type" a type with an implied count of 1 (Slurm's reading).
        if _COUNT.fullmatch(parts[1]):
            count = _parse_count(parts[1], entry)
        else:
            gres_type = _parse_type(parts[1], entry)
    elif len(parts) == 3:
        gres_type = _parse_type(parts[1], entry)
        count = _parse_count(parts[2], entry)
    elif len(parts) > 3:
        raise ValueError(f"too many ':' in GRES entry {entry!r}")
    return GresItem(name=name, type=gres_type, count=count, indexes=indexes)


def _split_suffix(entry: str) -> tuple[str, tuple[int, ...] | None]:
    """Split ``gpu:a100:2(IDX:0-1)`` into ``("gpu:a100:2", (0, 1))``."""
    body = entry.replace(_NULL_TYPE, "\0")
    if "(" not in body:
        return entry, None
    open_at = body.index("(")
    if not body.endswith(")") or body.count("(") != 1:
        raise ValueError(f"bad parenthesised suffix in GRES entry {entry!r}")
    suffix = body[open_at + 1 : -1]
    head = entry[: entry.rindex("(")]
    if suffix.startswith("IDX:"):
        return head, _parse_index_list(suffix[len("IDX:") :], entry)
    # S:<sockets> is affinity; other annotations (shard/mps usage) carry no device indexes.
    return head, None


def _parse_index_list(text: str, entry: str) -> tuple[int, ...]:
    if text == "N/A":
        return ()
    indexes: list[int] = []
    for part in text.split(","):
        match = _INDEX_RANGE.fullmatch(part)
        if match is None:
            raise ValueError(f"bad IDX list in GRES entry {entry!r}")
        first = int(match["first"])
        last = int(match["last"]) if match["last"] is not None else first
        if last < first or last - first > _MAX_INDEX_RANGE:
            raise ValueError(f"bad IDX range {part!r} in GRES entry {entry!r}")
        indexes.extend(range(first, last + 1))
    return tuple(indexes)


def _parse_type(text: str, entry: str) -> str | None:
    if text == "\0":
        return None
    if not _TYPE.fullmatch(text):
        raise ValueError(f"bad GRES type in {entry!r}")
    return text


def _parse_count(text: str, entry: str) -> int:
    match = _COUNT.fullmatch(text)
    if match is None:
        raise ValueError(f"bad GRES count {text!r} in {entry!r}")
    return int(match["number"]) * _COUNT_MULTIPLIER[match["suffix"].upper()]


def parse_tres(text: str | None) -> dict[str, Decimal] | None:
    """Read a TRES string into ``{name: amount}``.

    ``"cpu=8,mem=16000M,billing=8,gres/gpu=4,gres/gpu:a100=4"`` ->
    ``{"cpu": 8, "mem": 16000, "billing": 8, "gres/gpu": 4, "gres/gpu:a100": 4}``.
    ``mem`` is MiB (Slurm's M/G/T suffixes are binary, see
    :func:`~scheduler_adapters.units.parse_slurm_memory_mib`). Other amounts are counts and may
    be fractional (``billing=1.5``); a K/M/G/T/P suffix on them (``fs/disk=100G``) multiplies
    by powers of 1024 as Slurm's ``convert_num_unit`` prints them.

    ``None`` (slurmrestd ``tres_used: null``) -> ``None``; ``""`` -> ``{}``.
    Raises ``ValueError`` for a malformed pair or a name given twice.
    """
    if text is None:
        return None
    result: dict[str, Decimal] = {}
    stripped = text.strip()
    if not stripped:
        return result
    for pair in stripped.split(","):
        name, sep, amount = pair.strip().partition("=")
        if not sep or not name or not amount:
            raise ValueError(f"bad TRES pair {pair!r} in {text!r}")
        if name in result:
            raise ValueError(f"TRES {name!r} given twice in {text!r}")
        result[name] = _parse_tres_amount(name, amount, text)
    return result


def _parse_tres_amount(name: str, amount: str, text: str) -> Decimal:
    try:
        if name == "mem":
            mib = parse_slurm_memory_mib(amount)
            if mib is None:
                raise ValueError(f"TRES mem has no size: {amount!r}")
            return mib
        suffix = amount[-1].upper()
        if suffix in _COUNT_MULTIPLIER:
            value = Decimal(amount[:-1]) * _COUNT_MULTIPLIER[suffix]
        else:
            value = Decimal(amount)
    except (ValueError, InvalidOperation) as exc:
        raise ValueError(f"bad TRES amount {name}={amount!r} in {text!r}") from exc
    if not value.is_finite():
        raise ValueError(f"bad TRES amount {name}={amount!r} in {text!r}")
    return value
