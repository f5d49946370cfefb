"""The team filter of the request and allocation lists: a typed slug
(:class:`pools.web.team_picker.TeamPicker`), resolved by one query, so a pool admin's page
lists no team and builds no Team but the chosen one (10,080 teams at 100k GPUs)."""

from __future__ import annotations

import pytest
from django.db.models.signals import post_init
from django.test import Client
from factories import TeamFactory

from pools.tenancy.models import Team

pytestmark = pytest.mark.django_db


@pytest.fixture
def teams_built():
    built = []

    def count(sender, instance, **kwargs):
        built.append(instance)

    post_init.connect(count, sender=Team)
    yield built
    post_init.disconnect(count, sender=Team)


@pytest.mark.parametrize("url", ["/requests/", "/allocations/"])
def test_the_team_picker_lists_no_team_and_builds_only_the_chosen_one(pool_admin, url, teams_built):
    TeamFactory(slug="vision", name="Vision & Co")
    TeamFactory(slug="audio", name="Audio")
    client = Client()
    client.force_login(pool_admin)
    teams_built.clear()

    page = client.get(url, {"team": "vision"})

    assert page.status_code == 200
    assert [t.slug for t in teams_built] == ["vision"]
    html = page.content.decode()
    assert '<option value="audio"' not in html and "Audio" not in html
    assert 'name="team" value="vision"' in html
    assert page.context["filterset"].form.cleaned_data["team"].slug == "vision"


def test_an_unknown_team_is_a_field_error_on_the_page(pool_admin):
    client = Client()
    client.force_login(pool_admin)

    page = client.get("/allocations/", {"team": "no-such-team"})

    assert page.context["filterset"].form.errors == {"team": ["No team you can see has this slug."]}


def test_a_member_cannot_filter_by_a_team_they_may_not_see(team_member):
    TeamFactory(slug="vision")
    client = Client()
    client.force_login(team_member)

    page = client.get("/allocations/", {"team": "vision"})

    assert page.context["filterset"].form.errors == {"team": ["No team you can see has this slug."]}


@pytest.mark.parametrize("url", ["/requests/", "/allocations/"])
def test_a_sort_key_the_list_does_not_have_is_a_400_naming_ordering(pool_admin, url):
    """As the API (``/api/v1/allocations/?ordering=zzz`` is a 400 naming ``ordering``): the page
    says why and lists nothing, its CSV is a plain-text 400, never the default order as if
    the sort had been applied."""
    client = Client()
    client.force_login(pool_admin)

    page = client.get(url, {"ordering": "zzz"})
    export = client.get(url, {"ordering": "zzz", "export": "csv"})
    api = client.get(f"/api/v1{url}", {"ordering": "zzz"})

    assert page.status_code == 400
    assert list(page.context["filterset"].form.errors) == ["ordering"]
    assert "Ordering &quot;zzz&quot;: Select a valid choice." in page.content.decode()
    assert (export.status_code, export["Content-Type"]) == (400, "text/plain; charset=utf-8")
    assert 'Ordering "zzz"' in export.content.decode()
    keys = {  # the FilterSets' OrderingFilter fields, each ascending then descending
        "/requests/": "created, -created, starts, -starts, cards, -cards",
        "/allocations/": "starts, -starts, ends, -ends, cards, -cards",
    }[url]
    assert f"Sort by one of: {keys}." in export.content.decode()
    assert (api.status_code, list(api.json()["errors"])) == (400, ["ordering"])
    assert client.get(url, {"ordering": "-cards"}).status_code == 200
