"""The slurmrestd API versions this adapter speaks, one dialect each, and how versions sort."""

from __future__ import annotations

from typing import Any

from scheduler_adapters.slurm import v0_0_38, v0_0_40, v0_0_41, v0_0_42, v0_0_43, v0_0_44, v0_0_45

DIALECTS: dict[str, Any] = {
    v0_0_38.VERSION: v0_0_38,
    **{
        module.DIALECT.VERSION: module.DIALECT
        for module in (v0_0_40, v0_0_41, v0_0_42, v0_0_43, v0_0_44, v0_0_45)
    },
}
"""API versions this adapter speaks: the module :mod:`.v0_0_38` (Slurm 22.05-23.11) and one
:class:`~scheduler_adapters.slurm.modern.ModernDialect` per v0.0.40+ version (Slurm 23.11-26.05),
each with the same names (paths, ``*_body`` builders, ``read_*`` readers, ``PLUGINS``, flags).
Discovery picks the newest version that both the server and this dict know."""


def version_key(version: str) -> tuple[int, ...]:
    """``"v0.0.40"`` -> ``(0, 0, 40)``, to sort versions by number."""
    return tuple(int(part) for part in version.lstrip("v").split("."))


def known_versions() -> str:
    """The versions of :data:`DIALECTS`, oldest first, for messages: ``"v0.0.38, v0.0.40, …"``."""
    return ", ".join(sorted(DIALECTS, key=version_key))
