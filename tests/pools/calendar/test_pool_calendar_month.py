"""The month view of a pool × GPU model's capacity calendar: free cards and holds per local day
over a month in which a recurring rule of another zone crosses two changes of summer time;
every expected figure is worked out in the comments."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta

import pytest
from django.urls import reverse
from factories import AllocationFactory, RecurringReservationFactory

from pools.calendar.month import month_first, month_grid, month_name
from pools.recurring.models import Recurrence

pytestmark = pytest.mark.django_db


def test_month_names_read_and_written():
    # No month is today's; a month that does not exist, or outside 1970-9998, is refused.
    saturday = date(2026, 12, 5)
    assert month_first("2027-03", saturday) == date(2027, 3, 1)
    for bad in ("2027-13", "2027-00", "9999-12", "junk"):
        with pytest.raises(ValueError, match="YYYY-MM"):
            month_first(bad, saturday)
    assert month_first(None, saturday) == date(2026, 12, 1)
    assert month_first("", saturday) == date(2026, 12, 1)
    assert month_name(date(2027, 3, 1)) == "2027-03"


def test_grid_rows_start_on_monday():
    # February 2027 starts on a Monday and has 28 days: 4 full rows. May 2027 starts on a
    # Saturday (5 blanks) and has 31 days: 5 + 31 = 36 cells, 6 trailing blanks, 6 rows.
    class D:
        def __init__(self, day):
            self.day = day

    feb = month_grid([D(date(2027, 2, 1) + timedelta(days=i)) for i in range(28)])
    assert len(feb) == 4 and all(None not in row for row in feb)
    may = month_grid([D(date(2027, 5, 1) + timedelta(days=i)) for i in range(31)])
    assert len(may) == 6
    assert may[0][:5] == [None] * 5 and may[0][5].day == date(2027, 5, 1)
    assert may[5][0].day == date(2027, 5, 31) and may[5][1:] == [None] * 6


@pytest.fixture
def march(settings, team, infer_pool, l40s):
    """March 2027 in Berlin on infer (2 nodes × 4 L40S = 8 usable, ratio 1). nlp's evening
    course: 4 cards, weekdays 18:00-23:00 New York, 1 to 31 March; 3 cards of nlp from Wed 17
    March 22:00 to Thu 18 March 01:00 Berlin (21:00-00:00 UTC)."""
    settings.TIME_ZONE = "Europe/Berlin"
    course = RecurringReservationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=4,
        recurrence=Recurrence.WEEKDAY,
        time_zone="America/New_York",
        first_date=date(2027, 3, 1),
        last_date=date(2027, 3, 31),
        start_time=time(18, 0),
        end_time=time(23, 0),
    )
    allocation = AllocationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=3,
        starts_at=datetime(2027, 3, 17, 21, 0, tzinfo=UTC),
        ends_at=datetime(2027, 3, 18, 0, 0, tzinfo=UTC),
    )
    return course, allocation


def _days(html):
    cells = re.findall(r'<li class="month-day[^"]*" data-day="([\d-]+)">(.*?)</li>', html, re.S)
    out = {}
    for day, body in cells:
        free = re.search(r"<strong>(\d+)</strong> free", body)[1]
        holds = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", body.split('class="holds')[1]))
        out[int(day[-2:])] = (int(free), holds.split(">", 1)[-1].strip())
    return out


def test_free_cards_per_day_across_both_changes_of_summer_time(client, team_member, march):
    """New York moves to summer time on Sun 14 March 2027, Berlin on Sun 28 March. The course's
    occurrence of New York date D, 18:00-23:00 New York, in Berlin:

    - D in 1-12 March (EST, UTC-5; CET, UTC+1): 23:00-04:00 UTC = 00:00-05:00 Berlin of D+1,
      wholly in the next Berlin day (it starts at its midnight: half-open, not in day D);
    - D in 15-26 March (EDT, UTC-4; CET): 22:00-03:00 UTC = 23:00 Berlin D to 04:00 D+1, in
      both Berlin days;
    - D in 29-31 March (EDT; CEST, UTC+2): 22:00-03:00 UTC = 00:00-05:00 Berlin of D+1 again.

    Weekdays of March 2027 (the 1st is a Monday): 1-5, 8-12, 15-19, 22-26, 29-31. Occurrences
    per Berlin day: 2-6 and 9-13 one; 15 one (D=15's head); 16-19 two (a tail and a head); 20
    one (Friday 19's tail, a Saturday); 22 one; 23-26 two; 27 one (Friday 26's tail); 30, 31
    one (29's and 30's; 31's falls on 1 April); 1, 7, 8, 14, 21, 28, 29 none.
    Occurrences never overlap each other (5 h a day), so a day with one holds 4: 8 - 4 = 4
    free; none: 8. The allocation, 3 cards 22:00 Wed 17 to 01:00 Thu 18 Berlin, meets D=17's
    occurrence (23:00-04:00): 4 + 3 = 7 held from 23:00 to 01:00, so 17 and 18 have 8 - 7 = 1.
    Sunday 28 March has 23 hours and nothing: 8.
    """
    client.force_login(team_member)
    url = reverse("pools:pool-calendar", args=["infer", "l40s"])
    html = client.get(url, {"month": "2027-03"}).content.decode()
    assert "March 2027" in html and "out of 8 usable" in html
    assert "?month=2027-02" in html and "?month=2027-04" in html
    days = _days(html)
    assert sorted(days) == list(range(1, 32))
    occurrences = {d: 0 for d in range(1, 32)}
    for d in [2, 3, 4, 5, 6, 9, 10, 11, 12, 13, 15, 20, 22, 27, 30, 31]:
        occurrences[d] = 1
    for d in [16, 17, 18, 19, 23, 24, 25, 26]:
        occurrences[d] = 2
    expected_free = {d: (4 if n else 8) for d, n in occurrences.items()}
    expected_free[17] = expected_free[18] = 1
    assert {d: free for d, (free, _) in days.items()} == expected_free
    assert days[1][1] == "nothing held"
    assert days[2][1] == "1 recurring"
    assert days[16][1] == "2 recurring"
    assert days[17][1] == "1 allocation · 2 recurring"
    assert days[18][1] == "1 allocation · 2 recurring"
    assert days[28][1] == "nothing held"
    # each day opens its ISO week: 17 March 2027 is in 2027-W11, 1 March in 2027-W09
    assert 'href="?week=2027-W11" class="day-name">Wed 17 Mar' in html
    assert 'href="?week=2027-W09" class="day-name">Mon 1 Mar' in html


def test_a_day_with_maintenance_says_so(client, team_member, march, infer_pool):
    """A planned window on inf-01 (4 L40S) Sun 28 March 10:00-12:00 Berlin (08:00-10:00 UTC,
    summer time from 03:00): 8 − 4 = 4 free, and the day says "1 maintenance", not "nothing
    held"; Monday 29 has neither (8 free)."""
    from factories import MaintenanceWindowFactory

    from pools.inventory.models import Node
    from pools.maintenance.models import MaintenanceScope

    window = MaintenanceWindowFactory(
        scope=MaintenanceScope.NODES,
        pool=infer_pool,
        starts_at=datetime(2027, 3, 28, 8, 0, tzinfo=UTC),
        ends_at=datetime(2027, 3, 28, 10, 0, tzinfo=UTC),
    )
    window.nodes.add(Node.objects.get(hostname="inf-01"))
    client.force_login(team_member)
    url = reverse("pools:pool-calendar", args=["infer", "l40s"])
    days = _days(client.get(url, {"month": "2027-03"}).content.decode())
    assert days[28] == (4, "1 maintenance")
    assert days[29] == (8, "nothing held")


def test_week_links_to_its_month_and_bad_month_is_a_400(client, team_member, march):
    client.force_login(team_member)
    url = reverse("pools:pool-calendar", args=["infer", "l40s"])
    week = client.get(url, {"week": "2027-W11"}).content.decode()
    assert "?month=2027-03" in week
    # 2027-13 is no month: a 400 naming it, not today's month shown as if asked for
    response = client.get(url, {"month": "2027-13"})
    assert response.status_code == 400
    first = datetime.now(UTC).date().replace(day=1)
    assert f'data-day="{first:%Y-%m-%d}"' not in response.content.decode()


def test_queries_do_not_grow_with_the_allocations(
    client, team_member, march, django_assert_num_queries
):
    """Session, user, pool, model, the month's allocations and recurring rules (listed), the
    schedulable count (7), then for the free cards of all 31 days at once the inventory
    generation, the allocations, the rules, the maintenance windows and the allocations a
    reclamation changed (5), the month's maintenance windows counted per day (1), then the
    visible teams and the month's temporary overrides (2): 15, with 1 or 41 allocations that
    month."""
    course, allocation = march
    client.force_login(team_member)
    url = reverse("pools:pool-calendar", args=["infer", "l40s"])
    client.get(url, {"month": "2027-03"})  # the pool's node read is cached from here on
    with django_assert_num_queries(15):
        client.get(url, {"month": "2027-03"})
    for hour in range(40):
        AllocationFactory(
            team=allocation.team,
            pool=allocation.pool,
            gpu_model=allocation.gpu_model,
            card_count=1,
            starts_at=datetime(2027, 3, 5, tzinfo=UTC) + timedelta(hours=hour),
            ends_at=datetime(2027, 3, 9, tzinfo=UTC),
        )
    with django_assert_num_queries(15):
        client.get(url, {"month": "2027-03"})
