"""The typed team pickers (issue #29 item 7): suggestions by slug or name prefix among the teams
the user may see, at most 20; the dashboard, advisor and exemption forms take the slug, say
"No team you can see has this slug." for a slug of no team, and list no team in their HTML."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django import forms
from django.db.models.signals import post_init
from django.utils import timezone
from django.utils.html import escape
from factories import AdvisorFindingFactory, MembershipFactory, TeamFactory

from pools.reclamation.models import Exemption
from pools.tenancy.models import Team
from pools.web.pages import filter_refusal

pytestmark = pytest.mark.django_db

INVALID = "No team you can see has this slug."


def _options(response) -> list[str]:
    """The ``value``s of the ``<option>``s of a suggestions answer, in order."""
    html = response.content.decode()
    return [part.split('"', 1)[0] for part in html.split('<option value="')[1:]]


def test_suggestions_match_slug_or_name_prefix_by_name(admin_page):
    TeamFactory(slug="nlp", name="Language")  # slug matches "n", name does not
    TeamFactory(slug="vision", name="Night vision")  # name matches "n", slug does not
    TeamFactory(slug="audio", name="Audio")  # neither
    TeamFactory(slug="x-nlp", name="X")  # "nlp" inside the slug, not at its start

    response = admin_page.get("/teams/suggest/", {"q": "N"})

    assert response.status_code == 200
    # by name: "Language" < "Night vision"
    assert _options(response) == ["nlp", "vision"]
    assert '<option value="vision">Night vision</option>' in response.content.decode()


def test_the_picker_sends_its_text_under_its_own_name(admin_page):
    TeamFactory(slug="nlp", name="NLP")
    TeamFactory(slug="audio", name="Audio")

    response = admin_page.get("/teams/suggest/", {"field": "team", "team": "au"})

    assert _options(response) == ["audio"]


def test_at_most_twenty_suggestions_and_names_escaped(admin_page):
    for i in range(25):
        TeamFactory(slug=f"t{i:02d}", name=f"T{i:02d} <&>")

    response = admin_page.get("/teams/suggest/", {"q": "t"})

    assert _options(response) == [f"t{i:02d}" for i in range(20)]
    assert '<option value="t00">T00 &lt;&amp;&gt;</option>' in response.content.decode()


def test_a_member_is_offered_only_their_own_teams(client, member):
    MembershipFactory(user=member, team=TeamFactory(slug="nlp-a", name="NLP A"))
    TeamFactory(slug="nlp-b", name="NLP B")  # another team with the same prefix
    client.force_login(member)

    assert _options(client.get("/teams/suggest/", {"q": "nlp"})) == ["nlp-a"]
    assert _options(client.get("/teams/suggest/", {"q": ""})) == ["nlp-a"]


def test_anonymous_gets_the_sign_in_page(client):
    TeamFactory(slug="nlp")

    response = client.get("/teams/suggest/", {"q": "n"})

    assert response.status_code == 302 and response["Location"].startswith("/login/")


@pytest.fixture
def teams_built():
    built = []

    def count(sender, instance, **kwargs):
        built.append(instance.slug)

    post_init.connect(count, sender=Team)
    yield built
    post_init.disconnect(count, sender=Team)


def test_the_dashboard_lists_no_team_and_resolves_the_typed_slug(admin_page, teams_built):
    TeamFactory(slug="nlp", name="NLP")
    TeamFactory(slug="audio", name="Audio")
    teams_built.clear()

    page = admin_page.get("/dashboard/", {"team": "nlp"})

    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="team" value="nlp"' in html and 'list="id_team-suggestions"' in html
    assert '<option value="audio"' not in html  # the other team is nowhere on the page
    assert teams_built == ["nlp"]
    assert page.context["filters"].team == "nlp"


def test_the_dashboard_refuses_an_unknown_team_as_the_timeline_does(admin_page):
    """The page, its htmx body and its parts answer 400 with the refusal and no figures, as
    ``/timeline/?team=`` does; the CSVs the plain-text refusal."""
    TeamFactory(slug="nlp")
    refusal = f'Team "no-such-team": {INVALID}'

    page = admin_page.get("/dashboard/", {"team": "no-such-team"})
    body = admin_page.get("/dashboard/", {"team": "no-such-team"}, HTTP_HX_REQUEST="true")
    heatmap = admin_page.get("/dashboard/", {"team": "no-such-team", "part": "heatmap"})
    plan = admin_page.get("/dashboard/", {"team": "no-such-team", "export": "plan"})
    timeline = admin_page.get("/timeline/", {"team": "no-such-team"})

    assert [page.status_code, body.status_code, heatmap.status_code] == [400, 400, 400]
    assert page.context["form"].errors == {"team": [INVALID]}
    assert page.context["refusal"] == timeline.context["refusal"] == refusal
    html = page.content.decode()
    assert escape(refusal) in html and 'name="team" value="no-such-team"' in html
    assert "cards in pools" not in html and 'id="heatmap"' not in html  # no figures
    assert "<html" not in body.content.decode() and escape(refusal) in body.content.decode()
    assert plan.status_code == 400 and plan["Content-Type"].startswith("text/plain")
    assert plan.content.decode() == f"The filters are invalid: {refusal}\n"


def test_the_dashboard_refuses_a_pool_of_no_slug(admin_page):
    page = admin_page.get("/dashboard/", {"pool": "nowhere"})

    assert page.status_code == 400
    assert list(page.context["form"].errors) == ["pool"]


def test_the_advisor_filters_by_the_typed_slug(admin_page):
    nlp, vision = TeamFactory(slug="nlp"), TeamFactory(slug="vision")
    mine = AdvisorFindingFactory(allocation__team=nlp, team=nlp)
    AdvisorFindingFactory(allocation__team=vision, team=vision)

    page = admin_page.get("/advisor/", {"team": "nlp"})
    bad = admin_page.get("/advisor/", {"team": "no-such-team"})

    assert [f.pk for f in page.context["page"]] == [mine.pk]
    assert '<option value="vision"' not in page.content.decode()
    assert bad.context["filterset"].form.errors == {"team": [INVALID]}


def test_an_exemption_names_its_team_by_slug(admin_page):
    TeamFactory(slug="nlp", name="NLP")
    expires = (timezone.localtime() + timedelta(days=3)).strftime("%Y-%m-%dT%H:%M")

    form = admin_page.get("/idle/policies/").content.decode()
    unknown = admin_page.post(
        "/idle/policies/",
        {"kind": "exemption", "team": "no-such-team", "reason": "x", "expires_at": expires},
    )
    granted = admin_page.post(
        "/idle/policies/",
        {"kind": "exemption", "team": "nlp", "reason": "x", "expires_at": expires},
    )

    assert '<option value="nlp"' not in form and 'placeholder="team slug"' in form
    assert unknown.context["exemption_form"].errors["team"] == [INVALID]
    assert granted.status_code == 302
    assert [e.team.slug for e in Exemption.objects.all()] == ["nlp"]


def test_picker_without_javascript_is_a_text_field(admin_page):
    """A plain GET form: the text typed is the slug submitted (the noscript Filter button)."""
    TeamFactory(slug="nlp")
    html = admin_page.get("/dashboard/").content.decode()
    assert '<input type="text" name="team"' in html
    assert '<noscript><button type="submit">Filter</button></noscript>' in html


def _utilisation_tag(html: str) -> str:
    """The opening tag of the dashboard's utilisation box (``<div id="utilisation" …>``)."""
    return '<div id="utilisation"' + html.split('<div id="utilisation"', 1)[1].split(">", 1)[0]


def test_the_dashboard_body_after_a_refusal_brings_the_self_loading_utilisation_box(admin_page):
    """A refused body has no utilisation box to keep (hx-preserve), so the next good body brings
    the box a fresh page loads itself from (same element, same request), never an empty
    placeholder that nothing fills; it loads the heading and range picker. The body draws no
    range radio of its own: a checked one would uncheck the kept box's (one radio group)."""
    TeamFactory(slug="nlp")

    refused = admin_page.get("/dashboard/", {"team": "nope"}, HTTP_HX_REQUEST="true")
    fixed = admin_page.get("/dashboard/", {"team": ""}, HTTP_HX_REQUEST="true")
    fresh = admin_page.get("/dashboard/", {"team": ""})
    part = admin_page.get("/dashboard/", {"team": "", "part": "utilisation"})

    assert refused.status_code == 400 and 'id="utilisation"' not in refused.content.decode()
    body = fixed.content.decode()
    assert fixed.status_code == 200 and "<html" not in body
    tag = _utilisation_tag(body)
    assert tag == _utilisation_tag(fresh.content.decode())
    assert 'hx-preserve="true"' in tag and 'hx-get="/dashboard/?part=utilisation"' in tag
    assert 'hx-trigger="load, change, change from:#dash-filter-form"' in tag
    assert 'name="range"' not in body
    loaded = part.content.decode()
    assert "Mean utilisation over time, per pool × GPU model" in loaded
    assert [f'value="{key}"' in loaded for key in ("24h", "7d", "30d")] == [True] * 3


def test_a_refusal_of_two_fields_reads_as_sentences_on_the_dashboard_and_the_timeline(
    admin_page,
):
    """Each field's message ends its sentence: the next field follows after a space, not ".;"."""
    TeamFactory(slug="nlp")
    params = {"pool": "nope", "team": "nope"}
    refusal = (
        'Pool "nope": Select a valid choice. nope is not one of the available choices. '
        f'Team "nope": {INVALID}'
    )

    page = admin_page.get("/dashboard/", params)
    timeline = admin_page.get("/timeline/", params)  # its one filter is the team

    assert page.status_code == 400 and page.context["refusal"] == refusal
    assert timeline.status_code == 400 and timeline.context["refusal"] == f'Team "nope": {INVALID}'


def test_a_refusal_joins_a_message_that_ends_no_sentence_with_a_semicolon():
    class Filters(forms.Form):
        pool = forms.CharField(required=False)
        team = forms.CharField(required=False)

        def clean_pool(self):
            raise forms.ValidationError("no such pool")

        def clean_team(self):
            raise forms.ValidationError("no such team")

    form = Filters({"pool": "a", "team": "b"})

    assert filter_refusal(form) == 'Pool "a": no such pool; Team "b": no such team'
