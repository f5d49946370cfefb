"""The week view of a pool × GPU model's capacity calendar: free cards per local day and what
holds cards, on a hand-built week; every expected figure is worked out in the comments."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta

import pytest
from django.urls import reverse
from factories import AllocationFactory, RecurringReservationFactory, TeamFactory

from pools.calendar.week import week_monday, week_name
from pools.classes.models import WorkloadClass
from pools.recurring.models import Recurrence

pytestmark = pytest.mark.django_db


def test_week_names_read_and_written():
    # 2026 starts on a Thursday, so it has an ISO week 53 (Monday 2026-12-28); 2027-W01 starts
    # Monday 2027-01-04. No week is today's (2026-12-05 is a Saturday: Monday 2026-11-30); a
    # week that does not exist is refused.
    saturday = date(2026, 12, 5)
    assert week_monday("2026-W53", saturday) == date(2026, 12, 28)
    assert week_monday("2027-W03", saturday) == date(2027, 1, 18)
    for bad in ("2027-W53", "junk", "2027-W00"):
        with pytest.raises(ValueError, match="YYYY-Www"):
            week_monday(bad, saturday)
    assert week_monday(None, saturday) == date(2026, 11, 30)
    assert week_name(date(2027, 1, 4)) == "2027-W01"
    assert week_name(date(2026, 12, 28)) == "2026-W53"


@pytest.fixture
def week(settings, team, infer_pool, l40s):
    """Week 2027-W03 (Mon 18 - Sun 24 January 2027) in Berlin (CET, UTC+1) on infer: 2 nodes ×
    4 L40S = 8 usable (ratio 1). nlp's production allocation of 2 from Tue 11:00 to Thu 11:00
    local (issue 36: its class shows on the calendar's rows);
    vision's of 5 from Wed 23:30 to Thu 00:30 local; nlp's course, 4 cards weekdays 09:00-18:00
    Berlin, Monday to Friday of that week."""
    settings.TIME_ZONE = "Europe/Berlin"
    mine = AllocationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        workload_class=WorkloadClass.objects.get(slug="production"),
        card_count=2,
        starts_at=datetime(2027, 1, 19, 10, 0, tzinfo=UTC),
        ends_at=datetime(2027, 1, 21, 10, 0, tzinfo=UTC),
    )
    theirs = AllocationFactory(
        team=TeamFactory(slug="vision", name="Vision"),
        pool=infer_pool,
        gpu_model=l40s,
        card_count=5,
        starts_at=datetime(2027, 1, 20, 22, 30, tzinfo=UTC),
        ends_at=datetime(2027, 1, 20, 23, 30, tzinfo=UTC),
    )
    course = RecurringReservationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=4,
        recurrence=Recurrence.WEEKDAY,
        time_zone="Europe/Berlin",
        first_date=date(2027, 1, 18),
        last_date=date(2027, 1, 22),
        start_time=time(9, 0),
        end_time=time(18, 0),
    )
    return mine, theirs, course


def _cells(html, table_id):
    body = re.search(rf'<table[^>]*id="{table_id}".*?<tbody>(.*?)</tbody>', html, re.S)[1]
    rows = re.findall(r"<tr>(.*?)</tr>", body, re.S)
    return [
        [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)]
        for r in rows
    ]


def test_free_cards_per_day_and_holds(client, team_member, week):
    mine, theirs, course = week
    client.force_login(team_member)
    url = reverse("pools:pool-calendar", args=["infer", "l40s"])
    html = client.get(url, {"week": "2027-W03"}).content.decode()
    assert "week 2027-W03" in html
    assert "?week=2027-W02" in html and "?week=2027-W04" in html
    assert "out of 8 usable" in html
    days = _cells(html, "calendar-days")
    # Peak held per day, 8 usable:
    # Mon: course 4 -> 4 free. Tue: mine 2 + course 4 -> 2. Wed: mine 2 + course 4 = 6, then
    # from 23:30 mine 2 + theirs 5 = 7 -> 1. Thu: 00:00-00:30 mine + theirs 7 -> 1. Fri: course
    # 4 -> 4. Sat, Sun: nothing -> 8.
    assert [(d[0], d[1]) for d in days] == [
        ("Mon 18 Jan", "4"),
        ("Tue 19 Jan", "2"),
        ("Wed 20 Jan", "1"),
        ("Thu 21 Jan", "1"),
        ("Fri 22 Jan", "4"),
        ("Sat 23 Jan", "8"),
        ("Sun 24 Jan", "8"),
    ]
    # Thursday's holds by start: mine (Tue), theirs (Wed 23:30), the course's occurrence.
    assert days[3][2] == (
        f"NLP 2 (allocation #{mine.pk}, Production); other teams 5 (allocation); "
        f"NLP 4 (recurring #{course.pk})"
    )
    holds = _cells(html, "calendar-holds")
    # By start: Mon's occurrence, mine (Tue 11:00), Tue's .. Fri's occurrences, with theirs
    # (Wed 23:30) after Wed's occurrence. A member of nlp does not read vision's name, nor its
    # allocation's id (may_see_all_holders: counts and times only).
    assert [h[2] for h in holds] == ["—", "—", "Production", "—", "—", "—", "—"]  # class
    assert [(h[0], h[1], h[3], h[4], h[5]) for h in holds] == [
        (f"Recurring #{course.pk}", "NLP", "4", "Mon 18 Jan 09:00", "Mon 18 Jan 18:00"),
        (f"Recurring #{course.pk}", "NLP", "4", "Tue 19 Jan 09:00", "Tue 19 Jan 18:00"),
        (f"Allocation #{mine.pk}", "NLP", "2", "Tue 19 Jan 11:00", "Thu 21 Jan 11:00"),
        (f"Recurring #{course.pk}", "NLP", "4", "Wed 20 Jan 09:00", "Wed 20 Jan 18:00"),
        ("Allocation", "other teams", "5", "Wed 20 Jan 23:30", "Thu 21 Jan 00:30"),
        (f"Recurring #{course.pk}", "NLP", "4", "Thu 21 Jan 09:00", "Thu 21 Jan 18:00"),
        (f"Recurring #{course.pk}", "NLP", "4", "Fri 22 Jan 09:00", "Fri 22 Jan 18:00"),
    ]


def test_a_maintenance_window_says_where_the_cards_went(client, team_member, week, infer_pool):
    """A planned window on inf-01 (4 L40S) Sat 23 Jan 10:00-12:00 Berlin: Saturday has 8 − 4 =
    4 free, and the page says so — before, the day read "4 free" out of 8 with "—" holding
    anything (QA saw "40 free, nothing held" on the demo's driver-upgrade waves)."""
    from factories import MaintenanceWindowFactory

    from pools.inventory.models import Node
    from pools.maintenance.models import MaintenanceScope

    window = MaintenanceWindowFactory(
        title="driver R570 wave 1",
        scope=MaintenanceScope.NODES,
        pool=infer_pool,
        starts_at=datetime(2027, 1, 23, 9, 0, tzinfo=UTC),
        ends_at=datetime(2027, 1, 23, 11, 0, tzinfo=UTC),
    )
    window.nodes.add(Node.objects.get(hostname="inf-01"))
    client.force_login(team_member)
    url = reverse("pools:pool-calendar", args=["infer", "l40s"])
    html = client.get(url, {"week": "2027-W03"}).content.decode()
    days = _cells(html, "calendar-days")
    assert days[5] == ["Sat 23 Jan", "4", f"4 away for maintenance (window #{window.pk})"]
    assert days[6] == ["Sun 24 Jan", "8", "—"]
    holds = _cells(html, "calendar-holds")
    assert holds[-1] == [
        f"Maintenance #{window.pk}: driver R570 wave 1",
        "— (cards away)",
        "—",
        "4",
        "Sat 23 Jan 10:00",
        "Sat 23 Jan 12:00",
    ]


def test_pool_admin_reads_every_team(client, pool_admin, week):
    client.force_login(pool_admin)
    url = reverse("pools:pool-calendar", args=["infer", "l40s"])
    html = client.get(url, {"week": "2027-W03"}).content.decode()
    _, theirs, _ = week
    assert "Vision" in html and "other teams 5" not in html
    assert f"Vision 5 (allocation #{theirs.pk})" in html


def test_empty_week_and_unknown_pool(client, team_member, infer_pool, l40s):
    client.force_login(team_member)
    url = reverse("pools:pool-calendar", args=["infer", "l40s"])
    html = client.get(url, {"week": "2027-W10"}).content.decode()
    assert [d[1] for d in _cells(html, "calendar-days")] == ["8"] * 7
    assert "Nothing holds cards of L40S in Inference this week." in html
    missing = reverse("pools:pool-calendar", args=["nope", "l40s"])
    assert client.get(missing).status_code == 404


def test_queries_do_not_grow_with_the_week(client, team_member, week, django_assert_num_queries):
    """Session, user, pool, model, visible teams, the week's allocations, its recurring rules and
    the schedulable count (8), then for the free cards of all seven days at once
    (:func:`pools.calendar.week.free_per_day`) the inventory generation, the
    allocations, the rules, the maintenance windows and the allocations a reclamation changed
    (5), the week's maintenance windows shown as holds (1) and its temporary overrides (1): 15,
    with 2 or 42 allocations that week."""
    client.force_login(team_member)
    url = reverse("pools:pool-calendar", args=["infer", "l40s"])
    client.get(url, {"week": "2027-W03"})  # the pool's node read is cached from here on
    with django_assert_num_queries(15):
        client.get(url, {"week": "2027-W03"})
    pool, l40s = week[0].pool, week[0].gpu_model
    for hour in range(40):
        AllocationFactory(
            team=week[0].team,
            pool=pool,
            gpu_model=l40s,
            card_count=1,
            mig_profile="",
            starts_at=datetime(2027, 1, 23, tzinfo=UTC) + timedelta(hours=hour),
            ends_at=datetime(2027, 1, 25, 0, tzinfo=UTC),
        )
    with django_assert_num_queries(15):
        client.get(url, {"week": "2027-W03"})


def test_a_day_over_the_change_to_summer_time(client, settings, team_member, infer_pool, l40s):
    # Sunday 2027-03-28 in Berlin runs from 00:00 CET (Sat 23:00 UTC) to 00:00 CEST (Sun 22:00
    # UTC): 23 hours. 6 cards from Sun 22:00 UTC are Monday's, not Sunday's; 3 cards from Sat
    # 23:00 UTC to 23:30 UTC are Sunday's (00:00-00:30 CET), not Saturday's.
    settings.TIME_ZONE = "Europe/Berlin"
    team = team_member.memberships.get().team
    AllocationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=6,
        starts_at=datetime(2027, 3, 28, 22, 0, tzinfo=UTC),
        ends_at=datetime(2027, 3, 29, 2, 0, tzinfo=UTC),
    )
    AllocationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=3,
        starts_at=datetime(2027, 3, 27, 23, 0, tzinfo=UTC),
        ends_at=datetime(2027, 3, 27, 23, 30, tzinfo=UTC),
    )
    client.force_login(team_member)
    url = reverse("pools:pool-calendar", args=["infer", "l40s"])
    sat_sun = _cells(client.get(url, {"week": "2027-W12"}).content.decode(), "calendar-days")[5:]
    assert [(d[0], d[1]) for d in sat_sun] == [("Sat 27 Mar", "8"), ("Sun 28 Mar", "5")]
    monday = _cells(client.get(url, {"week": "2027-W13"}).content.decode(), "calendar-days")[0]
    assert (monday[0], monday[1]) == ("Mon 29 Mar", "2")


@pytest.mark.parametrize(
    "view,args",
    [("pools:pool-calendar", ["infer", "l40s"]), ("pools:driver-group-calendar", [550])],
)
@pytest.mark.parametrize(
    "query",
    [
        {"month": "0001-01"},
        {"month": "9999-12"},
        {"week": "9999-W52"},
        {"week": "0001-W01"},
        {"month": "1969-12"},
        {"week": "1969-W52"},
    ],
)
def test_out_of_range_week_or_month_is_a_400_naming_it(
    client, team_member, infer_pool, l40s, view, args, query
):
    # QA defect 1: years outside 1970-9998 answered 500 (date out of range); then today's week or
    # month was shown as if asked for; now, as for a week or month that does not exist, a 400
    # names the parameter and its format.
    client.force_login(team_member)
    response = client.get(reverse(view, args=args), query)
    assert response.status_code == 400
    (name,) = query
    assert f'data-bad-parameter="{name}"' in response.content.decode()
    assert "years 1970-9998" in response.content.decode()
