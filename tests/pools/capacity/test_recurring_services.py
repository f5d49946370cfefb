"""Recurring reservations through the services: the card invariant over every occurrence, both
ways (a reservation against allocations and other reservations; an approval against
occurrences), refusals naming the first conflicting date and writing nothing.

Pool ``infer`` (conftest): 2 nodes × 4 L40S, over-commit 1.0, so 8 usable. Dates are in the
year after next, so every occurrence lies ahead of the test's clock.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from factories import AllocationFactory, CapacityRequestFactory, PoolFactory, TeamFactory
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from pools.audit.models import AuditEvent
from pools.capacity.models import RecurringReservation, ReservationStatus
from pools.capacity.services.recurring import (
    recurring_reservation_cancel,
    recurring_reservation_create,
)
from pools.capacity.services.requests import capacity_request_approve
from pools.common.choices import AllocationStatus, NodeState, RequestStatus, Scheduler
from pools.common.errors import (
    InsufficientCapacity,
    InvalidInput,
    InvalidTransition,
    PermissionDenied,
)
from pools.inventory.models import Gpu, GpuModel, Node

pytestmark = pytest.mark.django_db
YEAR = timezone.now().year + 2
MONDAY = date(YEAR, 3, 1) + timedelta(days=(7 - date(YEAR, 3, 1).weekday()) % 7)


def reserve(actor, team, pool, model, **fields):
    rule = {
        "name": "course",
        "card_count": 8,
        "recurrence": "weekday",
        "time_zone": "UTC",
        "first_date": MONDAY,
        "last_date": MONDAY + timedelta(days=13),
        "start_time": time(9),
        "end_time": time(18),
    } | fields
    return recurring_reservation_create(actor=actor, team=team, pool=pool, gpu_model=model, **rule)


def at(day: date, hour: int) -> datetime:
    return datetime.combine(day, time(hour), tzinfo=UTC)


def test_a_course_reserves_the_pool_on_weekdays_and_the_approval_counts_it(
    pool_admin, team, infer_pool, l40s
):
    """8 L40S weekdays 09:00-18:00 take all 8 cards then: a request for one card on the
    Monday 10:00-11:00 is refused, one on the Saturday is granted, one from Monday 18:00 to
    Tuesday 09:00 (between occurrences, half-open) is granted."""
    reservation = reserve(pool_admin, team, infer_pool, l40s)
    assert reservation.status == ReservationStatus.ACTIVE
    event = AuditEvent.objects.get(action="recurring_reservation.created")
    assert event.after["card_count"] == "8" and event.after["recurrence"] == "weekday"

    monday = CapacityRequestFactory(team=team, pool=infer_pool, gpu_model=l40s,
                                    starts_at=at(MONDAY, 10), ends_at=at(MONDAY, 11))  # fmt: skip
    with pytest.raises(InsufficientCapacity) as refused:
        capacity_request_approve(request=monday, actor=pool_admin)
    assert refused.value.data["free"] == 0
    monday.refresh_from_db()
    assert monday.status == RequestStatus.SUBMITTED

    saturday = MONDAY + timedelta(days=5)
    for start, end in ((at(saturday, 10), at(saturday, 11)),
                       (at(MONDAY, 18), at(MONDAY + timedelta(days=1), 9))):  # fmt: skip
        request = CapacityRequestFactory(
            team=team, pool=infer_pool, gpu_model=l40s, starts_at=start, ends_at=end
        )
        assert capacity_request_approve(request=request, actor=pool_admin).card_count == 1


def test_an_overlapping_reservation_is_refused_with_the_first_conflicting_date(
    pool_admin, team, infer_pool, l40s, table_counts
):
    """An allocation of 3 cards on the second Wednesday (MONDAY + 9) 12:00-13:00 leaves 5
    then; a daily rule for 6 cards from the first Monday fits until then and is refused on
    that Wednesday's date; nothing is written."""
    wednesday = MONDAY + timedelta(days=9)
    AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=3,
                      status=AllocationStatus.APPROVED,
                      starts_at=at(wednesday, 12), ends_at=at(wednesday, 13))  # fmt: skip
    before = table_counts()
    with pytest.raises(InsufficientCapacity) as refused:
        reserve(pool_admin, team, infer_pool, l40s, card_count=6, recurrence="daily")
    assert refused.value.data == {
        "free": 5, "requested": 6, "usable": 8, "date": wednesday.isoformat(),
        "starts_at": at(wednesday, 9).isoformat(),
        "errors": {"first_date": f"Not enough free cards on {wednesday.isoformat()}."},
    }  # fmt: skip
    assert table_counts() == before and not RecurringReservation.objects.exists()
    reserve(pool_admin, team, infer_pool, l40s, card_count=5, recurrence="daily")


def test_a_second_reservation_counts_the_first_ones_occurrences(pool_admin, team, infer_pool, l40s):
    """Weekdays 09-18 × 6 cards, then weekly (Mondays) 17-20 × 3: the Monday 17:00-18:00 hour
    would hold 6 + 3 = 9 > 8, 2 free — refused on the first Monday; 18-20 × 3 fits."""
    reserve(pool_admin, team, infer_pool, l40s, card_count=6)
    with pytest.raises(InsufficientCapacity) as refused:
        reserve(pool_admin, team, infer_pool, l40s, card_count=3, recurrence="weekly",
                start_time=time(17), end_time=time(20))  # fmt: skip
    assert refused.value.data["date"] == MONDAY.isoformat()
    assert refused.value.data["free"] == 2
    reserve(pool_admin, team, infer_pool, l40s, card_count=3, recurrence="weekly",
            start_time=time(18), end_time=time(20))  # fmt: skip


def test_a_cancelled_reservation_holds_nothing(pool_admin, team, infer_pool, l40s):
    reservation = reserve(pool_admin, team, infer_pool, l40s)
    cancelled = recurring_reservation_cancel(reservation=reservation, actor=pool_admin,
                                             reason="course moved")  # fmt: skip
    assert cancelled.status == ReservationStatus.CANCELLED
    event = AuditEvent.objects.get(action="recurring_reservation.cancelled")
    assert (event.before["status"], event.after["status"], event.reason) == (
        "active", "cancelled", "course moved")  # fmt: skip
    with pytest.raises(InvalidTransition):
        recurring_reservation_cancel(reservation=reservation, actor=pool_admin)
    reserve(pool_admin, team, infer_pool, l40s)  # the cards are free again


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"card_count": 0}, "card_count"),
        ({"recurrence": "monthly"}, "recurrence"),
        ({"time_zone": "Mars/Olympus"}, "time_zone"),
        ({"last_date": MONDAY - timedelta(days=1)}, "last_date"),
        ({"last_date": MONDAY + timedelta(days=367)}, "last_date"),
        ({"end_time": time(9)}, "end_time"),
        ({"name": " "}, "name"),
        ({"first_date": date(2020, 1, 6), "last_date": date(2020, 1, 10)}, "last_date"),
    ],
)
def test_bad_input_is_refused_by_field_and_writes_nothing(
    pool_admin, team, infer_pool, l40s, table_counts, fields, field
):
    before = table_counts()
    with pytest.raises(InvalidInput) as refused:
        reserve(pool_admin, team, infer_pool, l40s, **fields)
    assert field in refused.value.data["errors"]
    assert table_counts() == before and not RecurringReservation.objects.exists()


def test_only_pool_admins_reserve(team_member, team, infer_pool, l40s):
    with pytest.raises(PermissionDenied):
        reserve(team_member, team, infer_pool, l40s)
    assert not RecurringReservation.objects.exists()


# -- the property ---------------------------------------------------------------------------
# Rules in UTC on whole hours of days 0-13 from MONDAY; allocations in whole hours. The oracle
# counts the cards held in each hour of the fortnight from the words of the rule: an allocation
# holds its cards in every hour of [start, end); an accepted rule in every hour of each
# occurrence; "weekday" is Monday-Friday, "weekly" the first day's weekday.

rules = st.lists(
    st.tuples(
        st.sampled_from(["daily", "weekday", "weekly"]),
        st.integers(0, 6),  # first day
        st.integers(0, 7),  # more days
        st.integers(0, 19),  # start hour
        st.integers(1, 4),  # hours (ending by 23:00)
        st.integers(1, 6),  # cards
    ),
    min_size=1,
    max_size=4,
)
holds = st.lists(
    st.tuples(st.integers(0, 14 * 24 - 1), st.integers(1, 30), st.integers(1, 6)), max_size=4
)
FLEET = 6


def oracle_days(recurrence: str, first: int, last: int) -> list[int]:
    days = range(first, last + 1)
    if recurrence == "weekday":
        return [d for d in days if (MONDAY + timedelta(days=d)).weekday() < 5]
    if recurrence == "weekly":
        return [d for d in days if (d - first) % 7 == 0]
    return list(days)


@settings(
    max_examples=20,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rules=rules, holds=holds)
def test_reservations_never_overcommit_any_occurrence(pool_admin, rules, holds):
    with transaction.atomic():
        l40s = GpuModel.objects.get(slug="l40s")
        pool = PoolFactory(slug="prop", scheduler=Scheduler.KUBERNETES, slurm_partition="")
        node = Node.objects.create(hostname="prop-0", pool=pool, state=NodeState.UP)
        Gpu.objects.bulk_create(Gpu(node=node, index=i, gpu_model=l40s) for i in range(FLEET))
        team = TeamFactory(slug="prop")
        base = at(MONDAY, 0)
        held = [0] * (14 * 24 + 40)
        for hour, length, cards in holds:
            if any(held[h] + cards > FLEET for h in range(hour, hour + length)):
                continue  # granted allocations keep the invariant: only those that fit
            AllocationFactory(team=team, pool=pool, gpu_model=l40s, card_count=cards,
                              status=AllocationStatus.APPROVED,
                              starts_at=base + timedelta(hours=hour),
                              ends_at=base + timedelta(hours=hour + length))  # fmt: skip
            for h in range(hour, hour + length):
                held[h] += cards
        for recurrence, first, more, start, length, cards in rules:
            days = oracle_days(recurrence, first, first + more)
            hours = [d * 24 + h for d in days for h in range(start, start + length)]
            short = [h // 24 for h in hours if held[h] + cards > FLEET]
            if not days:  # a weekday rule over a weekend: nothing to reserve
                with pytest.raises(InvalidInput):
                    reserve(pool_admin, team, pool, l40s, recurrence=recurrence,
                            first_date=MONDAY + timedelta(days=first),
                            last_date=MONDAY + timedelta(days=first + more))  # fmt: skip
                continue
            try:
                reserve(pool_admin, team, pool, l40s, recurrence=recurrence, card_count=cards,
                        first_date=MONDAY + timedelta(days=first),
                        last_date=MONDAY + timedelta(days=first + more),
                        start_time=time(start), end_time=time(start + length))  # fmt: skip
            except InsufficientCapacity as refused:
                assert short, (holds, rules, refused.data)
                assert refused.data["date"] == (MONDAY + timedelta(days=short[0])).isoformat()
            else:
                assert not short, (holds, rules)
                for h in hours:
                    held[h] += cards
            assert max(held) <= FLEET
        transaction.set_rollback(True)
