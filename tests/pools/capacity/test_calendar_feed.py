"""A team's secret calendar feed link: made by a member, read by a calendar app without a
session, reset by a manager (the old link then 404), refused to members and other teams."""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime, time

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse
from factories import AllocationFactory, MembershipFactory, RecurringReservationFactory, TeamFactory
from icalendar import Calendar

from pools.audit.models import AuditEvent
from pools.capacity.calendar_feed import TOKEN_LENGTH, feed_token, token_sha256
from pools.capacity.models import Recurrence, TeamCalendarFeed
from pools.capacity.views_calendar import CalendarFeedThrottle
from pools.common.choices import TeamRole

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_throttle():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def entries(team, infer_pool, l40s):
    """nlp's allocation and weekday course, vision's allocation (not in nlp's feed)."""
    mine = AllocationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        card_count=3,
        starts_at=datetime(2099, 1, 11, 8, 0, tzinfo=UTC),
        ends_at=datetime(2099, 1, 18, 8, 0, tzinfo=UTC),
    )
    course = RecurringReservationFactory(
        team=team,
        pool=infer_pool,
        gpu_model=l40s,
        name="course",
        card_count=4,
        recurrence=Recurrence.WEEKDAY,
        time_zone="Europe/Berlin",
        first_date=date(2099, 3, 2),
        last_date=date(2099, 3, 27),
        start_time=time(9, 0),
        end_time=time(18, 0),
    )
    theirs = AllocationFactory(
        team=TeamFactory(slug="vision", name="Vision"),
        pool=infer_pool,
        gpu_model=l40s,
        starts_at=datetime(2099, 1, 11, 8, 0, tzinfo=UTC),
        ends_at=datetime(2099, 1, 12, 8, 0, tzinfo=UTC),
    )
    return mine, course, theirs


def _link(html: str) -> str:
    return re.search(r'id="feed-url" value="http://testserver/calendar/([^"]+)\.ics"', html)[1]


def _make(client, user, slug="nlp") -> str:
    client.force_login(user)
    response = client.post(reverse("pools:team-calendar-link", args=[slug, "create"]))
    assert response.status_code == 302
    return _link(client.get(reverse("pools:team-calendar", args=[slug])).content.decode())


def test_a_member_makes_the_link_and_an_app_reads_it_without_a_session(
    client, team, team_member, entries
):
    mine, course, theirs = entries
    token = _make(client, team_member)
    assert len(token) == TOKEN_LENGTH
    # stored hashed: the row keeps the salt and sha256(token), never the token
    feed = TeamCalendarFeed.objects.get(team=team)
    assert feed.token_sha256 == token_sha256(token) and token not in (feed.salt, feed.token_sha256)
    assert feed_token(feed.salt) == token
    event = AuditEvent.objects.get(action="team_calendar_feed.created")
    assert token not in json.dumps(event.after) and feed.salt not in json.dumps(event.after)
    assert event.after["team"] == "nlp" and event.after["created_by"] == "alice"
    # a second "create" keeps the link (idempotent, no second event)
    client.post(reverse("pools:team-calendar-link", args=["nlp", "create"]))
    assert TeamCalendarFeed.objects.get(team=team).salt == feed.salt
    assert AuditEvent.objects.filter(action="team_calendar_feed.created").count() == 1

    app = Client()  # a calendar app: no session, no cookie
    response = app.get(f"/calendar/{token}.ics")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/calendar; charset=utf-8"
    events = {str(e["uid"]): e for e in Calendar.from_ical(response.content).walk("VEVENT")}
    assert set(events) == {f"allocation-{mine.pk}@testserver", f"recurring-{course.pk}@testserver"}
    assert events[f"allocation-{mine.pk}@testserver"].decoded("dtstart") == mine.starts_at
    assert str(events[f"recurring-{course.pk}@testserver"]["summary"]).startswith("course: 4 ×")


def test_reset_kills_the_old_link(client, team, team_member, team_manager, entries):
    old = _make(client, team_member)
    client.force_login(team_manager)
    response = client.post(reverse("pools:team-calendar-link", args=["nlp", "reset"]))
    assert response.status_code == 302
    new = _link(client.get(reverse("pools:team-calendar", args=["nlp"])).content.decode())
    assert new != old
    app = Client()
    assert app.get(f"/calendar/{old}.ics").status_code == 404
    assert app.get(f"/calendar/{new}.ics").status_code == 200
    event = AuditEvent.objects.get(action="team_calendar_feed.reset")
    assert event.before["created_by"] == "alice" and event.after["created_by"] == "mia"
    assert old not in json.dumps([event.before, event.after]) and new not in json.dumps(event.after)


def test_members_and_other_teams_cannot_reset(client, team, team_member, entries):
    token = _make(client, team_member)
    salt = TeamCalendarFeed.objects.get(team=team).salt
    # a plain member of nlp: back to the calendar page (a reload does not post again), the
    # reason there naming the team by its name, the link unchanged
    response = client.post(reverse("pools:team-calendar-link", args=["nlp", "reset"]), follow=True)
    assert response.redirect_chain == [(reverse("pools:team-calendar", args=["nlp"]), 302)]
    assert "Only a manager of team NLP or a pool admin" in response.content.decode()
    # the manager of another team: nlp does not exist for them
    other = MembershipFactory(
        team=TeamFactory(slug="speech", name="Speech"), user__username="sam", role=TeamRole.MANAGER
    ).user
    client.force_login(other)
    assert client.post(reverse("pools:team-calendar-link", args=["nlp", "reset"])).status_code == (
        404
    )
    assert client.get(reverse("pools:team-calendar", args=["nlp"])).status_code == 404
    assert TeamCalendarFeed.objects.get(team=team).salt == salt
    assert not AuditEvent.objects.filter(action="team_calendar_feed.reset").exists()
    assert Client().get(f"/calendar/{token}.ics").status_code == 200


def test_unknown_tokens_are_not_found(client, team_member, entries):
    _make(client, team_member)
    app = Client()
    assert app.get("/calendar/" + "A" * TOKEN_LENGTH + ".ics").status_code == 404
    assert app.get("/calendar/short.ics").status_code == 404


def test_the_feed_is_throttled_per_address(client, team_member, entries, monkeypatch):
    token = _make(client, team_member)
    monkeypatch.setattr(CalendarFeedThrottle, "THROTTLE_RATES", {"calendar_feed": "3/minute"})
    app = Client()
    # 3 a minute, found or not: two reads, a wrong token, then the 4th is refused (Retry-After)
    assert [app.get(f"/calendar/{token}.ics").status_code for _ in range(2)] == [200, 200]
    assert app.get("/calendar/" + "B" * TOKEN_LENGTH + ".ics").status_code == 404
    refused = app.get(f"/calendar/{token}.ics")
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0


def test_the_page_before_any_link_and_for_a_manager(client, team_member, team_manager, entries):
    client.force_login(team_member)
    html = client.get(reverse("pools:team-calendar", args=["nlp"])).content.decode()
    assert "NLP has no calendar link yet." in html and "Reset link" not in html
    _make(client, team_member)
    html = client.get(reverse("pools:team-calendar", args=["nlp"])).content.decode()
    assert 'data-copy="feed-url"' in html and "Reset link" not in html
    client.force_login(team_manager)
    html = client.get(reverse("pools:team-calendar", args=["nlp"])).content.decode()
    assert "Reset link" in html and "data-confirm=" in html
    assert client.post(reverse("pools:team-calendar-link", args=["nlp", "junk"])).status_code == 404


def test_opening_the_reset_address_is_the_portal_405_page(client, team, team_member):
    # QA defect 9: a GET on the form's address answered 405 with an empty body
    client.force_login(team_member)
    response = client.get(reverse("pools:team-calendar-link", args=["nlp", "reset"]))
    assert response.status_code == 405 and response["Allow"] == "POST"
    html = response.content.decode()
    assert "only takes a form's submission (POST)" in html
    assert f'href="{reverse("pools:team-calendar", args=["nlp"])}"' in html
    assert "<nav" in html or "<header" in html  # the portal's page, not a bare answer
