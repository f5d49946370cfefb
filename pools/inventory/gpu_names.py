"""One matching key for GPU model names from every source.

nvidia-smi, dcgm-exporter, Kubernetes labels, Slurm GRES types and admins all spell the same card
differently: ``NVIDIA GeForce RTX 4090``, ``NVIDIA-GeForce-RTX-4090-SHARED``, ``rtx4090``,
``RTX 4090``. :func:`normalise_model_key` maps each spelling to one key, and a name is recognised
only when its key equals a key the catalogue owns. Matching is exact on purpose: a substring rule
would file an ``RTX 4090 D`` under ``RTX 4090`` (tricky input C05), and a bare ``a100`` or ``h100``
names several SKUs, so it must stay unrecognised until an admin maps it.

The rule, in order:

1. lowercase and trim;
2. drop one trailing ``-shared`` (GPU Feature Discovery appends ``-SHARED`` to
   ``nvidia.com/gpu.product`` when time-slicing or MPS replicas are not renamed);
3. remove every character outside ``[a-z0-9]``, so blanks, hyphens, underscores and dots do not
   matter (``RTX 4090D`` == ``RTX-4090 D``);
4. drop a leading ``nvidia`` and then a leading ``geforce``: brand words that nvidia-smi prints and
   people leave out (``NVIDIA GeForce RTX 4090 D`` == ``RTX 4090D``). Nothing else is removed, so
   the words that tell SKUs apart (``d``, ``super``, ``pcie``, ``sxm4``, ``nvl``, sizes) stay.

An input with nothing left (``""``, ``"NVIDIA"``) gives ``""``, which no catalogue entry owns.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_SHARED_SUFFIX = "-shared"
_NOT_KEY_CHARS = re.compile(r"[^a-z0-9]")
_BRAND_PREFIXES = ("nvidia", "geforce")


def normalise_model_key(raw: str) -> str:
    """Return the matching key of a GPU model name from any source (see the module docstring)."""
    text = raw.strip().lower()
    if text.endswith(_SHARED_SUFFIX):
        text = text[: -len(_SHARED_SUFFIX)]
    key = _NOT_KEY_CHARS.sub("", text)
    for prefix in _BRAND_PREFIXES:
        if key.startswith(prefix):
            key = key[len(prefix) :]
    return key


def model_key_index(models: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Map every key a catalogue entry answers to onto the entry's slug.

    An entry answers to its slug, display name, nvidia-smi name and every alias. Raises
    ``ValueError`` when a key would belong to two entries, or an entry yields an empty key, because
    either makes matching ambiguous.
    """
    index: dict[str, str] = {}
    for model in models:
        slug = model["slug"]
        names = [slug, model["name"], model["vendor_name"]]
        names += [alias["value"] for alias in model.get("aliases", ())]
        for name in names:
            key = normalise_model_key(name)
            if not key:
                raise ValueError(f"{slug}: name {name!r} has an empty matching key")
            owner = index.setdefault(key, slug)
            if owner != slug:
                raise ValueError(f"key {key!r} ({name!r}) is claimed by both {owner} and {slug}")
    return index


# --- names that do not identify the SKU -------------------------------------------------------

_TRUNCATED = ("...", "\u2026")
_HEX = re.compile(r"(?:0x)?(?P<hex>[0-9a-f]{4}|[0-9a-f]{8})")
_NVIDIA_VENDOR = "10de"


def is_truncated_name(raw: str) -> bool:
    """True for a name cut short by nvidia-smi's human table (``NVIDIA GeForce RTX 4090 ...``).

    The table view pads names into a fixed column and ends a long one with ``...``; such a name
    no longer says which SKU it is, so it is refused, never matched or stored.
    """
    return raw.strip().endswith(_TRUNCATED)


def pci_device_id_key(raw: str | None) -> str | None:
    """Return the 16-bit PCI device id as ``"0x2330"`` or ``None`` when ``raw`` is not one.

    Accepts nvidia-smi's 32-bit form (``pci.device_id`` / XML ``pci_device_id`` / ``-q``
    ``Device Id``: ``0x233010DE`` = device ``0x2330`` << 16 | vendor ``0x10DE``) and the bare
    16-bit form (``0x2330``, ``2330``). A 32-bit value of another vendor gives ``None``.
    """
    if not raw:
        return None
    match = _HEX.fullmatch(raw.strip().lower())
    if match is None:
        return None
    digits = match["hex"]
    if len(digits) == 8:
        if digits[4:] != _NVIDIA_VENDOR:
            return None
        digits = digits[:4]
    return "0x" + digits.upper()


@dataclass(frozen=True)
class ModelMatch:
    """What a reported name (and device id) says about the SKU.

    ``slug`` is the one catalogue model it identifies, else ``None``. ``candidates`` are the
    slugs it could be when it names several (ambiguous: an admin decides), empty otherwise.
    ``reason`` says in words why ``slug`` is ``None`` (``""`` when matched).
    """

    slug: str | None
    candidates: tuple[str, ...] = ()
    reason: str = ""


def model_match(
    raw_name: str | None,
    *,
    pci_device_id: str | None,
    by_key: Mapping[str, str],
    by_device: Mapping[str, str],
    ambiguous: Mapping[str, tuple[str, ...]],
) -> ModelMatch:
    """Decide the SKU of a card from its reported name and PCI device id.

    ``by_key``: matching key -> slug (aliases, :func:`model_key_index`); ``by_device``: device id
    key (``"0x2330"``) -> slug; ``ambiguous``: key of a name several SKUs share -> their slugs.
    The device id is a tie-breaker, never a second opinion that silently wins:

    * an exact alias whose device id is unknown or agrees -> that model;
    * an exact alias contradicted by a catalogued device id of another model -> no model, both
      named as candidates (a catalogue slip or a relabelled card: an admin checks);
    * an ambiguous name -> the candidate the device id identifies, else no model with the
      candidates listed;
    * any other name -> unrecognised, as before (the device id alone does not name a SKU:
      one id may carry several boards, e.g. ``20B2`` is A100-SXM4-80GB and PG509-210).
    """
    if not raw_name:
        return ModelMatch(None, reason="no model name")
    if is_truncated_name(raw_name):
        return ModelMatch(None, reason="name truncated by nvidia-smi's table view")
    key = normalise_model_key(raw_name)
    device = pci_device_id_key(pci_device_id)
    device_slug = by_device.get(device) if device else None
    named = by_key.get(key)
    if named is not None:
        if device_slug is None or device_slug == named:
            return ModelMatch(named)
        return ModelMatch(
            None,
            candidates=(named, device_slug),
            reason=f"name says {named}, PCI device id {device} says {device_slug}",
        )
    candidates = ambiguous.get(key)
    if candidates:
        if device_slug in candidates:
            return ModelMatch(device_slug)
        why = f"PCI device id {device} is none of them" if device else "no PCI device id"
        return ModelMatch(
            None,
            candidates=tuple(candidates),
            reason=f"name fits {len(candidates)} catalogue models; {why}",
        )
    return ModelMatch(None, reason="matches no catalogue alias")


def device_id_index(models: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Map every catalogued PCI device id (``"0x2330"``) onto its model's slug.

    Raises ``ValueError`` when an id is unreadable or claimed by two models.
    """
    index: dict[str, str] = {}
    for model in models:
        for raw in model.get("pci_device_ids", ()):
            key = pci_device_id_key(raw)
            if key is None:
                raise ValueError(f"{model['slug']}: unreadable PCI device id {raw!r}")
            owner = index.setdefault(key, model["slug"])
            if owner != model["slug"]:
                raise ValueError(f"device id {key} is claimed by both {owner} and {model['slug']}")
    return index


def ambiguous_name_index(
    entries: Iterable[Mapping[str, Any]], *, slugs: Iterable[str], by_key: Mapping[str, str]
) -> dict[str, tuple[str, ...]]:
    """Map the key of each ambiguous name onto its candidate slugs.

    Raises ``ValueError`` when a candidate is not in the catalogue, or the name is also an exact
    alias (it would then be both one SKU and several).
    """
    known = set(slugs)
    index: dict[str, tuple[str, ...]] = {}
    for entry in entries:
        key = normalise_model_key(entry["value"])
        candidates = tuple(entry["candidates"])
        if not key or len(candidates) < 2 or not set(candidates) <= known:
            raise ValueError(f"ambiguous name {entry['value']!r}: bad candidates {candidates}")
        if key in by_key:
            raise ValueError(f"ambiguous name {entry['value']!r} is also an alias of {by_key[key]}")
        index[key] = candidates
    return index
