"""Against the real Slurm only (22.05, 24.11, 26.05): a recurring reservation of the portal is
written as a Slurm reservation with the rule's recurrence flag (``Flags=DAILY`` / ``WEEKDAY`` /
``WEEKLY``) through ``scontrol``, read back with its first window, nodes, account and flag,
and deleted (read back gone).

The spec is the portal's own (:func:`recurring_slurm_spec` of an unsaved reservation), on a
node of the partition's a100 nodes with no job on it; the windows are next week's (03:00-04:00
UTC), so nothing else on the test cluster is in their way. Names start ``hrec-``. The second
test waits for slurmctld to move a daily reservation forward (about 70 s): the new window is
the old one plus exactly one day, the same flag, and the adapter still sees it as the same
reservation (create again changes nothing).
"""

import uuid
from datetime import UTC, date, datetime, time, timedelta
from time import sleep

import pytest
from integration.slurm.slurm_cluster import build_adapter, eventually, unique_account

from pools.inventory.models import Pool
from pools.recurring.models import RecurringReservation
from pools.recurring.services.binding import recurring_slurm_spec
from pools.tenancy.models import Team

pytestmark = pytest.mark.integration


def free_a100_node(adapter, partition: str) -> str:
    nodes = [
        node.hostname
        for node in adapter.list_nodes().nodes
        if partition in node.partitions
        and any(g.model_name == "a100" for g in node.gpus)
        and not node.gpus_allocated
    ]
    assert nodes, "the test cluster needs a node with gpu:a100 cards and no job on it"
    return sorted(nodes)[0]


def unsaved(account: str, partition: str, recurrence: str, first: date, start, end):
    return RecurringReservation(
        team=Team(slug=account, name=account),
        pool=Pool(slug="hrec", name="hrec", slurm_partition=partition),
        name="course",
        card_count=4,
        recurrence=recurrence,
        time_zone="UTC",
        first_date=first,
        last_date=first + timedelta(days=60),
        start_time=start,
        end_time=end,
    )


@pytest.fixture
def setup(slurm_settings, a100_partition, cleanup):
    adapter = build_adapter(slurm_settings, SCONTROL={"ENABLED": True})
    account = unique_account("hrec")
    cleanup.accounts.append(account)
    adapter.ensure_account(account, description="recurring", organization="portal")
    return adapter, account, a100_partition


@pytest.mark.parametrize(
    "recurrence, flag", [("daily", "DAILY"), ("weekday", "WEEKDAY"), ("weekly", "WEEKLY")]
)
def test_a_recurring_reservation_is_a_slurm_reservation_with_the_recurrence_flag(
    setup, recurrence, flag
):
    adapter, account, partition = setup
    node = free_a100_node(adapter, partition)
    today = datetime.now(UTC).date()
    monday = today + timedelta(days=7 - today.weekday())  # next week's Monday
    rule = unsaved(account, partition, recurrence, monday, time(3, 0), time(4, 0))
    now = datetime.now(UTC)
    spec = recurring_slurm_spec(
        rule, nodes=(node,), now=now, cluster_zone="UTC", name=f"hrec-{uuid.uuid4().hex[:8]}"
    )
    # by hand: the first occurrence is next Monday 03:00-04:00 UTC, with the rule's flag
    assert (spec.starts_at, spec.ends_at, spec.repeat) == (
        datetime(monday.year, monday.month, monday.day, 3, tzinfo=UTC),
        datetime(monday.year, monday.month, monday.day, 4, tzinfo=UTC),
        flag,
    )
    try:
        assert adapter.create_reservation(spec) is True
        assert adapter.create_reservation(spec) is False  # idempotent
        record = adapter.get_reservation(spec.name)
        assert (record.accounts, record.nodes) == ((account,), (node,))
        assert (record.starts_at, record.ends_at) == (spec.starts_at, spec.ends_at)
        assert record.repeat == flag and flag in record.flags
    finally:
        adapter.delete_reservation(spec.name)
    assert adapter.get_reservation(spec.name) is None
    assert adapter.delete_reservation(spec.name) is False


def test_slurmctld_moves_a_daily_reservation_forward_by_one_day(setup):
    adapter, account, partition = setup
    node = free_a100_node(adapter, partition)
    now = datetime.now(UTC).replace(microsecond=0)
    if (now + timedelta(seconds=30)).date() != now.date():
        # a same-day window is needed (end after start on the clock): wait for midnight UTC
        midnight = datetime.combine(now.date() + timedelta(days=1), time(), UTC)
        sleep((midnight - now).total_seconds() + 1)
        now = datetime.now(UTC).replace(microsecond=0)
    # slurmctld moves a repeating reservation once its end has passed (its checks are about a
    # minute apart), so the window is short: started in 10 s (the create takes well under
    # that), 15 s long
    start = now + timedelta(seconds=10)
    end = start + timedelta(seconds=15)
    rule = unsaved(account, partition, "daily", now.date(), start.time(), end.time())
    spec = recurring_slurm_spec(
        rule, nodes=(node,), now=now, cluster_zone="UTC", name=f"hrec-{uuid.uuid4().hex[:8]}"
    )
    assert (spec.starts_at, spec.ends_at) == (start, end)
    try:
        assert adapter.create_reservation(spec) is True
        moved = eventually(
            lambda: adapter.get_reservation(spec.name),
            lambda r: r is not None and r.starts_at != start,
            timeout_s=150,
        )
        assert (moved.starts_at, moved.ends_at) == (
            start + timedelta(days=1),
            end + timedelta(days=1),
        )
        assert moved.repeat == "DAILY" and moved.nodes == (node,)
        assert adapter.create_reservation(spec) is False  # still the same reservation
    finally:
        adapter.delete_reservation(spec.name)
    assert adapter.get_reservation(spec.name) is None


@pytest.mark.django_db
def test_through_the_portal_the_beat_reserves_and_cancel_deletes(portal_slurm_team, slurm_settings):
    """A pool admin's daily rule (next week, 03:00-04:00 UTC, the node's 4 A100): the beat
    writes ``hrec-recur-<id>`` with Flags=DAILY for the team's account on that node; cancel,
    and the next beat deletes it (read back gone) and clears the binding."""
    from django.test import override_settings

    from pools.clusters import adapters
    from pools.recurring.services.binding import recurring_sync
    from pools.recurring.services.reservations import (
        recurring_reservation_cancel,
        recurring_reservation_create,
    )
    from scheduler_adapters.registry import slurm_settings_from_env

    pool, a100, team, _alice, admin, _submit = portal_slurm_team
    config = slurm_settings_from_env(slurm_settings)
    adapters.reset()
    with override_settings(SCHEDULERS={"slurm": config}, SLURM_RESERVATION_PREFIX="hrec"):
        adapter = adapters.scheduler_adapter("slurm")
        node = free_a100_node(adapter, pool.slurm_partition)
        pool.nodes.update(hostname=node)
        today = datetime.now(UTC).date()
        monday = today + timedelta(days=7 - today.weekday())
        reservation = recurring_reservation_create(
            actor=admin, team=team, pool=pool, gpu_model=a100, name="course", card_count=4,
            recurrence="daily", time_zone="UTC", first_date=monday,
            last_date=monday + timedelta(days=13), start_time=time(3), end_time=time(4),
        )  # fmt: skip
        name = f"hrec-recur-{reservation.pk}"
        try:
            counts = recurring_sync()
            assert (counts["reserved"], counts["errors"]) == (1, 0)
            reservation.refresh_from_db()
            assert reservation.scheduler_binding["reservation"] == name
            record = adapter.get_reservation(name)
            assert (record.accounts, record.nodes, record.repeat) == (
                (team.slug,),
                (node,),
                "DAILY",
            )
            first = datetime(monday.year, monday.month, monday.day, 3, tzinfo=UTC)
            assert (record.starts_at, record.ends_at) == (first, first + timedelta(hours=1))

            recurring_reservation_cancel(reservation=reservation, actor=admin)
            assert recurring_sync()["removed"] == 1
            assert adapter.get_reservation(name) is None
            reservation.refresh_from_db()
            assert reservation.scheduler_binding == {}
        finally:
            adapter.delete_reservation(name)
            adapters.reset()
