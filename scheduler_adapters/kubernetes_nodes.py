"""Kubernetes Node objects into :class:`~scheduler_adapters.types.NodeSnapshot`.

GPU facts come from the labels NVIDIA GPU Feature Discovery (GFD, part of
NVIDIA/k8s-device-plugin, ``internal/lm``) puts on each node, and from the extended resources
the device plugin advertises in ``status.allocatable``. The two disagree under time-slicing:
allocatable ``nvidia.com/gpu`` then counts replicas, and only the ``nvidia.com/gpu.count``
label still holds the number of physical cards.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from typing import Any

import yaml

from scheduler_adapters.documents import TooDeep, load_yaml
from scheduler_adapters.types import (
    MAX_GPUS_PER_NODE,
    GpuHealth,
    GpuSnapshot,
    InventorySource,
    MigDeviceSnapshot,
    MigSlices,
    NodeSnapshot,
    NodeState,
    ParseIssue,
    ParseResult,
)
from scheduler_adapters.units import parse_k8s_extended_count

GPU_RESOURCE = "nvidia.com/gpu"
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"  # time-slicing with renameByDefault
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
SHARED_SUFFIX = ".shared"

LABEL_COUNT = "nvidia.com/gpu.count"
LABEL_REPLICAS = "nvidia.com/gpu.replicas"
LABEL_PRODUCT = "nvidia.com/gpu.product"
LABEL_MEMORY_MIB = "nvidia.com/gpu.memory"
LABEL_MIG_STRATEGY = "nvidia.com/mig.strategy"
# GFD appends "-SHARED" to the product when a resource is replicated and not renamed.
PRODUCT_SHARED_SUFFIX = "-SHARED"

# Tried in order; the later keys are the deprecated spellings older GFD releases set.
_DRIVER_FULL = "nvidia.com/cuda.driver-version.full"
_DRIVER_PARTS = (
    ("nvidia.com/cuda.driver-version.major", "nvidia.com/cuda.driver-version.minor",
     "nvidia.com/cuda.driver-version.revision"),
    ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev"),
)  # fmt: skip
_CUDA_FULL = "nvidia.com/cuda.runtime-version.full"
_CUDA_PARTS = (
    ("nvidia.com/cuda.runtime-version.major", "nvidia.com/cuda.runtime-version.minor"),
    ("nvidia.com/cuda.runtime.major", "nvidia.com/cuda.runtime.minor"),
)

# A100/H100/H200 split into at most 7 GPU instances; more per card means a misread count.
MAX_MIG_DEVICES_PER_GPU = 7
# NVIDIA MIG user guide: 7 compute slices and 8 memory slices per card (A100, H100, H200, H20).
MIG_COMPUTE_SLICES = 7
MIG_MEMORY_SLICES = 8
# Tries :func:`_place_mig_slices` makes before giving up; a real layout takes one per slice.
MIG_PLACEMENT_STEPS = 20_000
MIG_PRODUCT_MARK = "-MIG-"
MIG_INVALID = "INVALID"
# The MIG user guide's "Supported MIG Profiles" tables (A100, H100, H200, GB200...): every GPU
# instance takes 1, 2, 3, 4 or 7 compute slices (1g.10gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb on
# an H100 80GB); a profile with another count, such as 5g.50gb or 99g.999gb, does not exist.
_MIG_PROFILE = re.compile(r"(?P<g>[12347])g\.(?P<gb>[0-9]+)gb(?P<me>\+me)?", re.IGNORECASE)

_WHOLE_NUMBER = re.compile(r"\d+")


class _SkipNode(Exception):
    """The node's GPUs cannot be known; the issue says why."""

    def __init__(self, issue: ParseIssue) -> None:
        super().__init__(issue.message)
        self.issue = issue


def parse_kubernetes_nodes(payload: dict[str, Any] | list[Any] | str) -> ParseResult:
    """Turn Kubernetes Node objects into node snapshots.

    ``payload`` is a ``NodeList`` (or ``kind: List``, as ``kubectl get nodes -o yaml`` prints),
    a single ``Node``, a plain list of Nodes, or the same as YAML/JSON text.

    Per node, from GFD labels and ``status.allocatable``:

    - ``hostname`` = ``metadata.name``; ``labels`` = all node labels, unchanged.
    - physical cards = label ``nvidia.com/gpu.count``. Allocatable ``nvidia.com/gpu`` (or
      ``nvidia.com/gpu.shared`` when renamed) counts time-slicing replicas, so it is used only
      when there is neither a count label nor a replicas label above 1.
      ``gpu_replicas`` = label ``nvidia.com/gpu.replicas`` when above 1.
    - ``model_name`` = label ``nvidia.com/gpu.product`` with a trailing ``-SHARED`` removed
      (``NVIDIA-GeForce-RTX-4090-SHARED`` -> ``NVIDIA-GeForce-RTX-4090``), hyphens kept;
      ``memory_total_mib`` = label ``nvidia.com/gpu.memory`` (MiB).
    - MIG (``mig.strategy=mixed``): allocatable ``nvidia.com/mig-<profile>`` gives one
      :class:`MigDeviceSnapshot` per instance (count from ``nvidia.com/mig-<profile>.count``
      when labelled, MiB from ``nvidia.com/mig-<profile>.memory``), and ``mig_mode=True`` on
      the cards that hold them. With one card they all sit on it. With several, the Node
      object does not say which card holds which instance: they are dealt out in profile
      order in equal contiguous blocks (card 0 first) or, when a card would then hold more
      than its 7 compute and 8 memory slices (NVIDIA MIG user guide), placed largest first on
      the least-loaded card, so per-node and per-profile totals are exact but the
      per-card split is a guess; slices no placement fits, or a profile that is no MIG
      profile (``<g>g.<m>gb``, g in 1, 2, 3, 4, 7), skip the node.
    - ``driver_version`` = ``nvidia.com/cuda.driver-version.full``, else major.minor.revision
      from ``nvidia.com/cuda.driver-version.*`` or the deprecated ``nvidia.com/cuda.driver.*``;
      ``cuda_version`` likewise from ``nvidia.com/cuda.runtime-version.*`` /
      ``nvidia.com/cuda.runtime.*``.
    - ``state``: Ready condition ``True`` -> up, ``False``/``Unknown`` -> down (reason from the
      condition's message); ``spec.unschedulable: true`` (cordoned) -> drain unless down.

    Never raises. Quantities are read with :func:`parse_k8s_extended_count`. A node whose GPUs
    cannot be known (non-integer ``nvidia.com/gpu``, bad count label, replicas without a count,
    ``mig.strategy=single`` where the labels describe MIG instances) is left out with a
    :class:`ParseIssue` naming the field, e.g. ``items[2].status.allocatable.nvidia.com/gpu``.
    """
    if isinstance(payload, str):
        try:
            payload = load_yaml(payload)
        except TooDeep as exc:
            return ParseResult(issues=(ParseIssue(f"invalid YAML/JSON: {exc}"),))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = mark.line + 1 if mark is not None else None
            problem = getattr(exc, "problem", None) or str(exc)
            return ParseResult(issues=(ParseIssue(f"invalid YAML/JSON: {problem}", line=line),))

    issues: list[ParseIssue] = []
    nodes: list[NodeSnapshot] = []
    for path, raw in _node_entries(payload, issues):
        try:
            node = _parse_node(raw, path, issues)
        except _SkipNode as skip:
            issues.append(skip.issue)
            continue
        if node is not None:
            nodes.append(node)
    return ParseResult(nodes=tuple(nodes), issues=tuple(issues))


def _node_entries(payload: Any, issues: list[ParseIssue]) -> list[tuple[str, Any]]:
    if isinstance(payload, list):
        return [(f"[{position}]", item) for position, item in enumerate(payload)]
    if isinstance(payload, dict) and "items" in payload:
        items = payload["items"]
        if items is None:
            return []
        if not isinstance(items, list):
            issues.append(ParseIssue("'items' is not a list", field="items"))
            return []
        return [(f"items[{position}]", item) for position, item in enumerate(items)]
    if isinstance(payload, dict) and (payload.get("kind") == "Node" or "metadata" in payload):
        return [("", payload)]
    issues.append(ParseIssue("expected a NodeList, a Node or a list of Nodes"))
    return []


def _at(path: str, field: str) -> str:
    return f"{path}.{field}" if path else field


def _parse_node(raw: Any, path: str, issues: list[ParseIssue]) -> NodeSnapshot | None:
    if not isinstance(raw, dict):
        issues.append(ParseIssue("node entry is not an object", field=path or None))
        return None
    kind = raw.get("kind")
    if kind not in (None, "Node"):
        issues.append(ParseIssue(f"not a Node (kind {kind!r})", field=_at(path, "kind")))
        return None
    metadata = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        issues.append(ParseIssue("node has no name", field=_at(path, "metadata.name")))
        return None

    labels = _labels(metadata.get("labels"), _at(path, "metadata.labels"), name, issues)
    status = raw.get("status") if isinstance(raw.get("status"), dict) else {}
    allocatable = status.get("allocatable")
    # Resource names are strings; hand-written YAML may load an unquoted key as a number.
    allocatable = (
        {str(key): value for key, value in allocatable.items()}
        if isinstance(allocatable, dict)
        else {}
    )
    spec = raw.get("spec") if isinstance(raw.get("spec"), dict) else {}

    context = _NodeContext(
        name=name, path=path, labels=labels, allocatable=allocatable, issues=issues
    )
    replicas = context.int_label(LABEL_REPLICAS)
    mig_single = _mig_single(context)
    if mig_single is not None:
        cards, gpus = 0, ()
    else:
        cards = _card_count(context, replicas)
        gpus = _gpus(context, cards, replicas)
    state, reason, problem = _state(status.get("conditions"), spec.get("unschedulable") is True)
    if problem is not None:
        issues.append(ParseIssue(problem, field=_at(path, "status.conditions"), node=name))
    return NodeSnapshot(
        hostname=name,
        source=InventorySource.KUBERNETES,
        gpus=gpus,
        driver_version=_version(labels, _DRIVER_FULL, _DRIVER_PARTS),
        cuda_version=_version(labels, _CUDA_FULL, _CUDA_PARTS),
        state=state,
        state_reason=reason,
        labels=labels,
        gpu_replicas=replicas if replicas is not None and replicas > 1 else None,
        mig_single=mig_single,
    )


class _NodeContext:
    """One node's labels and allocatable, with readers that skip the node on bad values."""

    def __init__(
        self,
        *,
        name: str,
        path: str,
        labels: dict[str, str],
        allocatable: dict[str, Any],
        issues: list[ParseIssue],
    ) -> None:
        self.name = name
        self.path = path
        self.labels = labels
        self.allocatable = allocatable
        self.issues = issues

    def skip(self, message: str, field: str) -> _SkipNode:
        return _SkipNode(ParseIssue(message, field=_at(self.path, field), node=self.name))

    def int_label(self, key: str) -> int | None:
        value = self.labels.get(key)
        if value is None:
            return None
        if not _WHOLE_NUMBER.fullmatch(value):
            raise self.skip(
                f"label {key}={value!r} is not a whole number", f"metadata.labels.{key}"
            )
        return int(value)

    def optional_int_label(self, key: str) -> int | None:
        """Like :meth:`int_label`, but a bad value only loses this one fact, not the node."""
        try:
            return self.int_label(key)
        except _SkipNode as bad:
            self.issues.append(bad.issue)
            return None

    def allocatable_count(self, resource: str) -> int | None:
        if resource not in self.allocatable:
            return None
        raw = self.allocatable[resource]
        text = str(raw) if isinstance(raw, int) and not isinstance(raw, bool) else raw
        try:
            return parse_k8s_extended_count(text)
        except ValueError as exc:
            raise self.skip(str(exc), f"status.allocatable.{resource}") from exc


def _mig_single(context: _NodeContext) -> MigSlices | None:
    """The slices a MIG *single* node publishes, ``None`` when its labels describe whole cards.

    GFD (``internal/lm/mig-strategy.go``) labels such a node ``nvidia.com/gpu.product =
    <model>-MIG-<profile>`` with ``gpu.count`` / ``gpu.memory`` of the slices, and
    ``<model>-MIG-INVALID`` with count 0 when the node's MIG setup breaks the strategy (a card
    MIG-enabled but empty, MIG and non-MIG cards mixed, or several profiles): that node is
    misconfigured, which is not the same as having no GPUs, so it is skipped with the reason.
    Only the strategy label *and* the product together mean MIG; either alone does not.
    """
    product = context.labels.get(LABEL_PRODUCT, "")
    strategy = context.labels.get(LABEL_MIG_STRATEGY)
    base, mark, profile = product.rpartition(MIG_PRODUCT_MARK)
    if not mark:
        return None
    if strategy != "single":
        raise context.skip(
            f"product {product!r} names a MIG slice but {LABEL_MIG_STRATEGY} is "
            f"{strategy!r}, not 'single': the labels contradict each other",
            f"metadata.labels.{LABEL_PRODUCT}",
        )
    if profile.upper() == MIG_INVALID:
        raise context.skip(
            f"misconfigured MIG node: GPU Feature Discovery labels it {product!r} (mig.strategy="
            "single needs every card MIG-enabled with one profile and at least one slice); "
            "its cards are unknown until the MIG configuration is fixed",
            f"metadata.labels.{LABEL_PRODUCT}",
        )
    if _MIG_PROFILE.fullmatch(profile) is None or not base:
        raise context.skip(
            f"product {product!r}: {profile!r} is not a MIG profile such as 1g.10gb",
            f"metadata.labels.{LABEL_PRODUCT}",
        )
    count = context.int_label(LABEL_COUNT)
    if count is None:
        count = context.allocatable_count(GPU_RESOURCE)
    if not count:
        raise context.skip(
            f"mig.strategy=single with product {product!r} but no slices counted",
            f"metadata.labels.{LABEL_COUNT}",
        )
    return MigSlices(
        profile=profile,
        count=count,
        memory_mib=context.optional_int_label(LABEL_MEMORY_MIB),
        base_model=base,
    )


def mig_per_card(profile: str, *, card_memory_gib: float) -> int | None:
    """How many slices of ``profile`` one card of ``card_memory_gib`` holds; ``None`` if unknown.

    NVIDIA's MIG user guide gives each card 7 compute and 8 memory slices; a ``<g>g.<m>gb``
    profile takes ``g`` compute slices and ``m`` GB / (card memory / 8) memory slices
    (:func:`mig_slices`), so it fits ``min(7 // g, 8 // memory slices)`` times, and a ``+me``
    profile once. Worked against the guide's table: A100-40GB 1g.5gb 7, 1g.10gb 4, 3g.20gb 2;
    H100-80GB 1g.10gb 7, 1g.20gb 4, 2g.20gb 3; H200 (140.4 GiB) 1g.18gb 7, 1g.35gb 4,
    3g.71gb 2; 7g.* 1.
    """
    if card_memory_gib <= 0:
        return None
    slices = mig_slices(profile, card_memory_gib=card_memory_gib)
    if slices is None:
        return None
    if slices.media_extensions:
        return 1
    assert slices.memory is not None  # card memory given
    return min(MIG_COMPUTE_SLICES // slices.compute, MIG_MEMORY_SLICES // slices.memory)


@dataclasses.dataclass(frozen=True)
class MigSliceSize:
    """What one GPU instance of a profile takes of its card: ``compute`` slices (of 7),
    ``memory`` slices (of 8; ``None`` when the card's memory is unknown) and whether it holds
    the card's one set of media extensions (``+me``)."""

    compute: int
    memory: int | None
    media_extensions: bool


def mig_slices(profile: str, *, card_memory_gib: float | None) -> MigSliceSize | None:
    """The compute and memory slices one ``profile`` instance takes on a card of
    ``card_memory_gib`` (``None``: unknown, memory slices not counted); ``None`` when
    ``profile`` is no MIG profile or needs more than the card's 8 memory slices.

    Memory slices = ``m`` GB / (card memory / 8), rounded, at least 1 (the guide's profile
    names round the slice size: 1g.10gb on an 80GB card is one of 8 slices of 79.6 GiB).
    """
    match = _MIG_PROFILE.fullmatch(profile)
    if match is None:
        return None
    memory = None
    if card_memory_gib is not None and card_memory_gib > 0:
        memory = max(1, round(int(match["gb"]) / (card_memory_gib / MIG_MEMORY_SLICES)))
        if memory > MIG_MEMORY_SLICES:
            return None
    return MigSliceSize(compute=int(match["g"]), memory=memory, media_extensions=bool(match["me"]))


def _card_count(context: _NodeContext, replicas: int | None) -> int:
    allocatable = context.allocatable_count(GPU_RESOURCE)
    shared = context.allocatable_count(SHARED_GPU_RESOURCE)
    cards = context.int_label(LABEL_COUNT)
    if cards is None:
        if replicas is not None and replicas > 1:
            raise context.skip(
                f"{LABEL_REPLICAS}={replicas} without {LABEL_COUNT}: "
                "allocatable counts replicas, the physical card count is unknown",
                f"metadata.labels.{LABEL_COUNT}",
            )
        if shared is not None:
            raise context.skip(
                f"{SHARED_GPU_RESOURCE} counts replicas and {LABEL_COUNT} is missing",
                f"metadata.labels.{LABEL_COUNT}",
            )
        cards = allocatable or 0
    if cards > MAX_GPUS_PER_NODE:
        raise context.skip(f"implausible GPU count {cards}", f"metadata.labels.{LABEL_COUNT}")
    return cards


def _gpus(context: _NodeContext, cards: int, replicas: int | None) -> tuple[GpuSnapshot, ...]:
    product = context.labels.get(LABEL_PRODUCT) or None
    if product is not None:
        product = product.removesuffix(PRODUCT_SHARED_SUFFIX) or None
    memory_mib = context.optional_int_label(LABEL_MEMORY_MIB)

    per_card = _mig_devices_per_card(context, cards, replicas, memory_mib)
    whole_known = bool(per_card) and any(per_card)
    return tuple(
        GpuSnapshot(
            index=index,
            model_name=product,
            memory_total_mib=memory_mib,
            mig_mode=True if per_card[index] else (False if whole_known else None),
            mig_devices=per_card[index],
            health=GpuHealth.UNKNOWN,
        )
        for index in range(cards)
    )


def _mig_devices_per_card(
    context: _NodeContext, cards: int, replicas: int | None, card_memory_mib: int | None
) -> list[tuple[MigDeviceSnapshot, ...]]:
    """MIG slices of a *mixed* node, per card (card 0 first, MIG cards after the whole ones).

    Under mixed, the device plugin advertises whole cards as ``nvidia.com/gpu`` and slices as
    ``nvidia.com/mig-<profile>``, and GFD's ``nvidia.com/gpu.count`` still counts every card
    (``internal/lm/mig-strategy.go``: the full-GPU labeler counts MIG-enabled cards too). So
    cards holding slices = count - whole cards (allocatable ``nvidia.com/gpu``, divided by the
    time-slicing replicas). A ``mig-*`` resource is taken as MIG only with
    ``nvidia.com/mig.strategy=mixed`` and a slice count above 0: a leftover resource at 0 (the
    kubelet keeps extended resources after MIG is switched off) or one without the strategy
    label is reported, never read as MIG mode.

    Each slice takes its profile's compute and memory slices (:func:`mig_slices`, with the card
    memory of ``nvidia.com/gpu.memory`` when labelled); a card holds at most 7 compute and 8
    memory slices and one ``+me`` slice. The Node object does not say which card holds which
    slice: they are dealt out in profile order in equal contiguous blocks (card 0 first) when
    every card then holds its block, else placed largest first on the least-loaded card that
    still holds them (card index breaking ties), so per-node and per-profile totals are exact
    but the per-card split is a guess. A profile that is no MIG profile, or slices that no placement
    fits on the MIG cards, skip the node with an issue naming the resource.
    """
    profiles = _mig_profiles(context)
    empty: list[tuple[MigDeviceSnapshot, ...]] = [() for _ in range(cards)]
    if not profiles or not _mig_strategy_mixed(context, profiles):
        return empty
    instances = _mig_instances(context, profiles, cards, card_memory_mib)
    if not instances:
        return empty
    first, placement = _mig_placement(context, instances, cards, replicas)
    per_card: list[list[MigDeviceSnapshot]] = [[] for _ in range(cards)]
    for (profile, memory_mib, _), position in zip(instances, placement, strict=True):
        card = per_card[first + position]
        card.append(
            MigDeviceSnapshot(index=len(card), profile=profile, memory_total_mib=memory_mib)
        )
    return [tuple(card) for card in per_card]


# One MIG instance: its profile, its memory (MiB, ``nvidia.com/mig-<profile>.memory``) and size.
_MigInstance = tuple[str, int | None, MigSliceSize]


def _mig_profiles(context: _NodeContext) -> list[str]:
    """The MIG profiles of the node's ``nvidia.com/mig-<profile>[.shared]`` allocatable
    resources, in name order, each once."""
    profiles: list[str] = []
    for key in sorted(context.allocatable):
        if key.startswith(MIG_RESOURCE_PREFIX):
            profile = key[len(MIG_RESOURCE_PREFIX) :].removesuffix(SHARED_SUFFIX)
            if profile not in profiles:
                profiles.append(profile)
    return profiles


def _mig_strategy_mixed(context: _NodeContext, profiles: list[str]) -> bool:
    """Whether the node is labelled ``nvidia.com/mig.strategy=mixed``; else an issue names the
    MIG resources that are not read as MIG."""
    strategy = context.labels.get(LABEL_MIG_STRATEGY)
    if strategy == "mixed":
        return True
    context.issues.append(
        ParseIssue(
            f"MIG resources {', '.join(MIG_RESOURCE_PREFIX + p for p in profiles)} without "
            f"{LABEL_MIG_STRATEGY}=mixed (it is {strategy!r}): not read as MIG",
            field=_at(context.path, f"metadata.labels.{LABEL_MIG_STRATEGY}"),
            node=context.name,
        )
    )
    return False


def _mig_instances(
    context: _NodeContext, profiles: list[str], cards: int, card_memory_mib: int | None
) -> list[_MigInstance]:
    """One entry per MIG instance, profile by profile (the ``<resource>.count`` label, else the
    allocatable count); raises the node's skip when the count is unknown, cannot fit on
    ``cards`` cards or the profile is no MIG profile."""
    card_memory_gib = card_memory_mib / 1024 if card_memory_mib else None
    instances: list[_MigInstance] = []
    for profile in profiles:
        resource = MIG_RESOURCE_PREFIX + profile
        count = _mig_instance_count(context, resource)
        if len(instances) + count > MAX_MIG_DEVICES_PER_GPU * cards:
            raise context.skip(
                f"{count} {profile} MIG instances cannot fit on {cards} card(s)",
                f"status.allocatable.{resource}",
            )
        if not count:
            continue
        size = mig_slices(profile, card_memory_gib=card_memory_gib)
        if size is None:
            raise context.skip(
                f"{profile!r} is not a MIG profile a card holds (the MIG user guide's "
                "profiles are <g>g.<m>gb with g in 1, 2, 3, 4, 7 and m within the card's memory)",
                f"status.allocatable.{resource}",
            )
        memory_mib = context.optional_int_label(f"{resource}.memory")
        instances.extend([(profile, memory_mib, size)] * count)
    return instances


def _mig_instance_count(context: _NodeContext, resource: str) -> int:
    """MIG instances of one ``nvidia.com/mig-<profile>`` resource: its ``.count`` label, else
    the allocatable count (plain plus ``.shared``) when the slices are not time-shared."""
    count = context.int_label(f"{resource}.count")
    if count is not None:
        return count
    slice_replicas = context.int_label(f"{resource}.replicas")
    if slice_replicas is not None and slice_replicas > 1:
        raise context.skip(
            f"{resource}.replicas={slice_replicas} without {resource}.count: "
            "the number of MIG instances is unknown",
            f"metadata.labels.{resource}.count",
        )
    return (context.allocatable_count(resource) or 0) + (
        context.allocatable_count(resource + SHARED_SUFFIX) or 0
    )


def _mig_placement(
    context: _NodeContext, instances: list[_MigInstance], cards: int, replicas: int | None
) -> tuple[int, list[int]]:
    """The first MIG card and the MIG card (from 0) of each instance: equal contiguous blocks
    when they fit, else :func:`_place_mig_slices`; raises the node's skip when no card is left
    for the slices or they fit in no placement."""
    whole = context.allocatable_count(GPU_RESOURCE)
    if whole is not None and replicas is not None and replicas > 1:
        whole //= replicas
    mig_cards = cards - (whole or 0)
    if mig_cards <= 0 or len(instances) > MAX_MIG_DEVICES_PER_GPU * mig_cards:
        raise context.skip(
            f"{len(instances)} MIG slices but {whole} of {cards} cards are advertised whole "
            f"({GPU_RESOURCE}): no card is left to hold them",
            f"status.allocatable.{GPU_RESOURCE}",
        )
    sizes = [size for _, _, size in instances]
    block = math.ceil(len(instances) / mig_cards)
    placement: list[int] | None = [position // block for position in range(len(instances))]
    if not _within_cards(sizes, placement, mig_cards):
        placement = _place_mig_slices(sizes, mig_cards)
    if placement is None:
        counts = Counter(profile for profile, _, _ in instances)
        compute = Counter({profile: size.compute for profile, _, size in instances})
        largest = max(counts, key=lambda profile: counts[profile] * compute[profile])
        raise context.skip(
            f"MIG slices {', '.join(f'{n} x {p}' for p, n in counts.items())} do not fit on "
            f"{mig_cards} card(s) in MIG mode (7 compute and 8 memory slices per card)",
            f"status.allocatable.{MIG_RESOURCE_PREFIX}{largest}",
        )
    return cards - mig_cards, placement


def _within_cards(sizes: list[MigSliceSize], placement: list[int], cards: int) -> bool:
    """Whether every card of ``placement`` (card per slice) keeps within 7 compute slices,
    8 memory slices (when known) and one ``+me`` slice."""
    compute, memory, media = [0] * cards, [0] * cards, [0] * cards
    for size, card in zip(sizes, placement, strict=True):
        compute[card] += size.compute
        memory[card] += size.memory or 0
        media[card] += size.media_extensions
    return (
        max(compute) <= MIG_COMPUTE_SLICES and max(memory) <= MIG_MEMORY_SLICES and max(media) <= 1
    )


def _place_mig_slices(sizes: list[MigSliceSize], cards: int) -> list[int] | None:
    """For each slice of ``sizes``, the card (0-based) that holds it, or ``None`` when no
    placement keeps every card within 7 compute slices, 8 memory slices (when known) and one
    ``+me`` slice. Largest first onto the least-loaded card, backtracking; a card load already
    tried for a slice, or a set of loads already failed from one slice on, is not tried again,
    so cards that look alike are searched once. Totals over the cards are checked first; a
    search longer than :data:`MIG_PLACEMENT_STEPS` tries (none real: a node's layouts come
    from mig-parted's few configurations) answers ``None`` too, so a crafted Node cannot stall
    the import."""
    if (
        sum(size.compute for size in sizes) > MIG_COMPUTE_SLICES * cards
        or sum(size.memory or 0 for size in sizes) > MIG_MEMORY_SLICES * cards
        or sum(size.media_extensions for size in sizes) > cards
    ):
        return None
    steps = 0
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i].compute, -(sizes[i].memory or 0)))
    loads = [(0, 0, 0)] * cards  # (compute, memory, media extensions) per card
    placement = [0] * len(sizes)
    failed: set[tuple[int, tuple[tuple[int, int, int], ...]]] = set()

    def place(step: int) -> bool:
        nonlocal steps
        if step == len(order):
            return True
        state = (step, tuple(sorted(loads)))
        steps += 1
        if state in failed or steps > MIG_PLACEMENT_STEPS:
            return False
        size = sizes[order[step]]
        tried = set()
        for card in sorted(range(cards), key=lambda c: (loads[c][0], c)):
            compute, memory, media = loads[card]
            grown = (
                compute + size.compute,
                memory + (size.memory or 0),
                media + size.media_extensions,
            )
            if loads[card] in tried or grown[0] > MIG_COMPUTE_SLICES:
                continue
            if grown[1] > MIG_MEMORY_SLICES or grown[2] > 1:
                continue
            tried.add(loads[card])
            loads[card] = grown
            placement[order[step]] = card
            if place(step + 1):
                return True
            loads[card] = (compute, memory, media)
        failed.add(state)
        return False

    return placement if place(0) else None


def _labels(raw: Any, field: str, name: str, issues: list[ParseIssue]) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        issues.append(ParseIssue("labels is not a mapping", field=field, node=name))
        return {}
    labels: dict[str, str] = {}
    for key, value in raw.items():
        # The API serves strings; hand-written YAML may load 4 or true unquoted.
        if isinstance(value, bool):
            value = "true" if value else "false"
        labels[str(key)] = "" if value is None else str(value)
    return labels


def _version(
    labels: dict[str, str], full_key: str, part_keys: tuple[tuple[str, ...], ...]
) -> str | None:
    if labels.get(full_key):
        return labels[full_key]
    for keys in part_keys:
        parts = [labels.get(key, "") for key in keys]
        if all(parts):
            return ".".join(parts)
    return None


def _state(conditions: Any, cordoned: bool) -> tuple[NodeState | None, str | None, str | None]:
    """Return (state, reason, problem) from the Ready condition and ``spec.unschedulable``."""
    ready = None
    if isinstance(conditions, list):
        ready = next(
            (c for c in conditions if isinstance(c, dict) and c.get("type") == "Ready"), None
        )
    status = ready.get("status") if ready is not None else None
    if status in ("False", "Unknown"):
        return NodeState.DOWN, ready.get("message") or ready.get("reason") or None, None
    if cordoned:
        return NodeState.DRAIN, None, None
    if status == "True":
        return NodeState.UP, None, None
    if ready is None:
        return None, None, "no Ready condition"
    return None, None, f"Ready condition status {status!r} not understood"
