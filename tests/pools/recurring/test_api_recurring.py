"""``/api/v1/recurring-reservations/``: pool admins reserve and cancel, members read their
teams', conflicts and bad input answer 4xx JSON and write nothing.

Pool ``infer`` (conftest): 8 L40S, over-commit 1.0. The course is 8 cards on weekdays from
the first Monday of March in the year after next, 09:00-18:00 Europe/Berlin (CET, UTC+1 until
the last Sunday of March): the first occurrence is 08:00-17:00 UTC.
"""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from django.utils import timezone
from factories import MembershipFactory, TeamFactory

from pools.recurring.models import RecurringReservation

pytestmark = pytest.mark.django_db
URL = "/api/v1/recurring-reservations/"
YEAR = timezone.now().year + 2
MONDAY = date(YEAR, 3, 1) + timedelta(days=(7 - date(YEAR, 3, 1).weekday()) % 7)


def course(**fields):
    return {
        "team": "nlp", "pool": "infer", "gpu_model": "l40s", "name": "LLM course",
        "card_count": 8, "recurrence": "weekday", "time_zone": "Europe/Berlin",
        "first_date": MONDAY.isoformat(), "last_date": (MONDAY + timedelta(days=11)).isoformat(),
        "start_time": "09:00", "end_time": "18:00",
    } | fields  # fmt: skip


def test_a_pool_admin_reserves_and_cancels(admin_api, team, infer_pool, l40s):
    answer = admin_api.post(URL, course(), format="json")
    assert answer.status_code == 201, answer.json()
    body = answer.json()
    assert (body["team"], body["status"], body["card_count"]) == ("nlp", "active", 8)
    assert body["scheduler_binding"] == {}  # no scheduler configured: nothing written yet
    assert body["next_occurrence"] == {
        "start": f"{MONDAY.isoformat()}T08:00:00+00:00",
        "end": f"{MONDAY.isoformat()}T17:00:00+00:00",
    }
    cancelled = admin_api.post(f"{URL}{body['id']}/cancel/", {"reason": "moved"}, format="json")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    again = admin_api.post(f"{URL}{body['id']}/cancel/", {}, format="json")
    assert again.status_code == 409 and again.json()["code"] == "invalid_transition"


def test_an_overcommitting_reservation_answers_409_with_the_first_date(
    admin_api, team, infer_pool, l40s
):
    """8 cards on weekdays leave none: 1 card daily from the Sunday before is refused on
    the Monday (the Sunday has no course)."""
    assert admin_api.post(URL, course(), format="json").status_code == 201
    sunday = MONDAY - timedelta(days=1)
    answer = admin_api.post(
        URL,
        course(card_count=1, recurrence="daily", first_date=sunday.isoformat(), name="extra"),
        format="json",
    )
    assert answer.status_code == 409
    body = answer.json()
    data = body["data"]
    assert (body["code"], data["date"], data["free"], data["requested"]) == (
        "insufficient_capacity", MONDAY.isoformat(), 0, 1)  # fmt: skip
    assert body["errors"] == {"first_date": [f"Not enough free cards on {MONDAY.isoformat()}."]}
    assert RecurringReservation.objects.count() == 1


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"recurrence": "monthly"}, "recurrence"),
        ({"card_count": 0}, "card_count"),
        ({"time_zone": "Nowhere/City"}, "time_zone"),
        ({"end_time": "08:00"}, "end_time"),
        ({"pool": "missing"}, "pool"),
        ({"first_date": "2027-02-30"}, "first_date"),
        # Django's parse_time drops an offset silently; Berlin's offset follows the date
        ({"start_time": "09:00+01:00"}, "start_time"),
        ({"end_time": "18:00:00Z"}, "end_time"),
        ({"start_time": "9:00"}, "start_time"),
        ({"start_time": "09:00:00.5"}, "start_time"),
    ],
)
def test_bad_input_answers_400_naming_the_field(admin_api, team, infer_pool, l40s, fields, field):
    answer = admin_api.post(URL, course(**fields), format="json")
    assert answer.status_code == 400
    body = answer.json()
    assert field in body["errors"], body
    assert not RecurringReservation.objects.exists()


def test_members_read_their_teams_and_may_not_reserve(
    admin_api, member_api, member, team, infer_pool, l40s
):
    TeamFactory(slug="vision")
    admin_api.post(URL, course(), format="json")
    admin_api.post(URL, course(team="vision", card_count=0), format="json")  # refused anyway
    assert member_api.get(URL).json()["results"] == []
    MembershipFactory(team=team, user=member)
    assert [r["name"] for r in member_api.get(URL).json()["results"]] == ["LLM course"]
    answer = member_api.post(URL, course(name="mine"), format="json")
    assert answer.status_code == 403 and answer.json()["code"] == "permission_denied"


def test_times_are_documented_and_answered_as_wall_clock_without_an_offset(
    admin_api, team, infer_pool, l40s
):
    """OpenAPI's ``format: time`` is RFC 3339's full-time, which needs an offset: the schema
    states the pattern the answers follow instead (schemathesis found "09:00:00" is not a
    ``time``)."""
    import re

    schema = admin_api.get("/api/schema/?format=json").json()
    start = schema["components"]["schemas"]["RecurringReservation"]["properties"]["start_time"]
    assert "format" not in start and start["type"] == "string"
    body = admin_api.post(URL, course(), format="json").json()
    assert (body["start_time"], body["end_time"]) == ("09:00:00", "18:00:00")
    assert re.fullmatch(start["pattern"], body["start_time"])
