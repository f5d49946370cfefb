"""``Allocation.objects.holding().overlapping(start, end)`` / ``.at(instant)`` and the one
Python overlap rule, :func:`pools.capacity.arithmetic.clip`: windows are half-open, so one
that ends as the other starts does not overlap it."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from factories import AllocationFactory

from pools.capacity.arithmetic import clip
from pools.capacity.models import Allocation
from pools.common.choices import AllocationStatus

T0 = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
H = timedelta(hours=1)


@pytest.mark.django_db
def test_holding_keeps_the_four_holding_states_and_overlapping_the_half_open_window():
    """Window [T0+2h, T0+4h). Each allocation is (status, start, end):
    - a: active 1h-3h overlaps (3h > 2h, 1h < 4h)        -> kept
    - b: approved 4h-6h starts as the window ends        -> out
    - c: expiring 0h-2h ends as the window starts        -> out
    - d: provisioning 2h-4h, exactly the window          -> kept
    - e: ended 1h-5h overlaps but does not hold cards    -> out (holding)
    - f: cancelled 2h-3h                                 -> out (holding)"""
    made = {
        name: AllocationFactory(status=status, starts_at=T0 + a * H, ends_at=T0 + b * H).pk
        for name, status, a, b in [
            ("a", AllocationStatus.ACTIVE, 1, 3),
            ("b", AllocationStatus.APPROVED, 4, 6),
            ("c", AllocationStatus.EXPIRING, 0, 2),
            ("d", AllocationStatus.PROVISIONING, 2, 4),
            ("e", AllocationStatus.ENDED, 1, 5),
            ("f", AllocationStatus.CANCELLED, 2, 3),
        ]
    }
    name = {pk: n for n, pk in made.items()}
    window = Allocation.objects.holding().overlapping(T0 + 2 * H, T0 + 4 * H)
    assert sorted(name[pk] for pk in window.values_list("pk", flat=True)) == ["a", "d"]
    assert sorted(name[pk] for pk in Allocation.objects.holding().values_list("pk", flat=True)) == [
        "a",
        "b",
        "c",
        "d",
    ]
    # at 4h: b starts (held), d ends (not held any more); at 2h: a and d, not c
    at_4h = Allocation.objects.holding().at(T0 + 4 * H)
    assert sorted(name[pk] for pk in at_4h.values_list("pk", flat=True)) == ["b"]
    at_2h = Allocation.objects.holding().at(T0 + 2 * H)
    assert sorted(name[pk] for pk in at_2h.values_list("pk", flat=True)) == ["a", "d"]


@pytest.mark.parametrize(
    ("interval", "window", "expected"),
    [
        ((1, 5), (3, 8), (3, 5)),  # overlap: the later start, the earlier end
        ((3, 4), (1, 8), (3, 4)),  # inside
        ((1, 3), (3, 8), None),  # touching: [1, 3) ends as [3, 8) starts
        ((5, 9), (1, 5), None),  # touching the other way
        ((1, 2), (4, 8), None),  # apart
        ((1.5, 2.5), (2.0, 9.0), (2.0, 2.5)),  # Unix seconds, as the elastic meter passes
    ],
)
def test_clip_is_the_intersection_of_half_open_intervals(interval, window, expected):
    assert clip(*interval, *window) == expected


def test_clip_takes_datetimes_and_dates():
    assert clip(T0, T0 + 3 * H, T0 + H, T0 + 9 * H) == (T0 + H, T0 + 3 * H)
    # a rate card effective from 15 Nov, open-ended, clipped to December: all of December
    assert clip(date(2026, 11, 15), date(2027, 1, 1), date(2026, 12, 1), date(2027, 1, 1)) == (
        date(2026, 12, 1),
        date(2027, 1, 1),
    )
