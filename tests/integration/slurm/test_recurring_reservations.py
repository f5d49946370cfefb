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

import pytest
from integration.slurm.slurm_cluster import build_adapter, eventually, unique_account

from pools.capacity.models import RecurringReservation
from pools.capacity.services.recurring_binding import recurring_slurm_spec
from pools.inventory.models import Pool
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
    start = now + timedelta(seconds=20)
    end = start + timedelta(seconds=30)
    if end.date() != now.date():
        pytest.skip("too close to midnight UTC for a same-day window")
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
