"""A ``?week=`` or ``?month=`` the calendars cannot read is a 400 naming the parameter, the
value and the format, not the current week or month shown as if asked for; empty is the
current one, as no parameter is."""

from __future__ import annotations

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

BAD = [
    ("week", "junk"),
    ("week", "2027-W53"),  # 2027 has 52 ISO weeks
    ("week", "9999-W01"),  # past the calendars' last year, 9998
    ("month", "2027-13"),
    ("month", "03-2027"),
    ("month", "0001-01"),
]


@pytest.fixture
def urls(infer_pool, l40s):
    return [
        reverse("pools:pool-calendar", args=[infer_pool.slug, l40s.slug]),
        reverse("pools:driver-group-calendar", args=[550]),
    ]


@pytest.fixture
def signed_in(client, team_member):
    client.force_login(team_member)
    return client


@pytest.mark.parametrize(("name", "value"), BAD)
def test_a_bad_week_or_month_is_a_400_naming_it(signed_in, urls, name, value):
    fmt = "an ISO week YYYY-Www (2027-W03)" if name == "week" else "a month YYYY-MM (2027-03)"
    for url in urls:
        response = signed_in.get(url, {name: value})
        html = response.content.decode()
        assert response.status_code == 400, (url, name, value)
        assert f'data-bad-parameter="{name}"' in html
        assert f"<code>?{name}={value}</code> is not {fmt}, years 1970-9998" in html


def test_empty_is_the_current_one(signed_in, urls):
    for url in urls:
        for name in ("week", "month"):
            assert signed_in.get(url, {name: ""}).status_code == 200
        assert signed_in.get(url, {"week": "2027-W03"}).status_code == 200
        assert signed_in.get(url, {"month": "2027-03"}).status_code == 200


def test_a_hostile_value_is_shown_escaped(signed_in, urls):
    html = signed_in.get(urls[0], {"month": "<script>x</script>"}).content.decode()
    assert "<script>x</script>" not in html and "&lt;script&gt;x&lt;/script&gt;" in html
