"""The held-cards series behind the timeline and the dashboard's plan, by hand: an allocation
holds an instant from its start (inclusive) to its end (exclusive)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from factories import AllocationFactory, PoolFactory

from pools.capacity.models import Allocation
from pools.capacity.selectors import cards_held_series
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db


def at(hour: int, minute: int = 0, second: int = 0, microsecond: int = 0) -> datetime:
    return datetime(2026, 12, 7, hour, minute, second, microsecond, tzinfo=UTC)


def test_cards_held_at_each_instant_by_hand(team):
    pool, l40s = PoolFactory(slug="p"), GpuModel.objects.get(slug="l40s")
    for cards, start, end in ((2, 8, 12), (3, 10, 14), (5, 12, 13)):
        AllocationFactory(team=team, pool=pool, gpu_model=l40s, card_count=cards,
                          starts_at=at(start), ends_at=at(end), status="active")  # fmt: skip
    instants = [at(7), at(8), at(10), at(12), at(13), at(14)]

    rows = cards_held_series(Allocation.objects.all(), ["pool"], instants)

    # 07: none; 08: the 2 starting; 10: 2 + 3; 12: the 2 has ended, 3 + 5 started;
    # 13: the 5 has ended, 3; 14: the 3 has ended, 0
    assert rows == {(pool.pk,): [0, 2, 5, 8, 3, 0]}


def test_instants_in_any_order_a_microsecond_either_side_and_keys_without_holdings(team):
    pool, other = PoolFactory(slug="p"), PoolFactory(slug="q")
    l40s = GpuModel.objects.get(slug="l40s")
    AllocationFactory(team=team, pool=pool, gpu_model=l40s, card_count=4,
                      starts_at=at(10), ends_at=at(11), status="active")  # fmt: skip
    # held at no instant below: its pool still has a series, of zeros
    AllocationFactory(team=team, pool=other, gpu_model=l40s, card_count=1,
                      starts_at=at(10, 10), ends_at=at(10, 20), status="active")  # fmt: skip
    instants = [at(11), at(10, 0, 0, 1), at(9, 59, 59, 999999), at(10), at(10, 59, 59, 999999)]

    rows = cards_held_series(Allocation.objects.all(), ["pool__slug", "card_count"], instants)

    assert rows == {("p", 4): [0, 4, 0, 4, 4], ("q", 1): [0, 0, 0, 0, 0]}


def test_no_rows_no_series():
    assert cards_held_series(Allocation.objects.all(), ["pool"], [at(10)]) == {}
