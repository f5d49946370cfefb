"""The free-card figures of the request form (:func:`request_options`, from the database and
from the approval queue's snapshot), the earliest start and the approval's count all take the
occurrences of recurring reservations out of the pool (issue 32): a property test against an
hour-by-hour oracle written here, plus one case worked by hand.

Pool ``prop``: one node of 6 L40S (over-commit 1.0). Rules in UTC on whole hours, so every
occurrence starts and ends on an hour and the oracle's hourly count is exact.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from factories import PoolFactory, RecurringReservationFactory, TeamFactory
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from pools.capacity.availability import (
    CapacitySnapshot,
    earliest_free_start,
    pool_free_cards,
    request_options,
)
from pools.common.choices import NodeState, Scheduler
from pools.inventory.models import Gpu, GpuModel, Node

pytestmark = pytest.mark.django_db
YEAR = timezone.now().year + 2
MONDAY = date(YEAR, 3, 1) + timedelta(days=(7 - date(YEAR, 3, 1).weekday()) % 7)
BASE = datetime.combine(MONDAY, time(0), tzinfo=UTC)
FLEET = 6


def prop_pool():
    l40s = GpuModel.objects.get(slug="l40s")
    pool = PoolFactory(slug="prop", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    node = Node.objects.create(hostname="prop-0", pool=pool, state=NodeState.UP)
    Gpu.objects.bulk_create(Gpu(node=node, index=i, gpu_model=l40s) for i in range(FLEET))
    return pool, l40s, TeamFactory(slug="prop")


def rule(pool, model, team, recurrence, first, more, start, length, cards):
    return RecurringReservationFactory(
        team=team, pool=pool, gpu_model=model, card_count=cards, recurrence=recurrence,
        time_zone="UTC", first_date=MONDAY + timedelta(days=first),
        last_date=MONDAY + timedelta(days=first + more), start_time=time(start),
        end_time=time(start + length),
    )  # fmt: skip


def free_figures(pool, model, start, end) -> tuple[int, int, int]:
    """(request form from the database, from the queue's snapshot, the approval's count)."""
    ask = {"workload_kind": "inference", "card_count": 1, "start": start, "end": end,
           "pool": pool, "gpu_model": model}  # fmt: skip
    (direct,) = request_options(**ask)
    (queued,) = request_options(**ask, snapshot=CapacitySnapshot.load(start=start, end=end))
    approval = pool_free_cards(pool=pool, gpu_model=model, start=start, end=end)
    return direct.free, queued.free, approval


def test_a_weekday_course_by_hand(db):
    """4 cards weekdays 09:00-18:00 UTC: Monday 10:00-11:00 has 2 free, Saturday 6, Monday
    17:00 to Tuesday 10:00 has 2 (it reaches Tuesday's occurrence), Monday 18:00 to Tuesday
    09:00 (between, half-open) 6; 5 cards from Monday 09:00 for 2 hours can start at 18:00."""
    pool, l40s, team = prop_pool()
    rule(pool, l40s, team, "weekday", 0, 13, 9, 9, 4)
    hour = timedelta(hours=1)
    monday_10 = BASE + 10 * hour
    assert free_figures(pool, l40s, monday_10, monday_10 + hour) == (2, 2, 2)
    saturday_10 = monday_10 + timedelta(days=5)
    assert free_figures(pool, l40s, saturday_10, saturday_10 + hour) == (6, 6, 6)
    assert free_figures(pool, l40s, BASE + 17 * hour, BASE + 34 * hour) == (2, 2, 2)
    assert free_figures(pool, l40s, BASE + 18 * hour, BASE + 33 * hour) == (6, 6, 6)
    found = earliest_free_start(
        pool=pool, gpu_model=l40s, cards=5, start=BASE + 9 * hour, length=2 * hour
    )
    assert found == BASE + 18 * hour


def oracle_hours(recurrence, first, more, start, length) -> list[int]:
    days = range(first, first + more + 1)
    if recurrence == "weekday":
        days = [d for d in days if (MONDAY + timedelta(days=d)).weekday() < 5]
    elif recurrence == "weekly":
        days = [d for d in days if (d - first) % 7 == 0]
    return [d * 24 + h for d in days for h in range(start, start + length)]


rules = st.lists(
    st.tuples(
        st.sampled_from(["daily", "weekday", "weekly"]),
        st.integers(0, 6),  # first day
        st.integers(0, 7),  # more days
        st.integers(0, 19),  # start hour
        st.integers(1, 4),  # hours
        st.integers(1, 4),  # cards
    ),
    min_size=1,
    max_size=4,
)


@settings(
    max_examples=25,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rules=rules, window=st.tuples(st.integers(0, 15 * 24), st.integers(1, 48)))
def test_free_cards_count_every_occurrence_in_the_window(db, rules, window):
    """Every figure equals 6 − the most cards held at any hour of the window (never below 0),
    the hours held worked out from the rules alone."""
    with transaction.atomic():
        pool, l40s, team = prop_pool()
        held = [0] * (24 * 24)
        for fields in rules:
            rule(pool, l40s, team, *fields)
            for h in oracle_hours(*fields[:5]):
                held[h] += fields[5]
        first, hours = window
        expected = max(0, FLEET - max(held[first : first + hours]))
        start = BASE + timedelta(hours=first)
        got = free_figures(pool, l40s, start, start + timedelta(hours=hours))
        assert got == (expected, expected, expected), (rules, window)
        transaction.set_rollback(True)
