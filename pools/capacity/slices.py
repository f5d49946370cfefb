"""MIG slices as capacity, pure: which profile names a request may use and what share of a
card one slice is.

A card in MIG mode is cut into GPU instances of a profile ``<g>g.<m>gb`` (``+me``: with the
card's media extensions); the schedulers hand them out as slices (Slurm ``gres/gpu:1g.10gb``,
Kubernetes ``nvidia.com/mig-1g.10gb``). Source: NVIDIA MIG user guide, "Supported MIG
Profiles": ``g`` is the compute slices the instance takes, of 7 on A100/H100/H200/H800 and of 4
on A30. A slice's share of a card is ``g / compute slices per card`` — the share billing
charges a Slurm job's MIG GRES (C10: one ``a100_3g.20gb`` for 1.5 h is 3/7 × 1.5 = 0.643
card-hours) and the share a reserved slice allocation is billed (one pricing path).
"""

from __future__ import annotations

import re
from fractions import Fraction

#: A MIG profile as the schedulers spell it: 1, 2, 3, 4 or 7 compute slices, memory in GB,
#: optionally ``+me`` (MIG user guide's profile table; no other compute sizes exist).
PROFILE = re.compile(r"(?P<g>[12347])g\.(?P<gb>[1-9][0-9]{0,3})gb(?P<me>\+me)?")
PROFILE_MAX_LENGTH = 16  # "7g.1000gb+me" is 12; room for larger cards
COMPUTE_SLICES_PER_CARD = 7
#: Cards with fewer compute slices, by the start of their catalogue slug / GRES base name.
_FEWER_COMPUTE_SLICES = {"a30": 4}


def is_profile(text: str) -> bool:
    """Whether ``text`` is a MIG profile name such as ``1g.10gb`` or ``1g.10gb+me``."""
    return PROFILE.fullmatch(text or "") is not None


def compute_slices(profile: str) -> int:
    """The compute slices one instance of ``profile`` takes (``3g.40gb`` → 3). Raises
    :class:`ValueError` for a text that is no MIG profile."""
    match = PROFILE.fullmatch(profile or "")
    if match is None:
        raise ValueError(f"{profile!r} is not a MIG profile such as 1g.10gb")
    return int(match["g"])


def compute_slices_per_card(model_key: str) -> int:
    """Compute slices of a whole card whose catalogue slug or GRES base name is ``model_key``:
    4 for an A30 (``a30``, ``a30_24g``), else 7."""
    key = (model_key or "").lower()
    for prefix, slices in _FEWER_COMPUTE_SLICES.items():
        if key == prefix or key.startswith(prefix + "_"):
            return slices
    return COMPUTE_SLICES_PER_CARD


def slice_share(profile: str, *, model_key: str) -> Fraction:
    """The share of a whole card one slice of ``profile`` is on the card ``model_key`` names:
    ``compute_slices(profile) / compute_slices_per_card(model_key)``, e.g. ``3g.40gb`` on
    ``a100_80g_sxm`` → 3/7, ``1g.6gb`` on ``a30`` → 1/4. Raises :class:`ValueError` for a
    text that is no MIG profile."""
    return Fraction(compute_slices(profile), compute_slices_per_card(model_key))


def card_share(profile: str, *, model_key: str) -> Fraction:
    """What one unit of a request or allocation is of a card: 1 for whole cards (``profile``
    blank), else :func:`slice_share`."""
    return Fraction(1) if not profile else slice_share(profile, model_key=model_key)
