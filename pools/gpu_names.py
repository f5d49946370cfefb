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
