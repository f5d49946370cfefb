"""Where a person lands: after signing in, by role; on a pool-admin page, the portal's 403."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def _sign_in(username: str) -> tuple[Client, object]:
    client = Client()
    response = client.post("/login/", {"username": username, "password": "pw"})
    assert response.status_code == 302, response.content
    return client, response


def test_a_member_lands_on_my_teams(member):
    client, response = _sign_in("member")

    assert client.get(response["Location"]).url == "/teams/mine/"


def test_a_pool_admin_lands_on_fleet(pool_admin):
    client, response = _sign_in("root-admin")

    assert client.get(response["Location"]).url == "/"


def test_a_next_link_still_wins_over_the_landing_page(member):
    response = Client().post("/login/?next=/requests/", {"username": "member", "password": "pw"})

    assert response["Location"] == "/requests/"


@pytest.mark.parametrize("url", ["/costs/finance/2026-10/", "/dashboard/", "/idle/policies/"])
def test_a_member_on_a_pool_admin_page_gets_the_portals_403(member_page, url):
    """Not the Django admin's sign-in form (the member is signed in already): the portal's page
    with its navigation and a way back."""
    response = member_page.get(url)

    assert response.status_code == 403
    page = response.content.decode()
    assert "This page is for pool admins." in page
    assert 'href="/teams/mine/"' in page
    assert "/admin/login/" not in page


def test_the_finance_month_still_opens_for_a_pool_admin(admin_page):
    assert admin_page.get("/costs/finance/2026-10/").status_code == 200
