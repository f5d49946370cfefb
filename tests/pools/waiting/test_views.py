"""The Waiting work page and its API: visibility (another team's page is a 404, its rows never
listed), filters, CSV, the htmx fragment, the watch each look writes, query counts."""

from __future__ import annotations

import csv
import io

import pytest
from django.test import Client
from factories import PendingWorkFactory, PendingWorkReadFactory

from pools.waiting.models import WaitingWatch

pytestmark = pytest.mark.django_db


def page_as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def rows(team, other_member):
    vision = other_member.teams.get()
    return {
        "cap": PendingWorkFactory(team=team, ref="123", reason_code="AssocGrpGRES"),
        "odd": PendingWorkFactory(
            team=team,
            ref="124",
            kind="other",
            translated=False,
            reason_code="Weird",
            explanation="Weird",
            name="sweep",
        ),  # fmt: skip
        "vision": PendingWorkFactory(team=vision, ref="900", name="vision-secret"),
    }


def test_a_member_sees_their_team_and_the_look_is_recorded(team_member, rows):
    PendingWorkReadFactory(scheduler="slurm", rows=3)
    response = page_as(team_member).get("/teams/nlp/waiting/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "Your team&#x27;s cap of 8 cards is full" in body
    assert "untranslated" in body  # the unknown reason is marked, not dropped
    assert "vision-secret" not in body
    assert WaitingWatch.objects.filter(team__slug="nlp").exists()


def test_another_teams_page_is_a_404_like_the_team(team_member, rows):
    assert page_as(team_member).get("/teams/vision/waiting/").status_code == 404
    assert page_as(team_member).get("/teams/nobody/waiting/").status_code == 404
    assert not WaitingWatch.objects.filter(team__slug="vision").exists()


def test_filters_csv_and_fragment(team_member, rows):
    client = page_as(team_member)
    only_odd = client.get("/teams/nlp/waiting/?translated=false")
    assert "sweep" in only_odd.content.decode() and ">123<" not in only_odd.content.decode()

    exported = client.get("/teams/nlp/waiting/?export=csv")
    table = list(csv.DictReader(io.StringIO(b"".join(exported.streaming_content).decode())))
    assert [(r["ref"], r["kind"], r["translated"]) for r in table] == [
        ("123", "cap_full", "True"), ("124", "other", "False"),
    ]  # fmt: skip

    fragment = client.get("/teams/nlp/waiting/", headers={"HX-Request": "true"})
    assert "<html" not in fragment.content.decode()
    assert "124" in fragment.content.decode()
    assert "HX-Request" in fragment["Vary"]

    bad = client.get("/teams/nlp/waiting/?kind=nonsense")
    assert "Select a valid choice" in bad.content.decode()


def test_the_empty_state_says_nothing_waits(team_member):
    body = page_as(team_member).get("/teams/nlp/waiting/").content.decode()
    assert "Nothing of NLP is waiting" in body
    assert "Not read yet" in body


def test_the_page_keeps_its_query_count_with_more_rows(
    team_member, team, django_assert_max_num_queries
):
    """The same number of queries for 40 rows as for 4 (no query per row)."""
    client = page_as(team_member)
    PendingWorkFactory.create_batch(4, team=team)
    client.get("/teams/nlp/waiting/")  # the watch row exists from here on
    with django_assert_max_num_queries(40) as few:
        client.get("/teams/nlp/waiting/")
    PendingWorkFactory.create_batch(36, team=team)
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert client.get("/teams/nlp/waiting/").status_code == 200


def test_api_lists_only_visible_rows_and_refuses_an_invisible_team(api_as, team_member, rows):
    client = api_as(team_member)
    listed = client.get("/api/v1/pending-work/").json()
    assert [r["ref"] for r in listed["results"]] == ["123", "124"]
    assert listed["results"][0]["team"] == "nlp"
    assert listed["results"][1]["translated"] is False

    refused = client.get("/api/v1/pending-work/?team=vision")
    assert refused.status_code == 400
    assert list(refused.json()["errors"]) == ["team"]

    client.get("/api/v1/pending-work/?team=nlp")
    assert WaitingWatch.objects.filter(team__slug="nlp").exists()


def test_a_pool_admin_sees_every_team(api_as, pool_admin, rows):
    listed = api_as(pool_admin).get("/api/v1/pending-work/?scheduler=slurm").json()
    assert sorted(r["ref"] for r in listed["results"]) == ["123", "124", "900"]
