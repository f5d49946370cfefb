"""Every list's ``team`` filter names a team the user may see: a slug of a team they may not see,
or of no team, is a 400 naming ``team`` in the API (on a page: a 400 with the field error and
no rows, tests/pools/web/test_list_refusals.py), as the request list has answered. The
statements, budgets, estimates, idle findings and advisor findings answered 200 with an empty
list, which says the team has none."""

from __future__ import annotations

import pytest
from django.test import Client
from factories import BudgetFactory, StatementFactory, TeamFactory

pytestmark = pytest.mark.django_db

INVALID = ["Select a valid choice. That choice is not one of the available choices."]

LISTS = [
    "/api/v1/requests/",
    "/api/v1/allocations/",
    "/api/v1/overrides/",
    "/api/v1/estimates/",
    "/api/v1/idle-findings/",
    "/api/v1/advisor/findings/",
    "/api/v1/statements/",
    "/api/v1/budgets/",
]


@pytest.fixture
def vision(db):
    return TeamFactory(slug="vision", name="Vision")


@pytest.mark.parametrize("url", LISTS)
@pytest.mark.parametrize("slug", ["vision", "no-such-team"])
def test_a_team_the_member_may_not_see_is_a_400(url, slug, team_manager, vision, api_as):
    answer = api_as(team_manager).get(url, {"team": slug})
    assert answer.status_code == 400, answer.content
    assert answer.json()["errors"] == {"team": INVALID}


@pytest.mark.parametrize("url", LISTS)
def test_the_members_own_team_is_a_200(url, team, team_manager, vision, api_as):
    assert api_as(team_manager).get(url, {"team": team.slug}).status_code == 200


def test_statements_filtered_by_team_list_that_teams(
    team, team_manager, vision, pool_admin, api_as
):
    ours, theirs = StatementFactory(team=team), StatementFactory(team=vision)

    mine = api_as(team_manager).get("/api/v1/statements/", {"team": "nlp"}).json()["results"]
    admins = api_as(pool_admin).get("/api/v1/statements/", {"team": "vision"}).json()["results"]

    assert [s["id"] for s in mine] == [ours.pk]
    assert [s["id"] for s in admins] == [theirs.pk]


def test_the_budgets_page_refuses_a_team_the_member_may_not_see(team, team_manager, vision):
    BudgetFactory(team=team)
    BudgetFactory(team=vision)
    client = Client()
    client.force_login(team_manager)

    page = client.get("/costs/budgets/", {"team": "vision"})

    assert page.status_code == 400
    assert page.context["filterset"].form.errors == {"team": INVALID}
