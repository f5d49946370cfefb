"""Maintenance windows in Slurm (issue 32 item 2), written after commit and by the beat loop.

A planned window becomes one Slurm reservation per Slurm pool whose nodes it takes,
``<prefix>-maint-<window id>-<pool id>`` (``settings.SLURM_RESERVATION_PREFIX``), over those
nodes for ``[starts_at, ends_at)`` with ``Flags=MAINT,IGNORE_JOBS``
(:class:`scheduler_adapters.records.ReservationSpec`, through ``scontrol`` as allocations' and
recurring reservations' are): slurmctld starts no job on the nodes in the window, lets the
reservation overlap the allocations' own reservations, and accounts the time as maintenance.
The account is ``root`` (every slurmdbd has it): only the cluster's admins run jobs there.
Each reservation is read back after it is written; the window's ``scheduler_binding`` keeps
what was written, or a note why not. A cancelled window's reservations are deleted (read back
gone), and an ended window's binding is cleared once Slurm has dropped them.

Kubernetes is not told: the portal counts the window's cards as away (no approval, form or
calendar offers them) but cordons no node; the window's page says so.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from pools.capacity.models import MaintenanceStatus, MaintenanceWindow
from pools.clusters.adapters import pool_adapter
from pools.common.choices import Scheduler
from scheduler_adapters.errors import SchedulerError
from scheduler_adapters.records import ReservationSpec

MAINTENANCE_ACCOUNT = "root"


def maintenance_reservation_name(window: MaintenanceWindow, pool_id: int) -> str:
    prefix = getattr(settings, "SLURM_RESERVATION_PREFIX", "portal")
    return f"{prefix}-maint-{window.pk}-{pool_id}"


def maintenance_slurm_spec(
    window: MaintenanceWindow,
    *,
    nodes: tuple[str, ...],
    name: str,
    partition: str | None = None,
    now: datetime | None = None,
) -> ReservationSpec:
    """The MAINT reservation of ``window`` over ``nodes`` (sorted host names), from its start
    or, for a window already open, from the next whole second after ``now`` (slurmctld makes
    no reservation in the past)."""
    starts_at = window.starts_at
    if now is not None and starts_at <= now:
        starts_at = now.replace(microsecond=0) + timedelta(seconds=1)
    return ReservationSpec(
        name=name,
        account=MAINTENANCE_ACCOUNT,
        nodes=nodes,
        starts_at=starts_at,
        ends_at=window.ends_at,
        partition=partition,
        maintenance=True,
    )


def _slurm_nodes(window: MaintenanceWindow) -> dict[Any, tuple[str, ...]]:
    by_pool: dict[Any, list[str]] = defaultdict(list)
    for node in window.nodes.select_related("pool", "pool__cluster").order_by("hostname"):
        if node.pool is not None and node.pool.scheduler == Scheduler.SLURM:
            by_pool[node.pool].append(node.hostname)
    return {pool: tuple(sorted(hosts)) for pool, hosts in by_pool.items()}


def maintenance_slurm_apply(*, window: MaintenanceWindow, now: datetime) -> dict[str, Any]:
    """Create (idempotent) and read back the window's MAINT reservations; returns the binding:
    ``{"reservations": [{"pool", "reservation", "nodes"}], "notes": [...]}``. Raises the
    adapter's transient errors (the next beat retries)."""
    binding: dict[str, Any] = {"reservations": [], "notes": []}
    for pool, nodes in sorted(_slurm_nodes(window).items(), key=lambda kv: kv[0].pk):
        adapter = pool_adapter(pool)
        if adapter is None:
            binding["notes"].append(f"{pool.name}: no Slurm connection configured.")
            continue
        name = maintenance_reservation_name(window, pool.pk)
        try:
            spec = maintenance_slurm_spec(window, nodes=nodes, name=name, now=now)
            adapter.create_reservation(spec)
            found = adapter.get_reservation(name)
        except (AttributeError, ValueError) as exc:
            binding["notes"].append(f"{pool.name}: not reserved in Slurm: {exc}")
            continue
        except SchedulerError as exc:
            if exc.transient:
                raise
            binding["notes"].append(f"{pool.name}: Slurm refused: {exc.message}")
            continue
        if found is None or not found.maintenance or tuple(found.nodes) != nodes:
            binding["notes"].append(f"{pool.name}: {name} did not read back as written.")
            continue
        binding["reservations"].append(
            {"pool": pool.slug, "reservation": name, "nodes": list(nodes)}
        )
    return binding


def maintenance_slurm_remove(*, window: MaintenanceWindow) -> bool:
    """Delete the window's reservations (read back gone); ``True`` when all are gone."""
    gone = True
    pools = {pool.slug: pool for pool in _slurm_nodes(window)}
    for entry in window.scheduler_binding.get("reservations", []):
        pool = pools.get(entry["pool"])
        adapter = pool_adapter(pool) if pool is not None else None
        if adapter is None:
            continue
        adapter.delete_reservation(entry["reservation"])
        if adapter.get_reservation(entry["reservation"]) is not None:
            gone = False
    return gone


def maintenance_sync(*, now: datetime | None = None) -> dict[str, int]:
    """Beat and after each write: reserve planned windows not yet written, delete cancelled
    ones' reservations, clear ended ones' bindings. Counts of what was done; safe to run any
    number of times."""
    now = now or timezone.now()
    counts = {"reserved": 0, "removed": 0, "errors": 0}
    windows = MaintenanceWindow.objects.prefetch_related("nodes")
    for window in windows.filter(status=MaintenanceStatus.PLANNED, ends_at__gt=now,
                                 scheduler_binding={}):  # fmt: skip
        try:
            binding = maintenance_slurm_apply(window=window, now=now)
        except SchedulerError:
            counts["errors"] += 1
            continue
        if binding["reservations"] or binding["notes"]:
            MaintenanceWindow.objects.filter(pk=window.pk).update(scheduler_binding=binding)
            counts["reserved"] += len(binding["reservations"])
    over = windows.exclude(scheduler_binding={}).exclude(
        status=MaintenanceStatus.PLANNED, ends_at__gt=now
    )
    for window in over:
        try:
            if window.status == MaintenanceStatus.CANCELLED and not maintenance_slurm_remove(
                window=window
            ):
                counts["errors"] += 1
                continue
        except SchedulerError:
            counts["errors"] += 1
            continue
        MaintenanceWindow.objects.filter(pk=window.pk).update(scheduler_binding={})
        counts["removed"] += len(window.scheduler_binding.get("reservations", []))
    return counts
