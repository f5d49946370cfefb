"""The team's iCalendar feed: hand-built allocations and recurring reservations read back
with ``icalendar``; every expected instant below is worked out by hand in the comments."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from zoneinfo import ZoneInfo

import pytest
from django.urls import reverse
from factories import AllocationFactory, RecurringReservationFactory, TeamFactory
from icalendar import Calendar

from pools.capacity.models import Recurrence, ReservationStatus
from pools.common.choices import AllocationStatus

pytestmark = pytest.mark.django_db

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _now(monkeypatch):
    """The feed's clock: 2026-12-05 12:00 UTC, whatever the day the tests run."""
    monkeypatch.setattr("django.utils.timezone.now", lambda: NOW)


def _feed(client, slug):
    response = client.get(reverse("pools:team-calendar-ics", args=[slug]))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/calendar; charset=utf-8"
    return Calendar.from_ical(response.content)


def _events(calendar):
    return {str(e["uid"]): e for e in calendar.walk("VEVENT")}


@pytest.fixture
def built(team, infer_pool, l40s):
    """Team nlp: one approved allocation, one active allocation, one cancelled (left out), a
    weekday course in Berlin over the spring change of summer time, a daily rule in New York
    late in the evening, a cancelled rule and a past one (left out); team vision's allocation
    (left out)."""
    approved = AllocationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=3,
        starts_at=datetime(2027, 1, 11, 8, 0, tzinfo=UTC),
        ends_at=datetime(2027, 1, 18, 8, 0, tzinfo=UTC),
    )
    active = AllocationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=2,
        status=AllocationStatus.ACTIVE,
        starts_at=datetime(2026, 11, 1, 0, 0, tzinfo=UTC),
        ends_at=datetime(2027, 6, 1, 0, 0, tzinfo=UTC),
    )
    AllocationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        status=AllocationStatus.CANCELLED,
        starts_at=datetime(2027, 1, 11, 8, 0, tzinfo=UTC),
        ends_at=datetime(2027, 1, 12, 8, 0, tzinfo=UTC),
    )
    AllocationFactory(  # holding but ended before NOW: left out
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        starts_at=datetime(2026, 11, 1, 8, 0, tzinfo=UTC),
        ends_at=datetime(2026, 12, 1, 8, 0, tzinfo=UTC),
    )
    AllocationFactory(
        team=TeamFactory(slug="vision"),
        pool=infer_pool,
        gpu_model=l40s,
        starts_at=datetime(2027, 1, 11, 8, 0, tzinfo=UTC),
        ends_at=datetime(2027, 1, 12, 8, 0, tzinfo=UTC),
    )
    # 2027-03-20 is a Saturday: the first weekday is Monday 2027-03-22. The last date,
    # 2027-04-02, is a Friday after the change to CEST (last Sunday of March: 2027-03-28),
    # so its 09:00 is 07:00 UTC.
    course = RecurringReservationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        name="course",
        card_count=4,
        recurrence=Recurrence.WEEKDAY,
        time_zone="Europe/Berlin",
        first_date=date(2027, 3, 20),
        last_date=date(2027, 4, 2),
        start_time=time(9, 0),
        end_time=time(18, 0),
    )
    # Every day 2027-01-01..01-10 22:00-23:30 EST (UTC-5): the last starts 2027-01-11 03:00 UTC.
    nightly = RecurringReservationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        name="nightly",
        card_count=1,
        recurrence=Recurrence.DAILY,
        time_zone="America/New_York",
        first_date=date(2027, 1, 1),
        last_date=date(2027, 1, 10),
        start_time=time(22, 0),
        end_time=time(23, 30),
    )
    RecurringReservationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        status=ReservationStatus.CANCELLED,
        first_date=date(2027, 1, 1),
        last_date=date(2027, 1, 10),
    )
    # Over before NOW's UTC date less a day (2026-12-04): left out.
    RecurringReservationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        first_date=date(2026, 11, 2),
        last_date=date(2026, 12, 3),
    )
    return approved, active, course, nightly


def test_member_reads_allocations_and_recurring_rules(client, team_member, built):
    approved, active, course, nightly = built
    client.force_login(team_member)
    calendar = _feed(client, "nlp")
    events = _events(calendar)
    assert set(events) == {
        f"allocation-{approved.pk}@testserver",
        f"allocation-{active.pk}@testserver",
        f"recurring-{course.pk}@testserver",
        f"recurring-{nightly.pk}@testserver",
    }

    one = events[f"allocation-{approved.pk}@testserver"]
    assert one.decoded("dtstart") == datetime(2027, 1, 11, 8, 0, tzinfo=UTC)
    assert one.decoded("dtend") == datetime(2027, 1, 18, 8, 0, tzinfo=UTC)
    assert str(one["summary"]) == "3 × L40S on Inference"
    assert "rrule" not in one
    stamp = one.decoded("dtstamp")
    assert stamp.utcoffset().total_seconds() == 0

    weekday = events[f"recurring-{course.pk}@testserver"]
    assert weekday["dtstart"].params["TZID"] == "Europe/Berlin"
    assert weekday.decoded("dtstart") == datetime(2027, 3, 22, 9, 0, tzinfo=BERLIN)
    assert weekday.decoded("dtend") == datetime(2027, 3, 22, 18, 0, tzinfo=BERLIN)
    assert weekday["rrule"].to_ical() == b"FREQ=WEEKLY;UNTIL=20270402T070000Z;BYDAY=MO,TU,WE,TH,FR"
    assert str(weekday["summary"]) == "course: 4 × L40S on Inference"

    daily = events[f"recurring-{nightly.pk}@testserver"]
    assert daily["dtstart"].params["TZID"] == "America/New_York"
    assert daily.decoded("dtstart") == datetime(2027, 1, 1, 22, 0, tzinfo=NEW_YORK)
    assert daily.decoded("dtend") == datetime(2027, 1, 1, 23, 30, tzinfo=NEW_YORK)
    assert daily["rrule"].to_ical() == b"FREQ=DAILY;UNTIL=20270111T030000Z"

    zones = {str(tz["tzid"]) for tz in calendar.walk("VTIMEZONE")}
    assert zones == {"Europe/Berlin", "America/New_York"}


def test_weekly_rule_repeats_on_its_first_weekday(client, pool_admin, team, infer_pool, l40s):
    # 2027-02-03 is a Wednesday; the last Wednesday on or before Sunday 2027-02-28 is 02-24,
    # 14:00 CET (UTC+1) = 13:00 UTC. A pool admin sees every team's feed.
    weekly = RecurringReservationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        recurrence=Recurrence.WEEKLY,
        time_zone="Europe/Berlin",
        first_date=date(2027, 2, 3),
        last_date=date(2027, 2, 28),
        start_time=time(14, 0),
        end_time=time(16, 0),
    )
    client.force_login(pool_admin)
    event = _events(_feed(client, "nlp"))[f"recurring-{weekly.pk}@testserver"]
    assert event.decoded("dtstart") == datetime(2027, 2, 3, 14, 0, tzinfo=BERLIN)
    assert event["rrule"].to_ical() == b"FREQ=WEEKLY;UNTIL=20270224T130000Z"


def test_team_with_nothing_is_a_valid_empty_calendar(client, team_member):
    client.force_login(team_member)
    calendar = _feed(client, "nlp")
    assert calendar.name == "VCALENDAR"
    assert str(calendar["version"]) == "2.0"
    assert calendar.walk("VEVENT") == []


def test_not_a_member_gets_404(client, other_member, built):
    client.force_login(other_member)
    assert client.get(reverse("pools:team-calendar-ics", args=["nlp"])).status_code == 404
    assert client.get(reverse("pools:team-calendar-ics", args=["nope"])).status_code == 404


def test_anonymous_is_not_served(client, built):
    response = client.get(reverse("pools:team-calendar-ics", args=["nlp"]))
    assert response.status_code == 302  # to sign in, then back to the feed
    assert response["Location"] == "/login/?next=/teams/nlp/calendar.ics"
    assert b"VCALENDAR" not in response.content


def test_team_dashboard_links_the_feed(client, team_member):
    client.force_login(team_member)
    page = client.get(reverse("team-dashboard", args=["nlp"])).content.decode()
    assert '<a href="/teams/nlp/calendar/" role="button"' in page  # the subscription page
    assert "Add to calendar" in page
