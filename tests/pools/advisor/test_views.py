"""``/api/v1/advisor/findings/`` and the Advisor pages: scoping to the caller's teams, the
filters, the evidence, triage through HTTP (400 / 403 / 409 bodies), CSV, panels, and
constant queries for a page."""

from __future__ import annotations

import csv
import io

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from factories import AdvisorFindingFactory, TeamFactory

from pools.advisor.models import AdvisorDigestOptIn, AdvisorFinding

pytestmark = pytest.mark.django_db


@pytest.fixture
def findings(team):
    """nlp: an open batching warning and a closed saturation; vision: a critical memory
    finding."""
    mine = AdvisorFindingFactory(allocation__team=team, team=team)
    AdvisorFindingFactory(
        allocation=mine.allocation,
        team=team,
        rule="saturation",
        severity="info",
        severity_rank=2,
        status="closed",
        closed_at=mine.last_seen_at,
    )
    vision = TeamFactory(slug="vision", name="Vision")
    theirs = AdvisorFindingFactory(
        allocation__team=vision,
        team=vision,
        rule="memory_pressure",
        severity="critical",
        severity_rank=0,
        evidence={"buckets": 61, "preemptions": 2874.0},
    )
    return mine, theirs


def test_a_member_lists_their_teams_live_findings_with_evidence(api_as, team_member, findings):
    mine, theirs = findings
    body = api_as(team_member).get("/api/v1/advisor/findings/").json()
    assert [row["id"] for row in body["results"]] == [mine.pk]
    row = body["results"][0]
    assert row["title"] == "GPU idle while requests queue"
    assert row["evidence"] == {"minutes": 20, "gpu_util_pct_mean": 25.0}
    assert row["chart_url"] == f"/allocations/{mine.allocation_id}/serving/"
    assert api_as(team_member).get(f"/api/v1/advisor/findings/{theirs.pk}/").status_code == 404


def test_admins_filter_by_severity_team_and_status(admin_api, findings):
    mine, theirs = findings
    url = "/api/v1/advisor/findings/"
    assert [r["id"] for r in admin_api.get(url).json()["results"]] == [theirs.pk, mine.pk]
    critical = admin_api.get(url, {"severity": "critical"}).json()["results"]
    assert [r["id"] for r in critical] == [theirs.pk]
    every = admin_api.get(url, {"team": "nlp", "status": "all"}).json()["results"]
    assert {r["rule"] for r in every} == {"batching", "saturation"}
    bad = admin_api.get(url, {"severity": "dire"})
    assert bad.status_code == 400 and "severity" in bad.json()["errors"]


def test_triage_over_the_api(api_as, team_member, team_manager, findings):
    mine, _ = findings
    url = f"/api/v1/advisor/findings/{mine.pk}/"
    refused = api_as(team_member).post(url + "mute/", {"reason": "noise"}, format="json")
    assert refused.status_code == 403
    assert api_as(team_manager).post(url + "mute/", {}, format="json").status_code == 400
    muted = api_as(team_manager).post(url + "mute/", {"reason": "known, fix on Monday"})
    assert muted.status_code == 200 and muted.json()["status"] == "muted"
    again = api_as(team_manager).post(url + "acknowledge/", {"reason": "x"}, format="json")
    assert again.status_code == 409
    mine.refresh_from_db()
    assert (mine.status, mine.reason) == ("muted", "known, fix on Monday")


def test_the_schema_documents_findings_with_an_example(admin_api):
    schema = admin_api.get("/api/schema/?format=json").json()
    path = schema["paths"]["/api/v1/advisor/findings/"]["get"]
    example = next(iter(path["responses"]["200"]["content"]["application/json"]["examples"]))
    assert example
    assert "/api/v1/advisor/findings/{id}/mute/" in schema["paths"]


def test_the_advisor_page_lists_every_team_for_pool_admins(admin_page, findings):
    page = admin_page.get("/advisor/")
    text = page.content.decode()
    assert page.status_code == 200
    assert "Preemptions, KV cache or framebuffer full" in text
    table = text[text.index("<tbody>") :]
    assert table.index("Critical") < table.index("Warning")  # most urgent first
    # evidence in words with units, counts whole (stored: buckets 61, preemptions 2874.0;
    # the factory's batching finding: minutes 20, gpu_util_pct_mean 25.0)
    assert "<dt>Preemptions</dt><dd>2\u202f874</dd>" in table
    assert "<dt>Five-minute intervals</dt><dd>61</dd>" in table
    assert "<dt>GPU utilisation, mean</dt><dd>25.0\u00a0%</dd>" in table
    assert "2874.0" not in table and "gpu_util_pct_mean" not in table
    assert "seeds" not in text
    # the rules list: what the citation is, in words, beside it
    assert (
        "<li><strong>GPU idle while requests queue</strong> — from Enterprise GPU pools, §5.1 "
        "“Troubleshooting table of frequent problems”, row 1: GPU utilisation is low but "
        'requests queue badly <span class="muted">(004 §5.1 row 1)</span></li>'
    ) in text


def test_the_last_pass_names_the_rules_it_could_not_judge(admin_page):
    from django.utils import timezone

    from pools.advisor.models import AdvisorRun

    now = timezone.now()
    AdvisorRun.objects.create(started_at=now, evaluated_at=now, allocations=5,
                              undecided={"cold_start": 1, "batching": 2})  # fmt: skip

    text = admin_page.get("/advisor/").content.decode()

    assert (
        "5 allocations judged; undecided (signals missing): GPU idle while requests queue (2),"
        " Slow and failing right after a scale-up (1)."
    ) in " ".join(text.split())
    empty = admin_page.get("/advisor/", {"rule": "cold_start"})
    assert "No findings match these filters." in empty.content.decode()


def test_a_member_sees_the_advisor_of_their_own_teams(client, team_member, findings):
    """alice (nlp): nlp's live finding, not vision's critical one; ``?team=nlp`` the same;
    ``?team=vision`` a 400 with no rows. Members neither run the advisor nor triage (the
    triage form is for managers: may_release)."""
    mine, theirs = findings
    client.force_login(team_member)

    page = client.get("/advisor/")
    own = client.get("/advisor/", {"team": "nlp"})
    other = client.get("/advisor/", {"team": "vision"})

    assert page.status_code == own.status_code == 200
    assert [f.pk for f in page.context["page"]] == [f.pk for f in own.context["page"]] == [mine.pk]
    assert f'id="finding-{theirs.pk}"' not in page.content.decode()
    assert "Run the advisor now" not in page.content.decode()
    assert "Acknowledge / mute" not in page.content.decode()
    assert other.status_code == 400 and list(other.context["page"]) == []
    assert '<a href="/advisor/">Advisor</a>' in client.get("/teams/mine/").content.decode()


def test_a_manager_triages_their_teams_findings_from_the_advisor(client, team_manager, findings):
    client.force_login(team_manager)
    assert "Acknowledge / mute" in client.get("/advisor/").content.decode()


def test_a_member_may_not_run_the_advisor(member_page):
    assert member_page.post("/advisor/run/").status_code == 403


def test_the_advisor_csv_and_page_queries_do_not_grow(admin_page, findings, team):
    body = admin_page.get("/advisor/", {"export": "csv", "status": "all"})
    rows = list(csv.DictReader(io.StringIO(b"".join(body.streaming_content).decode())))
    assert {r["rule"] for r in rows} == {"batching", "saturation", "memory_pressure"}
    # stored {"buckets": 61, "preemptions": 2874.0}: counts whole, no group separator
    assert next(r for r in rows if r["rule"] == "memory_pressure")["evidence"] == (
        "buckets=61; preemptions=2874"
    )
    # the factory's batching finding: {"minutes": 20, "gpu_util_pct_mean": 25.0}
    assert next(r for r in rows if r["rule"] == "batching")["evidence"] == (
        "minutes=20 min; gpu_util_pct_mean=25.0 %"
    )

    def queries():
        with CaptureQueriesContext(connection) as ctx:
            assert admin_page.get("/advisor/").status_code == 200
        return len(ctx.captured_queries)

    few = queries()
    for _ in range(10):
        AdvisorFindingFactory(allocation__team=team, team=team, rule="outside_gpu")
    assert queries() == few


def test_panels_on_the_allocation_page_and_team_dashboard(team, team_member, findings):
    mine, theirs = findings
    client = Client()
    client.force_login(team_member)
    panel = client.get(f"/allocations/{mine.allocation_id}/findings/", HTTP_HX_REQUEST="true")
    text = panel.content.decode()
    assert panel.status_code == 200 and "GPU idle while requests queue" in text
    assert "<html" not in text  # the fragment only
    # no rollups stored: the rules that need them say so rather than passing as healthy
    assert "Undecided: " in text and "no serving rollups in the window" in text
    assert client.get(f"/allocations/{theirs.allocation_id}/findings/").status_code == 404
    team_panel = client.get("/teams/nlp/findings/", HTTP_HX_REQUEST="true").content.decode()
    assert "1 finding" in team_panel
    assert "Weekly digest by e-mail" not in team_panel  # alice manages no team
    assert client.get("/teams/vision/findings/").status_code == 404


def test_triage_and_digest_through_the_pages(team, team_manager, findings):
    mine, _ = findings
    client = Client()
    client.force_login(team_manager)
    client.post(f"/advisor/{mine.pk}/acknowledge/", {"reason": "", "next": "/teams/nlp/"})
    assert AdvisorFinding.objects.get(pk=mine.pk).status == "open"  # no reason, no change
    done = client.post(f"/advisor/{mine.pk}/acknowledge/", {"reason": "on it", "next": "/x/"})
    assert done.status_code == 302 and done["Location"] == "/x/"
    assert AdvisorFinding.objects.get(pk=mine.pk).status == "acknowledged"
    offsite = client.post(f"/advisor/{mine.pk}/mute/", {"reason": "r", "next": "https://e.vil/"})
    assert offsite["Location"] == "/advisor/"
    client.post("/advisor/digest/", {"digest": "on"})
    assert AdvisorDigestOptIn.objects.filter(user=team_manager).exists()
    client.post("/advisor/digest/", {"digest": "off"})
    assert not AdvisorDigestOptIn.objects.filter(user=team_manager).exists()


def test_run_now_judges_at_once_without_a_broker(admin_page):
    response = admin_page.post("/advisor/run/", follow=True)
    assert "Judged 0 allocations" in response.content.decode()


@pytest.fixture
def three_severities(team):
    """One live finding of each severity, all of team nlp (different rules)."""
    made = {}
    for rule, severity, rank in (
        ("saturation", "info", 2),
        ("batching", "warning", 1),
        ("memory_pressure", "critical", 0),
    ):
        made[severity] = AdvisorFindingFactory(
            allocation__team=team, team=team, rule=rule, severity=severity, severity_rank=rank
        ).pk
    return made


def test_ordering_by_severity_is_by_how_severe_not_by_name(admin_api, admin_page, three_severities):
    """``-severity``: critical, warning, info (most severe first); ``severity`` the other way
    round. String order would put info before critical and warning; the stored rank (0
    critical) counted backwards."""
    ids = three_severities
    most_first = [ids["critical"], ids["warning"], ids["info"]]
    url = "/api/v1/advisor/findings/"
    desc = admin_api.get(url, {"ordering": "-severity"}).json()["results"]
    asc = admin_api.get(url, {"ordering": "severity"}).json()["results"]
    assert [r["id"] for r in desc] == most_first
    assert [r["id"] for r in asc] == most_first[::-1]

    rows = list(
        csv.DictReader(
            io.StringIO(
                b"".join(
                    admin_page.get(
                        "/advisor/", {"ordering": "-severity", "export": "csv"}
                    ).streaming_content
                ).decode()
            )
        )
    )
    assert [r["severity"] for r in rows] == ["critical", "warning", "info"]
    page = admin_page.get("/advisor/", {"ordering": "-severity"}).content.decode()
    assert page.index(f"/advisor/{ids['critical']}/") < page.index(f"/advisor/{ids['info']}/")


@pytest.mark.parametrize("action", ["acknowledge", "mute", "unmute"])
@pytest.mark.parametrize("body", [{}, {"reason": ""}, {"reason": "x" * 1001}, {"reason": "ok"}])
def test_a_member_is_refused_triage_whatever_the_body(api_as, team_member, findings, action, body):
    """Who may act is decided before the body is read: 403, never the 400 of a missing or
    too long reason, and the finding unchanged."""
    mine, _ = findings
    url = f"/api/v1/advisor/findings/{mine.pk}/{action}/"

    response = api_as(team_member).post(url, body, format="json")

    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
    mine.refresh_from_db()
    assert (mine.status, mine.reason) == ("open", "")


def test_a_member_posting_triage_on_the_page_gets_403_before_the_reason(team_member, findings):
    mine, _ = findings
    client = Client()
    client.force_login(team_member)

    for reason in ("", "ok"):
        response = client.post(f"/advisor/{mine.pk}/acknowledge/", {"reason": reason})
        assert response.status_code == 403
    assert AdvisorFinding.objects.get(pk=mine.pk).status == "open"


def test_the_digest_is_offered_to_managers_and_comes_back_to_the_page(
    team, team_member, team_manager, findings
):
    """The panel on nlp's dashboard (an htmx fragment: ``HX-Current-URL`` is the dashboard,
    an absolute URL) offers mia, who manages nlp, the digest, with ``next`` the dashboard's
    path; posting it opts her in and redirects there."""
    client = Client()
    client.force_login(team_manager)
    panel = client.get(
        "/teams/nlp/findings/",
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL="http://testserver/teams/nlp/dashboard/?tab=1",
    ).content.decode()
    assert "Weekly digest by e-mail" in panel
    assert '<input type="hidden" name="next" value="/teams/nlp/dashboard/?tab=1">' in panel

    done = client.post("/advisor/digest/", {"digest": "on", "next": "/teams/nlp/dashboard/?tab=1"})

    assert done.status_code == 302 and done["Location"] == "/teams/nlp/dashboard/?tab=1"
    assert AdvisorDigestOptIn.objects.filter(user=team_manager).exists()


def test_the_panel_page_itself_comes_back_to_itself_and_never_to_another_site(
    team, team_manager, findings
):
    client = Client()
    client.force_login(team_manager)
    own = client.get("/teams/nlp/findings/").content.decode()
    assert '<input type="hidden" name="next" value="/teams/nlp/findings/">' in own
    offsite = client.get(
        "/teams/nlp/findings/", HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL="https://e.vil/x/"
    ).content.decode()
    assert '<input type="hidden" name="next" value="">' in offsite


def test_a_user_who_manages_no_team_cannot_opt_in_but_may_opt_out(team, team_member, findings):
    client = Client()
    client.force_login(team_member)

    refused = client.post("/advisor/digest/", {"digest": "on", "next": "/teams/nlp/"})

    assert refused.status_code == 403
    assert not AdvisorDigestOptIn.objects.filter(user=team_member).exists()
    AdvisorDigestOptIn.objects.create(user=team_member)  # from when alice managed a team
    panel = client.get("/teams/nlp/findings/", HTTP_HX_REQUEST="true").content.decode()
    assert "Stop weekly digest" in panel
    out = client.post("/advisor/digest/", {"digest": "off", "next": "/teams/nlp/"})
    assert out.status_code == 302 and out["Location"] == "/teams/nlp/"
    assert not AdvisorDigestOptIn.objects.filter(user=team_member).exists()
