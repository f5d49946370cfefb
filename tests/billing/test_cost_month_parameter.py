"""A cost page's month that is no month (``2026-13``, ``junk``) is a 400 page naming the
parameter, as the calendars' bad ``?month=`` and ``?week=`` are; it used to be a 404 saying the
team might not be the reader's. Another team's page stays a 404 whatever the month."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 12, 6, 17, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def fixed_now(monkeypatch, settings):
    settings.BILLING_TIME_ZONE = "UTC"
    monkeypatch.setattr("django.utils.timezone.now", lambda: NOW)


@pytest.mark.parametrize("month", ["2026-13", "2026-00", "junk", "2026-11-05"])
def test_a_team_month_that_is_no_month_is_a_400_naming_it(team, team_member, client, month):
    client.force_login(team_member)

    page = client.get(f"/costs/nlp/{month}/")

    assert page.status_code == 400
    html = page.content.decode()
    assert 'data-bad-parameter="month"' in html
    assert f"<code>{month}</code>" in html and "YYYY-MM" in html
    assert 'href="/costs/nlp/2026-12/"' in html  # the month in progress instead


def test_a_finance_month_that_is_no_month_is_a_400(pool_admin, client):
    client.force_login(pool_admin)

    page = client.get("/costs/finance/2026-13/")

    assert page.status_code == 400
    assert 'href="/costs/finance/2026-12/"' in page.content.decode()


def test_the_query_month_that_is_no_month_is_a_400(team, team_member, client):
    client.force_login(team_member)

    page = client.get("/costs/?month=2026-13")

    assert page.status_code == 400
    assert "<code>?month=2026-13</code>" in page.content.decode()


def test_another_teams_page_is_a_404_before_its_month_is_read(team, other_member, client):
    client.force_login(other_member)
    assert client.get("/costs/nlp/2026-13/").status_code == 404
