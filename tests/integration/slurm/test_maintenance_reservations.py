"""Against the real Slurm only (22.05, 24.11, 26.05): a maintenance window of the portal is a
Slurm reservation with ``Flags=MAINT,IGNORE_JOBS`` for the ``root`` account over the window's
nodes, written through ``scontrol``, read back (window, nodes, flags) and deleted (read back
gone). Windows are next week's 05:00-06:00 UTC; names start ``hmaint-``."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from integration.slurm.slurm_cluster import build_adapter

from pools.capacity.models import MaintenanceWindow
from pools.capacity.services.maintenance_binding import maintenance_slurm_spec

pytestmark = pytest.mark.integration


def a100_node(adapter, partition: str) -> str:
    nodes = [
        node.hostname
        for node in adapter.list_nodes().nodes
        if partition in node.partitions and any(g.model_name == "a100" for g in node.gpus)
    ]
    assert nodes, "the test cluster needs a node with gpu:a100 cards"
    return sorted(nodes)[0]


def next_week_5am() -> datetime:
    today = datetime.now(UTC).date() + timedelta(days=7)
    return datetime(today.year, today.month, today.day, 5, tzinfo=UTC)


def test_a_maintenance_window_is_a_maint_reservation_read_back_and_deleted(
    slurm_settings, a100_partition
):
    adapter = build_adapter(slurm_settings, SCONTROL={"ENABLED": True})
    node = a100_node(adapter, a100_partition)
    start = next_week_5am()
    window = MaintenanceWindow(title="R570", starts_at=start, ends_at=start + timedelta(hours=1))
    spec = maintenance_slurm_spec(window, nodes=(node,), name=f"hmaint-{uuid.uuid4().hex[:8]}")
    try:
        assert adapter.create_reservation(spec) is True
        assert adapter.create_reservation(spec) is False  # idempotent
        record = adapter.get_reservation(spec.name)
        assert (record.accounts, record.nodes) == (("root",), (node,))
        assert (record.starts_at, record.ends_at) == (start, start + timedelta(hours=1))
        assert {"MAINT", "IGNORE_JOBS"} <= set(record.flags) and record.maintenance
        assert record.repeat is None
    finally:
        adapter.delete_reservation(spec.name)
    assert adapter.get_reservation(spec.name) is None


@pytest.mark.django_db
def test_through_the_portal_the_sync_reserves_and_cancel_deletes(portal_slurm_team, slurm_settings):
    """A pool admin takes the pool's node out next week 05:00-06:00 UTC: the sync writes
    ``hmaint-maint-<id>-<pool id>`` with MAINT over it, read back; cancel, and the next sync
    deletes it (read back gone) and clears the binding."""
    from django.test import override_settings

    from pools.capacity.services.maintenance import (
        maintenance_window_cancel,
        maintenance_window_create,
    )
    from pools.capacity.services.maintenance_binding import maintenance_sync
    from pools.clusters import adapters
    from scheduler_adapters.registry import slurm_settings_from_env

    pool, _a100, _team, _alice, admin, _submit = portal_slurm_team
    config = slurm_settings_from_env(slurm_settings)
    adapters.reset()
    with override_settings(SCHEDULERS={"slurm": config}, SLURM_RESERVATION_PREFIX="hmaint"):
        adapter = adapters.scheduler_adapter("slurm")
        node = a100_node(adapter, pool.slurm_partition)
        pool.nodes.update(hostname=node)
        start = next_week_5am()
        window = maintenance_window_create(
            actor=admin, title="R570", scope="pool", pool=pool, starts_at=start,
            ends_at=start + timedelta(hours=1),
        )  # fmt: skip
        name = f"hmaint-maint-{window.pk}-{pool.pk}"
        try:
            counts = maintenance_sync()
            assert (counts["reserved"], counts["errors"]) == (1, 0)
            window.refresh_from_db()
            assert window.scheduler_binding == {
                "reservations": [{"pool": pool.slug, "reservation": name, "nodes": [node]}],
                "notes": [],
            }
            record = adapter.get_reservation(name)
            assert (record.nodes, record.maintenance) == ((node,), True)
            assert (record.starts_at, record.ends_at) == (start, start + timedelta(hours=1))
            maintenance_window_cancel(window=window, actor=admin)
            assert maintenance_sync()["removed"] == 1
            assert adapter.get_reservation(name) is None
            window.refresh_from_db()
            assert window.scheduler_binding == {}
        finally:
            adapter.delete_reservation(name)
            adapters.reset()
