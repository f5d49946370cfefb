"""The Advisor page with the demo's findings: a pool admin filters to the critical ones,
acknowledges one with a reason, and finds the panel on the team dashboard; at a laptop's and
a phone's width (screenshots under the test's tmp_path)."""

from __future__ import annotations

import pytest
from browser_support import log_in
from django.core.management import call_command
from playwright.sync_api import expect

from pools.advisor.models import AdvisorFinding
from pools.audit.models import AuditEvent

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width,height", [(1366, 900), (390, 844)])
def test_advisor_page_filters_acknowledges_and_shows_the_team_panel(
    browser, live_server, tmp_path, width, height
):
    call_command("load_demo", verbosity=0)
    live = AdvisorFinding.objects.exclude(status="closed")
    assert live.values("rule").distinct().count() >= 5
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    log_in(page, live_server.url, "admin")

    page.goto(f"{live_server.url}/advisor/")
    rows = page.locator("table.findings tbody tr")
    expect(rows).to_have_count(live.count())
    page.screenshot(path=str(tmp_path / f"advisor-{width}.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= width

    page.select_option("select[name=severity]", "critical")  # htmx swaps the table
    expect(rows).to_have_count(live.filter(severity="critical").count())
    first = rows.first
    finding_id = int(first.get_attribute("id").removeprefix("finding-"))
    first.locator("summary", has_text="Acknowledge").click()
    first.locator("input[name=reason]").fill("Queue limit goes in with Monday's release")
    first.get_by_role("button", name="Acknowledge").click()
    page.wait_for_load_state("networkidle")
    expect(page.locator(f"#finding-{finding_id} .badge.acknowledged")).to_be_visible()
    assert AuditEvent.objects.filter(action="advisor_finding.acknowledge").count() == 1

    page.goto(f"{live_server.url}/teams/nlp/dashboard/")
    panel = page.locator("#advisor-panel")
    expect(panel).to_contain_text("Advisor")
    expect(panel).to_contain_text("Queue avalanche")
    page.screenshot(path=str(tmp_path / f"team-panel-{width}.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    context.close()
