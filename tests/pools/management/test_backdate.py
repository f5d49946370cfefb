"""``demo_clock``: the demo loader's services and ``auto_now_add`` stamps read an earlier
instant inside it, the real one after it -- even when the block raises."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from pools.management.backdate import demo_clock

AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def test_inside_the_clock_now_is_the_instant_plus_the_time_elapsed():
    with demo_clock(AT):
        first = timezone.now()
        second = timezone.now()
    assert AT <= first <= second < AT + timedelta(seconds=5)  # in order, from AT on
    assert abs(timezone.now() - datetime.now(UTC)) < timedelta(seconds=5)  # real again


def test_the_real_clock_comes_back_when_the_block_raises():
    with pytest.raises(RuntimeError), demo_clock(AT):
        raise RuntimeError("a loader step failed")
    assert timezone.now() > AT + timedelta(days=1)


def test_a_naive_instant_is_refused():
    with pytest.raises(ValueError, match="aware"), demo_clock(AT.replace(tzinfo=None)):
        pass
