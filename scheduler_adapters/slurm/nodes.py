"""slurmrestd ``GET /slurm/v0.0.3x/nodes`` into :class:`~scheduler_adapters.types.NodeSnapshot`.

Shapes read:

- v0.0.38 (Slurm 22.05): ``state`` is the lower-case base state (``"idle"``), flags are a
  separate upper-case ``state_flags`` list (``["DRAIN"]``).
- v0.0.39-v0.0.41 (Slurm 23.02-24.x): ``state`` is one list of upper-case words holding the
  base state and the flags (``["IDLE", "DRAIN"]``); numbers are ``{set, infinite, number}``.
- v0.0.36/37: ``state`` may be a compound string such as ``"IDLE+DRAIN"``.

The words are Slurm's ``node_states`` / ``node_state_flags`` tables (slurm_protocol_defs.c).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from scheduler_adapters.documents import TooDeep, load_json
from scheduler_adapters.slurm.dialects import DIALECTS, version_key
from scheduler_adapters.slurm.gres import GPU, GresItem, parse_gres_strict
from scheduler_adapters.types import (
    MAX_GPUS_PER_NODE,
    GpuHealth,
    GpuSnapshot,
    InventorySource,
    MigDeviceSnapshot,
    NodeSnapshot,
    NodeState,
    ParseIssue,
    ParseResult,
)

# The data-parser versions whose node objects this reader knows: the shapes above (v0.0.36-v0.0.39
# from before the dialects) and every version the adapter speaks.
NODE_FILE_VERSIONS = frozenset({"v0.0.36", "v0.0.37", "v0.0.38", "v0.0.39", *DIALECTS})

_UP_WORDS = {"IDLE", "MIXED", "MIX", "ALLOCATED", "ALLOC", "COMPLETING", "COMP"}
_DOWN_WORDS = {
    "DOWN",
    "NOT_RESPONDING",
    "FAIL",
    "FAILING",
    "ERROR",
    "FUTURE",
    "INVALID_REG",
    "INVAL",
}
_DRAIN_WORDS = {"DRAIN", "DRAINING", "DRAINED", "DRNG"}
_MAINTENANCE_WORDS = {"MAINTENANCE", "MAINT"}
# Most to least severe: a drained node that is also down is reported down.
_PRECEDENCE = (
    (_DOWN_WORDS, NodeState.DOWN),
    (_MAINTENANCE_WORDS, NodeState.MAINTENANCE),
    (_DRAIN_WORDS, NodeState.DRAIN),
    (_UP_WORDS, NodeState.UP),
)


def parse_slurm_nodes(payload: dict[str, Any] | str) -> ParseResult:
    """Turn a slurmrestd nodes response (dict or JSON text) into node snapshots.

    Per node: ``hostname`` = ``name`` (the Slurm node name, not the ``hostname`` field, which
    can be ``localhost``); ``state`` from ``state``/``state_flags`` (see
    :func:`slurm_node_state`); ``state_reason`` = ``reason`` (``""`` -> ``None``);
    ``partitions``; one :class:`GpuSnapshot` per card of the ``gpu`` GRES entries, indexed
    0..n-1 in GRES order, ``model_name`` = the GRES type exactly (``"a100"``) or ``None`` when
    untyped, health unknown. CPU nodes (``gres`` ``"(null)"`` or ``""``) have no GPUs.

    Never raises. Every problem becomes a :class:`ParseIssue` whose ``field`` is the JSON path
    (``nodes[3].gres``): invalid JSON gives one issue and no nodes; a node without ``name``,
    or whose GPUs cannot be known (malformed or ``N/A`` ``gres``), is left out so that it is
    not mistaken for a node without GPUs, and the other nodes are kept. Entries of the
    response's ``errors`` list are reported as issues too: slurmrestd signals failures there
    even with HTTP 200.
    """
    if isinstance(payload, str):
        try:
            payload = load_json(payload)
        except TooDeep as exc:
            return ParseResult(issues=(ParseIssue(f"invalid JSON: {exc}"),))
        except json.JSONDecodeError as exc:
            return ParseResult(issues=(ParseIssue(f"invalid JSON: {exc.msg}", line=exc.lineno),))
    if not isinstance(payload, dict):
        return ParseResult(issues=(ParseIssue("expected a JSON object with a 'nodes' list"),))

    issues = list(_response_errors(payload.get("errors")))
    entries = payload.get("nodes")
    if not isinstance(entries, list):
        issues.append(ParseIssue("expected a 'nodes' list", field="nodes"))
        return ParseResult(issues=tuple(issues))

    nodes: list[NodeSnapshot] = []
    for position, entry in enumerate(entries):
        node = _parse_node(entry, f"nodes[{position}]", issues)
        if node is not None:
            nodes.append(node)
    return ParseResult(nodes=tuple(nodes), issues=tuple(issues))


def slurm_nodes_refusal(text: str) -> str | None:
    """Why a nodes file cannot be read at all, or ``None``.

    slurmrestd names its output's shape in ``meta.plugin.data_parser``
    (``"data_parser/v0.0.42"``; 22.05's v0.0.38 answers have no such key). A version outside
    :data:`NODE_FILE_VERSIONS` may have moved or renamed the fields cards are read from, so the
    file is refused as a whole instead of imported as nodes without GPUs.
    """
    try:
        payload = load_json(text)
    except (json.JSONDecodeError, TooDeep):
        return None  # parse_slurm_nodes reports it with its line
    meta = payload.get("meta") if isinstance(payload, dict) else None
    plugin = meta.get("plugin") if isinstance(meta, dict) else None
    parser = plugin.get("data_parser") if isinstance(plugin, dict) else None
    if not isinstance(parser, str):
        return None
    version = parser.rpartition("/")[2]
    if version in NODE_FILE_VERSIONS:
        return None
    known = sorted(NODE_FILE_VERSIONS, key=version_key)
    return (
        f"meta.plugin.data_parser is {parser!r}: a slurmrestd data-parser version this portal "
        f"does not read (it reads {known[0]} to {known[-1]}), so where the cards are cannot be "
        "known; export the nodes with a version it reads (GET /slurm/<version>/nodes)"
    )


def _response_errors(errors: Any) -> Iterable[ParseIssue]:
    if not isinstance(errors, list):
        return
    for position, error in enumerate(errors):
        if isinstance(error, dict):
            number = error.get("error_number", error.get("error_code"))
            text = error.get("error") or error.get("description") or "no description"
            message = f"slurmrestd error {number}: {text}" if number is not None else text
        else:
            message = f"slurmrestd error: {error!r}"
        yield ParseIssue(message, field=f"errors[{position}]")


def _parse_node(entry: Any, path: str, issues: list[ParseIssue]) -> NodeSnapshot | None:
    if not isinstance(entry, dict):
        issues.append(ParseIssue("node entry is not an object", field=path))
        return None
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        issues.append(ParseIssue("node has no name", field=f"{path}.name"))
        return None
    name = name.strip()

    gpus = _gpus_from_gres(entry, path, name, issues)
    if gpus is None:
        return None

    state, state_problem = slurm_node_state(entry.get("state"), entry.get("state_flags"))
    if state_problem:
        issues.append(ParseIssue(state_problem, field=f"{path}.state", node=name))

    reason = entry.get("reason")
    return NodeSnapshot(
        hostname=name,
        source=InventorySource.SLURM,
        gpus=gpus,
        state=state,
        state_reason=(reason.strip() or None) if isinstance(reason, str) else None,
        partitions=_partitions(entry.get("partitions"), path, name, issues),
        gpus_allocated=_gpus_allocated(entry, path, name, len(gpus), issues),
    )


def _gpus_allocated(
    entry: dict[str, Any], path: str, name: str, cards: int, issues: list[ParseIssue]
) -> int | None:
    """Cards of the node allocated to jobs, from ``gres_used`` (``gpu:h100:5(IDX:0-4)``).

    slurmctld fills it whatever ``AccountingStorageTRES`` tracks, so it is right on clusters
    whose TRES carry no GPUs (node ``AllocTRES`` then reads 0 GPUs). ``None`` when the field is
    absent or unreadable (reported); an empty string or ``gpu:0`` is 0 allocated.
    """
    raw = entry.get("gres_used")
    if raw is None:
        return None
    if raw == "":
        return 0  # slurmrestd prints "" when nothing is used, as for gres
    try:
        items = parse_gres_strict(raw)
    except ValueError as exc:
        issues.append(
            ParseIssue(f"unreadable GRES used: {exc}", field=f"{path}.gres_used", node=name)
        )
        return None
    if items is None:
        return None
    # whole cards only: a MIG-typed entry counts slices, not cards
    used = sum(
        item.count for item in items if item.name == GPU and mig_gres_type(item.type) is None
    )
    if used > cards:
        issues.append(
            ParseIssue(
                f"GRES used {raw!r} counts {used} GPUs on a node of {cards}",
                field=f"{path}.gres_used",
                node=name,
            )
        )
        return None
    return used


def _gpus_from_gres(
    entry: dict[str, Any], path: str, name: str, issues: list[ParseIssue]
) -> tuple[GpuSnapshot, ...] | None:
    field = f"{path}.gres"
    raw = entry.get("gres")
    if raw == "":
        return ()  # slurmrestd prints an empty string for a node without GRES
    try:
        items = parse_gres_strict(raw)
    except ValueError as exc:
        issues.append(ParseIssue(f"unreadable GRES: {exc}", field=field, node=name))
        return None
    if items is None:
        issues.append(
            ParseIssue(f"GPU inventory unknown (gres is {raw!r})", field=field, node=name)
        )
        return None
    gpu_items = [item for item in items if item.name == GPU]
    whole = [item for item in gpu_items if mig_gres_type(item.type) is None]
    sliced = [item for item in gpu_items if mig_gres_type(item.type) is not None]
    # counted before anything is expanded: a corrupt count must not build a billion entries
    total = sum(item.count for item in whole)
    slices = sum(item.count for item in sliced)
    if total > MAX_GPUS_PER_NODE or slices > MAX_MIG_SLICES:
        issues.append(
            ParseIssue(
                f"implausible GPU count {total + slices} in GRES {raw!r}", field=field, node=name
            )
        )
        return None
    model_names = [item.type for item in whole for _ in range(item.count)]
    mig_cards = _mig_cards(sliced, {item.type for item in whole})
    total = len(model_names) + len(mig_cards)
    if total > MAX_GPUS_PER_NODE:
        issues.append(
            ParseIssue(f"implausible GPU count {total} in GRES {raw!r}", field=field, node=name)
        )
        return None
    cards = [
        GpuSnapshot(index=index, model_name=model, health=GpuHealth.UNKNOWN)
        for index, model in enumerate(model_names)
    ]
    for offset, (model, slices) in enumerate(mig_cards):
        cards.append(
            GpuSnapshot(
                index=len(model_names) + offset,
                model_name=model,
                health=GpuHealth.UNKNOWN,
                mig_mode=True,
                mig_devices=tuple(
                    MigDeviceSnapshot(index=k, profile=profile, gres_type=gres_type)
                    for k, (profile, gres_type) in enumerate(slices)
                ),
            )
        )
    return tuple(cards)


# A node of 64 cards cut into 7 slices each.
MAX_MIG_SLICES = MAX_GPUS_PER_NODE * 7
# A MIG slice as Slurm names its GRES type: the profile alone (gres.conf ``Type=1g.10gb``) or
# AutoDetect=nvml's ``<card>_<profile>`` (``nvidia_a100_80gb_pcie_1g.10gb``: the card's name,
# lower case, blanks as ``_``, then the profile; Slurm gres.conf(5), AutoDetect and MIG).
_MIG_GRES_TYPE = re.compile(
    r"(?:(?P<card>[a-z0-9_.\-]+)_)?(?P<profile>[12347]g\.[0-9]+gb(?:\+me)?)", re.IGNORECASE
)


def mig_gres_type(gres_type: str | None) -> tuple[str | None, str] | None:
    """``nvidia_a100_80gb_pcie_1g.10gb`` → ``("nvidia_a100_80gb_pcie", "1g.10gb")``,
    ``1g.10gb`` → ``(None, "1g.10gb")``: the card a MIG-typed GRES names (``None`` when only
    the profile is given) and the profile; ``None`` for a GRES type that is no MIG slice."""
    match = _MIG_GRES_TYPE.fullmatch(gres_type or "")
    if match is None:
        return None
    return match["card"], match["profile"].lower()


def _mig_cards(
    sliced: list[GresItem], whole_types: set[str | None]
) -> list[tuple[str | None, list[tuple[str, str]]]]:
    """The cards in MIG mode that ``sliced`` (MIG-typed GRES items) are slices of, as
    ``(card model name, [(profile, GRES type), ...])``.

    Slurm counts slices, not the cards they are cut from, so the cards are the fewest that
    hold them: each card has 7 compute slices (NVIDIA MIG user guide) and a ``<g>g`` profile
    takes ``g``; slices are dealt largest first onto the first card with room (first-fit
    decreasing), per card model. The model is the one AutoDetect's type names, else the
    node's one whole-card GRES type when it has exactly one (``gpu:a100:6,gpu:1g.10gb:7``),
    else unknown (``None``)."""
    known = sorted(t for t in whole_types if t)
    by_card: dict[str | None, list[tuple[int, str, str]]] = {}
    for item in sliced:
        card, profile = mig_gres_type(item.type) or (None, "")
        model = card or (known[0] if len(known) == 1 else None)
        compute = int(profile.split("g.", 1)[0])
        by_card.setdefault(model, []).extend([(compute, profile, item.type)] * item.count)
    cards: list[tuple[str | None, list[tuple[str, str]]]] = []
    for model, slices in by_card.items():
        room: list[int] = []
        held: list[list[tuple[str, str]]] = []
        for compute, profile, gres_type in sorted(slices, key=lambda s: (-s[0], s[1])):
            spot = next((k for k, free in enumerate(room) if free >= compute), None)
            if spot is None:
                room.append(7)
                held.append([])
                spot = len(room) - 1
            room[spot] -= compute
            held[spot].append((profile, gres_type))
        cards.extend((model, slices_of_card) for slices_of_card in held)
    return cards


def _partitions(raw: Any, path: str, name: str, issues: list[ParseIssue]) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):  # older plugins print "gpu,debug"
        return tuple(part.strip() for part in raw.split(",") if part.strip())
    if isinstance(raw, list) and all(isinstance(part, str) for part in raw):
        return tuple(raw)
    issues.append(
        ParseIssue("partitions is not a list of names", field=f"{path}.partitions", node=name)
    )
    return ()


def slurm_node_state(state: Any, flags: Any = None) -> tuple[NodeState | None, str | None]:
    """Map Slurm's node state words to a :class:`NodeState`, with a problem text if unmapped.

    ``state`` is a string (``"idle"``, ``"IDLE+DRAIN"``, ``"down*"``) or a list of words
    (v0.0.39+); ``flags`` is v0.0.38's ``state_flags`` list. Case is ignored. From most to
    least severe: DOWN, NOT_RESPONDING (``*``), FAIL, ERROR, FUTURE, INVALID_REG -> down;
    MAINTENANCE (node in a maintenance reservation) -> maintenance; DRAIN and its
    DRAINING/DRAINED forms -> drain; IDLE, MIXED, ALLOCATED, COMPLETING -> up. Flags that do not
    change availability (CLOUD, RESERVED, POWERED_DOWN, REBOOT_REQUESTED...) are ignored.
    Slurm's own UNKNOWN state, and words that match nothing, give ``(None, problem)``.
    """
    words = _state_words(state) + _state_words(flags)
    if not words:
        return None, "node state missing"
    for known, mapped in _PRECEDENCE:
        if known.intersection(words):
            return mapped, None
    if "UNKNOWN" in words:
        return None, "Slurm reports the node state as UNKNOWN"
    return None, f"unrecognised node state {' '.join(words)!r}"


def _state_words(raw: Any) -> list[str]:
    if raw is None:
        return []
    parts = raw.split("+") if isinstance(raw, str) else raw if isinstance(raw, list) else []
    words: list[str] = []
    for part in parts:
        if not isinstance(part, str) or not part.strip():
            continue
        word = part.strip().upper()
        if word.endswith("*"):  # sinfo/scontrol's "not responding" marker
            words.append("NOT_RESPONDING")
            word = word.rstrip("*")
        words.append(word)
    return words
