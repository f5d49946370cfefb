"""Driver groups: nodes grouped by NVIDIA driver branch, each with the CUDA it can run."""

from __future__ import annotations

from functools import lru_cache

from pools.inventory.catalogue import load_cuda_driver_table
from pools.inventory.driver_versions import driver_branch, max_cuda_for_driver, parse_driver_version
from pools.inventory.models import DriverGroup


@lru_cache(maxsize=1)
def cuda_driver_table() -> tuple[dict, ...]:
    """The rows of NVIDIA's CUDA/driver table (``catalogue/cuda_drivers.json``), read once."""
    return tuple(load_cuda_driver_table())


def driver_group_for_version(driver_version: str) -> DriverGroup | None:
    """Return (creating or widening) the driver group of ``driver_version``, e.g. ``535.129.03``.

    The group keeps the oldest and newest driver seen; ``max_cuda`` is what the oldest one
    supports per NVIDIA's CUDA release notes, so every node of the group can run it.
    Returns ``None`` for a version string that is not an NVIDIA driver version.
    """
    try:
        version = parse_driver_version(driver_version)
        branch = driver_branch(driver_version)
    except ValueError:
        return None
    group, _ = DriverGroup.objects.get_or_create(branch=branch)
    changed = False
    if not group.min_driver_version or version < parse_driver_version(group.min_driver_version):
        group.min_driver_version = driver_version
        cuda = max_cuda_for_driver(driver_version, cuda_driver_table())
        group.max_cuda = f"{cuda[0]}.{cuda[1]}" if cuda else ""
        changed = True
    if not group.max_driver_version or version > parse_driver_version(group.max_driver_version):
        group.max_driver_version = driver_version
        changed = True
    if changed:
        group.save()
    return group
