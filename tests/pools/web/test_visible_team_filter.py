"""Every list's ``team`` filter names a team the user may see: a slug of a team they may not see,
or of no team, is a 400 naming ``team`` in the API (on a page: a 400 with the field error and
no rows, tests/pools/web/test_list_refusals.py), as the request list has answered. The
statements, budgets, estimates, idle findings and advisor findings answered 200 with an empty
list, which says the team has none.

The refusal is worded once for every list, page and API alike: "No team you can see has this
slug." It had three wordings: django-filter's "Select a valid choice. That choice is not one of
the available choices." on most lists, "No team with this slug." on the token-flow tasks, and
DRF's "Object with slug=… does not exist." on a request's body."""

from __future__ import annotations

import pytest
from django.test import Client
from factories import BudgetFactory, StatementFactory, TeamFactory

from pools.capacity.models import CapacityRequest

pytestmark = pytest.mark.django_db

INVALID = ["No team you can see has this slug."]

# The API's field-error body (portal.api.exception_handler), written out by hand.
REFUSED = {"code": "invalid_input", "detail": "Invalid input.", "errors": {"team": INVALID}}

LISTS = [
    "/api/v1/requests/",
    "/api/v1/allocations/",
    "/api/v1/overrides/",
    "/api/v1/estimates/",
    "/api/v1/idle-findings/",
    "/api/v1/advisor/findings/",
    "/api/v1/statements/",
    "/api/v1/budgets/",
    "/api/v1/serving/",
    "/api/v1/pending-work/",
    "/api/v1/token-flow/tasks/",
]


@pytest.fixture
def vision(db):
    return TeamFactory(slug="vision", name="Vision")


@pytest.mark.parametrize("url", LISTS)
@pytest.mark.parametrize("slug", ["vision", "no-such-team"])
def test_a_team_the_member_may_not_see_is_a_400(url, slug, team_manager, vision, api_as):
    answer = api_as(team_manager).get(url, {"team": slug})
    assert answer.status_code == 400, answer.content
    assert answer.json() == REFUSED


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


@pytest.mark.parametrize("slug", ["vision", "no-such-team"])
def test_a_body_naming_a_team_the_member_may_not_see_reads_as_the_filter(
    slug, team_manager, vision, api_as
):
    """A request's body names its team by slug too: the same words as the filters, for
    another team's slug as for one no team has; nothing is written."""

    answer = api_as(team_manager).post("/api/v1/requests/", {"team": slug}, format="json")

    assert answer.status_code == 400
    assert answer.json()["errors"]["team"] == INVALID
    assert not CapacityRequest.objects.exists()
