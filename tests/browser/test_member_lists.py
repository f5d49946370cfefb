"""A member's idle findings and advisor pages with the demo's data: alice (nlp) sees her team's
rows, filters by her team, and a team she is not in is refused with the reason on the page; at a
laptop's and a phone's width (screenshots under the test's tmp_path)."""

from __future__ import annotations

import re

import pytest
from browser_support import log_in
from django.core.management import call_command
from playwright.sync_api import expect

from pools.advisor.models import AdvisorFinding

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width,height", [(1366, 900), (390, 844)])
def test_a_member_filters_idle_and_advisor_by_her_team(
    browser, live_server, tmp_path, width, height
):
    call_command("load_demo", verbosity=0)
    nlp_live = AdvisorFinding.objects.filter(team__slug="nlp").exclude(status="closed").count()
    assert nlp_live and AdvisorFinding.objects.exclude(team__slug="nlp").exists()
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    log_in(page, live_server.url, "alice")

    page.goto(f"{live_server.url}/idle/?team=nlp")
    expect(page.locator("input[name=team]")).to_have_value("nlp")
    expect(page.get_by_role("button", name="Export CSV")).to_have_attribute(
        "href", "?team=nlp&export=csv"
    )
    page.screenshot(path=str(tmp_path / f"idle-{width}.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= width

    refused = page.goto(f"{live_server.url}/idle/?team=vision")
    assert refused.status == 400
    expect(page.get_by_role("alert")).to_contain_text(
        'Team "vision": No team you can see has this slug.'
    )
    page.screenshot(path=str(tmp_path / f"idle-refused-{width}.png"), full_page=True)

    page.goto(f"{live_server.url}/advisor/")
    expect(page.locator("table.findings tbody tr")).to_have_count(nlp_live)
    expect(page.get_by_role("button", name="Run the advisor now")).to_have_count(0)
    page.screenshot(path=str(tmp_path / f"advisor-{width}.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= width

    # typing another team: htmx swaps in the table's 400, which says why
    page.fill("input[name=team]", "vision")
    expect(page.locator("#table [role=alert]")).to_contain_text('Team "vision"')
    expect(page.locator("table.findings tbody tr")).to_have_count(1)  # the empty row
    page.screenshot(path=str(tmp_path / f"advisor-refused-{width}.png"), full_page=True)
    context.close()


def test_fixing_a_refused_team_filter_clears_its_error_under_the_field(browser, live_server):
    """A request list opened with a team alice is not in answers 400 with the error under the
    Team field; typing her own team swaps in the list by htmx, and the field's stale error and
    aria-invalid go with it (the form is outside the swapped #table, so they stayed)."""
    call_command("load_demo", verbosity=0)
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    page = context.new_page()
    log_in(page, live_server.url, "alice")

    refused = page.goto(f"{live_server.url}/requests/?team=vision&status=submitted")
    assert refused.status == 400
    team = page.locator("input[name=team]")
    expect(team).to_have_attribute("aria-invalid", "true")
    expect(page.locator("form.filters .errorlist")).to_have_count(1)

    team.fill("nlp")
    expect(page).to_have_url(re.compile(r"[?&]team=nlp(&|$)"))
    expect(page.locator("#table [role=alert]")).to_have_count(0)
    expect(page.locator("#table tbody tr").first).to_contain_text("NLP")
    expect(page.locator("form.filters .errorlist")).to_have_count(0)
    expect(team).not_to_have_attribute("aria-invalid", "true")
    context.close()
