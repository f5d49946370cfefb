"""``/api/v1/serving/``: newest values and series from the stored rollups, scoped to the
caller's teams, a bad span refused with the field named, constant queries for a page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from factories import AllocationFactory, MembershipFactory, TeamFactory

from pools.common.choices import AllocationStatus
from pools.serving.models import ServingRollup
from pools.serving.services import bucket_floor, serving_coverage_note

# at mid-month noon: the newest bucket, the day's and "this month so far" never straddle an edge
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("mid_month")]


def rolled_up(team, *, waiting=3.0, buckets=3):
    now = timezone.now()
    allocation = AllocationFactory(
        team=team,
        status=AllocationStatus.ACTIVE,
        card_count=2,
        starts_at=now - timedelta(days=1),
        ends_at=now + timedelta(days=1),
    )
    newest = bucket_floor(now) - timedelta(minutes=5)
    rows = []
    for i in range(buckets):
        rows.append(
            ServingRollup.objects.create(
                allocation=allocation,
                bucket_start=newest - timedelta(minutes=5 * i),
                cards_held=2,
                engine="vllm",
                requests_waiting=waiting + i,
                generation_tokens=3000,
                missing=["ttft: vllm:time_to_first_token_seconds_bucket"],
            )
        )
    serving_coverage_note(rows)  # what a pass does beside its rows
    return allocation


def test_a_member_reads_the_newest_values_of_their_teams_allocations_only(
    api_as, team, team_member
):
    mine = rolled_up(team)
    theirs = rolled_up(TeamFactory(slug="cv"))

    body = api_as(team_member).get("/api/v1/serving/").json()

    assert [row["allocation"] for row in body["results"]] == [mine.pk]
    row = body["results"][0]
    assert row["engine"] == "vllm" and row["stale"] is False
    assert row["values"]["requests_waiting"] == 3.0  # the newest bucket's
    assert row["values"]["ttft_p50_s"] is None  # unknown, named in missing
    assert row["missing"] == ["ttft: vllm:time_to_first_token_seconds_bucket"]
    assert api_as(team_member).get(f"/api/v1/serving/{theirs.pk}/").status_code == 404


def test_the_list_writes_each_row_as_its_serializer_declares(api_as, team, team_member):
    """The list writes its rows directly (speed); DRF's walk over the declared fields gives
    the same body, so the OpenAPI schema describes what is sent."""
    from rest_framework import serializers

    from pools.serving.api import ServingCurrentSerializer, ServingViewSet

    rolled_up(team)
    view = ServingViewSet()
    view.request = type("R", (), {"user": team_member})()
    view.action = "list"
    rows = view._current(list(view.get_queryset()))
    declared = serializers.Serializer.to_representation(ServingCurrentSerializer(), rows[0])

    body = api_as(team_member).get("/api/v1/serving/").json()

    # age_s is counted from each read's own clock: the GET may come seconds later under load
    sent, expected = dict(body["results"][0]), dict(declared)
    assert 0 <= sent.pop("age_s") - expected.pop("age_s") <= 30
    assert sent == expected
    assert body["count"] == 1


def test_series_over_24_hours_oldest_first(api_as, team, team_member):
    allocation = rolled_up(team)
    body = api_as(team_member).get(f"/api/v1/serving/{allocation.pk}/series/?span=24h").json()
    assert body["step_s"] == 300
    assert [p["requests_waiting"] for p in body["points"]] == [5.0, 4.0, 3.0]
    assert [p["seconds"] for p in body["points"]] == [300, 300, 300]


def test_seven_days_fold_five_minute_rows_into_hours(api_as, team, team_member):
    """Three 5-minute rows of one hour: waiting 3, 4, 5 -> mean 4; generation 3 x 3,000 =
    9,000 tokens (unless the three straddle an hour, then two points)."""
    allocation = rolled_up(team)
    points = (
        api_as(team_member).get(f"/api/v1/serving/{allocation.pk}/series/?span=7d").json()["points"]
    )
    assert sum(p["generation_tokens"] for p in points) == 9000
    assert sum(p["seconds"] for p in points) == 900  # counts cover 15 min, not whole hours
    if len(points) == 1:
        assert points[0]["requests_waiting"] == pytest.approx(4.0)


def test_an_unknown_span_is_a_400_naming_it(api_as, team, team_member):
    allocation = rolled_up(team)
    response = api_as(team_member).get(f"/api/v1/serving/{allocation.pk}/series/?span=1y")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    assert "span" in response.json()["errors"]


def test_the_list_asks_the_same_queries_for_2_or_12_allocations(
    api_as, pool_admin, django_assert_num_queries
):
    team = TeamFactory(slug="big")
    MembershipFactory(team=team, user=pool_admin)
    for _ in range(2):
        rolled_up(team, buckets=1)
    client = api_as(pool_admin)
    with django_assert_num_queries(5) as few:
        assert client.get("/api/v1/serving/").status_code == 200
    for _ in range(10):
        rolled_up(team, buckets=1)
    with django_assert_num_queries(len(few.captured_queries)):
        assert len(client.get("/api/v1/serving/").json()["results"]) == 12


def test_efficiency_per_day_and_for_the_month(api_as, team, team_member):
    """Two UTC days of November, 2 cards: 10 Nov one hour (12 rows), 11 Nov 30 min (6 rows),
    each row 30,000 output and 60,000 input tokens, 1 of 2 cards busy.
    10 Nov: held 2 x 3,600 s = 2.0 card-h; output 360,000 -> 180,000 per card-h; busy 1.0 of
    2.0 -> 0.5. 11 Nov: held 1.0 card-h, output 180,000 -> 180,000 per card-h.
    Month: 3.0 card-h, 540,000 output (180,000 per card-h), input 1,080,000 (360,000)."""
    allocation = rolled_up(team, buckets=0)
    day = datetime(2026, 11, 10, 23, 0, tzinfo=UTC)
    rows = [
        ServingRollup.objects.create(
            allocation=allocation, bucket_start=day + timedelta(minutes=5 * i), cards_held=2,
            generation_tokens=30_000, prompt_tokens=60_000, cards_reporting=2, cards_busy=1,
        )
        for i in range(18)
    ]  # fmt: skip
    serving_coverage_note(rows)

    body = (
        api_as(team_member).get(f"/api/v1/serving/{allocation.pk}/efficiency/?month=2026-11").json()
    )

    assert [d["day"] for d in body["days"]] == ["2026-11-10", "2026-11-11"]
    first, second = body["days"]
    assert (first["held_card_hours"], first["output_tokens"]) == ("2.000", 360_000)
    assert first["output_tokens_per_card_hour"] == "180000.0"
    assert first["busy_share"] == "0.500"
    assert (second["held_card_hours"], second["output_tokens"]) == ("1.000", 180_000)
    total = body["total"]
    assert (total["held_card_hours"], total["output_tokens"]) == ("3.000", 540_000)
    assert total["input_tokens_per_card_hour"] == "360000.0"


def test_efficiency_month_is_rounded_once_not_the_sum_of_rounded_days(api_as, team, team_member):
    """Three UTC days of November, one 5-minute bucket each: 2 cards held, 1 busy, 1,000
    output tokens. A day: held 2 x 300 s = 600 card-s = 0.1666.. -> "0.167" card-h, busy
    300 card-s = 0.0833.. -> "0.083". The month: held 3 x 600 = 1,800 card-s = "0.500" card-h
    (the three rounded days add up to 0.501), busy 900 card-s = "0.250" (not 0.249), busy share
    0.25 / 0.5 = "0.500", output 3,000 / 0.5 = "6000.0" per card-h (3,000 / 0.501 would be
    5988.0) - the figures the Serving panel and the dashboards' CSVs give for the month."""
    allocation = rolled_up(team, buckets=0)
    rows = [
        ServingRollup.objects.create(
            allocation=allocation, bucket_start=datetime(2026, 11, day, 12, 0, tzinfo=UTC),
            bucket_seconds=300, cards_held=2, cards_reporting=2, cards_busy=1,
            generation_tokens=1_000, prompt_tokens=2_000,
        )
        for day in (10, 11, 12)
    ]  # fmt: skip
    serving_coverage_note(rows)

    body = (
        api_as(team_member).get(f"/api/v1/serving/{allocation.pk}/efficiency/?month=2026-11").json()
    )

    assert [(d["held_card_hours"], d["busy_card_hours"]) for d in body["days"]] == [
        ("0.167", "0.083")
    ] * 3
    total = body["total"]
    assert (total["held_card_hours"], total["busy_card_hours"]) == ("0.500", "0.250")
    assert total["busy_share"] == "0.500"
    assert total["output_tokens_per_card_hour"] == "6000.0"
    assert total["input_tokens_per_card_hour"] == "12000.0"


def test_efficiency_needs_a_month_in_yyyy_mm(api_as, team, team_member):
    allocation = rolled_up(team)
    response = api_as(team_member).get(f"/api/v1/serving/{allocation.pk}/efficiency/?month=11")
    assert response.status_code == 400 and "month" in response.json()["errors"]


@pytest.mark.parametrize("month", ["0000-01", "9999-12", "1999-12", "2101-01", "٢٠٢٦-11"])
def test_efficiency_refuses_a_month_outside_the_portals_dates_with_a_400(
    api_as, team, team_member, month
):
    """Year 0 is no date and December 9999 has no next month (both were a 500); 1999-12 and
    2101-01 lie outside the portal's dates (2000-01-01 to 2100-12-31); Arabic-Indic digits
    matched ``\\d`` and were echoed back as the month."""
    allocation = rolled_up(team)
    client = api_as(team_member)
    client.raise_request_exception = False

    response = client.get(f"/api/v1/serving/{allocation.pk}/efficiency/", {"month": month})

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_input" and list(body["errors"]) == ["month"]


def test_efficiency_reads_the_portals_first_and_last_months(api_as, team, team_member):
    allocation = rolled_up(team)
    client = api_as(team_member)
    for month in ("2000-01", "2100-12"):
        response = client.get(f"/api/v1/serving/{allocation.pk}/efficiency/", {"month": month})
        assert response.status_code == 200
        assert response.json() == {
            "allocation": allocation.pk,
            "month": month,
            "total": None,
            "days": [],
        }


def test_the_list_filters_by_team_and_refuses_a_team_it_may_not_see(api_as, admin_api, team):
    """nlp and cv each have one rolled-up allocation: ``?team=cv`` answers cv's alone, for an
    admin; a member of nlp only asking for cv (or a team that does not exist) gets a 400 naming
    ``team``, never every row."""
    mine = rolled_up(team)
    theirs = rolled_up(TeamFactory(slug="cv"))
    member = MembershipFactory(team=team).user

    only_cv = admin_api.get("/api/v1/serving/", {"team": "cv"}).json()
    only_nlp = api_as(member).get("/api/v1/serving/", {"team": "nlp"}).json()

    assert [row["allocation"] for row in only_cv["results"]] == [theirs.pk]
    assert [row["allocation"] for row in only_nlp["results"]] == [mine.pk]
    for slug in ("cv", "nope"):
        refused = api_as(member).get("/api/v1/serving/", {"team": slug})
        assert refused.status_code == 400
        assert refused.json()["code"] == "invalid_input"
        assert list(refused.json()["errors"]) == ["team"]
