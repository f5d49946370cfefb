"""The conditional sum behind the timeline and the dashboard's plan, by hand: an allocation
holds an instant from its start (inclusive) to its end (exclusive)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from factories import AllocationFactory, PoolFactory

from pools.capacity.models import Allocation
from pools.capacity.selectors import cards_held_at
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db


def at(hour: int) -> datetime:
    return datetime(2026, 12, 7, hour, tzinfo=UTC)


def test_cards_held_at_each_instant_by_hand(team):
    pool, l40s = PoolFactory(slug="p"), GpuModel.objects.get(slug="l40s")
    for cards, start, end in ((2, 8, 12), (3, 10, 14), (5, 12, 13)):
        AllocationFactory(team=team, pool=pool, gpu_model=l40s, card_count=cards,
                          starts_at=at(start), ends_at=at(end), status="active")  # fmt: skip
    instants = [at(7), at(8), at(10), at(12), at(13), at(14)]

    (row,) = Allocation.objects.values("pool").annotate(**cards_held_at(instants)).order_by()

    # 07: none; 08: the 2 starting; 10: 2 + 3; 12: the 2 has ended, 3 + 5 started;
    # 13: the 5 has ended, 3; 14: the 3 has ended, 0 (never NULL)
    assert [row[f"t{i}"] for i in range(6)] == [0, 2, 5, 8, 3, 0]
