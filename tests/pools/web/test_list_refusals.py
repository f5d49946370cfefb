"""The HTML lists answer what they cannot use as the API does (issue #29's leftovers).

A filter they cannot use (a team the user may not see) is a 400 on the page (the error shown,
no rows) and on its CSV (``text/plain``, the same words): the CSV answered a header-only 200,
which says the team has no rows. ``page`` / ``page_size`` they cannot read are a 400 page naming
the parameter and what it may be, a page past the last a 404: Django's ``get_page`` showed the
last page for ``page=-1`` and ``page=abc``, and a ``page_size`` off the menu was 50 rows."""

from __future__ import annotations

import pytest
from django.utils.html import escape

pytestmark = pytest.mark.django_db

# Django's ModelChoiceField message (django/forms/models.py, ``invalid_choice``).
INVALID = "No team you can see has this slug."
REFUSAL = f'Team "vision": {INVALID}'

TEAM_LISTS = [
    "/costs/budgets/",
    "/requests/",
    "/allocations/",
    "/overrides/",
    "/sizing/estimates/",
    "/idle/",
    "/advisor/",
]


@pytest.fixture
def member_client(client, team_manager, other_member):
    """``mia``, manager of nlp; ``vision`` exists (``victor``'s team) but is not hers."""
    client.force_login(team_manager)
    return client


@pytest.mark.parametrize("url", TEAM_LISTS)
def test_the_csv_of_a_team_one_may_not_see_is_a_400_saying_why(url, member_client):
    answer = member_client.get(url, {"team": "vision", "export": "csv"})

    assert answer.status_code == 400
    assert answer["Content-Type"] == "text/plain; charset=utf-8"
    assert answer.content.decode() == f"The filters are invalid: {REFUSAL}\n"


@pytest.mark.parametrize("url", TEAM_LISTS)
def test_the_page_of_a_team_one_may_not_see_is_a_400_saying_why(url, member_client):
    answer = member_client.get(url, {"team": "vision"})

    assert answer.status_code == 400
    assert answer.context["filterset"].form.errors == {"team": [INVALID]}
    assert f"nothing is listed. {REFUSAL}".replace('"', "&quot;") in answer.content.decode()
    assert answer.context["page"].paginator.count == 0


@pytest.mark.parametrize("url", TEAM_LISTS)
@pytest.mark.parametrize("page", ["2", "abc"])
def test_a_refused_team_with_a_page_number_is_the_refusal_not_a_404(url, page, member_client):
    """A shared link to page 2 of another team's list answered 404 ("nothing here"): the
    refused filter leaves no rows, so one empty page, and the 400 says why."""
    answer = member_client.get(url, {"team": "vision", "page": page})

    assert answer.status_code == 400
    assert f"nothing is listed. {REFUSAL}".replace('"', "&quot;") in answer.content.decode()
    assert answer.context["page"].number == 1


@pytest.mark.parametrize("url", TEAM_LISTS)
def test_the_members_own_team_is_a_200_page_and_csv(url, member_client):
    assert member_client.get(url, {"team": "nlp"}).status_code == 200
    csv = member_client.get(url, {"team": "nlp", "export": "csv"})
    assert csv.status_code == 200 and csv["Content-Type"].startswith("text/csv")


def test_an_htmx_table_of_a_refused_filter_says_why(member_client):
    """The fragment a typed team asks for carries the refusal (the form is outside it)."""
    answer = member_client.get("/requests/", {"team": "vision"}, HTTP_HX_REQUEST="true")

    assert answer.status_code == 400
    assert "<html" not in answer.content.decode()
    assert 'role="alert"' in answer.content.decode()


@pytest.mark.parametrize("table", ["plan", "teams-cards", "heatmap"])
def test_a_dashboard_csv_of_a_team_of_no_slug_says_why(table, admin_page, team):
    """The admin dashboard shows the whole fleet under a filter it cannot read (its form says
    so); its CSV answered the fleet's rows as if they were the team's."""
    answer = admin_page.get("/dashboard/", {"team": "no-such", "export": table})

    assert answer.status_code == 400
    assert answer["Content-Type"] == "text/plain; charset=utf-8"
    assert answer.content.decode() == f'The filters are invalid: Team "no-such": {INVALID}\n'


# (url, the page parameter it reads). Every HTML list of the portal with pages.
PAGED = [
    ("/requests/", "page"),  # pools.web.pages.filtered_list: every filtered list
    ("/nodes/", "page"),
    ("/costs/budgets/", "page"),
    ("/idle/", "page"),
    ("/advisor/", "page"),
    ("/teams/mine/", "page"),
    ("/teams/mine/", "teams_page"),
    ("/requests/queue/", "page"),
    ("/scheduler/drift/", "page"),
    ("/costs/finance/2026-03/", "page"),
    ("/costs/finance/2026-03/", "lines_page"),
    ("/costs/token-flow/nlp/", "page"),
]


@pytest.mark.parametrize("url,param", PAGED)
@pytest.mark.parametrize("value", ["-1", "0", "000", "abc", "1.5", "２", " 1"])
def test_a_page_number_that_is_none_is_a_400_naming_it(url, param, value, admin_page, team):
    answer = admin_page.get(url, {param: value, "state": ""})

    assert answer.status_code == 400
    body = answer.content.decode()
    assert f'data-bad-parameter="{param}"' in body
    assert f"<code>?{param}={escape(value)}</code> is not a whole number from 1." in body
    assert f'<a href="{url}?state=">The same page without <code>{param}</code></a>' in body


@pytest.mark.parametrize("url,param", PAGED)
def test_a_page_past_the_last_is_a_404_the_first_a_200(url, param, admin_page, team):
    """No rows: one page (Django's ``allow_empty_first_page``), so page 2 is past it."""
    assert admin_page.get(url, {param: "1"}).status_code == 200
    assert admin_page.get(url, {param: ""}).status_code == 200
    assert admin_page.get(url, {param: "2"}).status_code == 404
    assert admin_page.get(url, {param: "9" * 5000}).status_code == 404  # int() refuses it


SIZED = ["/requests/", "/nodes/", "/advisor/", "/costs/token-flow/nlp/"]


@pytest.mark.parametrize("url", SIZED)
@pytest.mark.parametrize("value", ["7", "1000", "abc", "-25", "025", "9" * 5000])
def test_a_page_size_off_the_menu_is_a_400_naming_the_sizes(url, value, admin_page, team):
    answer = admin_page.get(url, {"page_size": value})

    assert answer.status_code == 400
    shown = value if len(value) <= 40 else value[:39] + "…"  # the page cuts a long value
    assert (
        f"<code>?page_size={escape(shown)}</code> is not one of 25, 50, 100, 200."
        in answer.content.decode()
    )


@pytest.mark.parametrize("url", SIZED)
def test_a_page_size_of_the_menu_pages_by_it(url, admin_page, team):
    assert admin_page.get(url, {"page_size": "25"}).status_code == 200
