"""The budget form in Chromium (issue #32): a pool admin creates a budget — a currency other
than the rate card's (none configured: ``BILLING_CURRENCY`` EUR) is a field error and writes
nothing — then deletes it, accepting the confirmation; the form stays within the screen at
1366 and 390 px. Screenshots go to ``BROWSER_SHOTS`` (a directory) when set, else the test's
temporary directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from factories import TeamFactory

from billing.budgets.models import Budget

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", [1366, 390])
def test_a_pool_admin_creates_and_deletes_a_budget(signed_in, live_server, tmp_path, width):
    page = signed_in
    team = TeamFactory(slug="nlp", name="NLP")
    shots = Path(os.environ.get("BROWSER_SHOTS") or tmp_path)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/costs/budgets/")
    page.get_by_role("button", name="New budget").click()
    page.wait_for_url("**/costs/budgets/new/")

    page.select_option("select[name=team]", str(team.pk))
    page.select_option("select[name=period]", "quarter")
    page.fill("input[name=starts_on]", "2026-04-01")
    page.fill("input[name=card_hours_limit]", "2000")
    page.fill("input[name=money_limit]", "5000")
    page.fill("input[name=currency]", "USD")
    page.click("form.budget-form button[type=submit]")
    page.wait_for_load_state()
    assert page.get_by_text("The rate card charges in EUR; a budget in USD").is_visible()
    assert not Budget.objects.exists()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(shots / f"budget-form-{width}.png"), full_page=True)

    page.fill("input[name=currency]", "EUR")
    page.click("form.budget-form button[type=submit]")
    page.wait_for_url("**/costs/budgets/?budget=*")
    budget = Budget.objects.get()
    assert (budget.period, budget.currency, str(budget.money_limit)) == (
        "quarter",
        "EUR",
        "5000.0000",
    )

    page.goto(f"{live_server.url}/costs/budgets/{budget.pk}/edit/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete budget").click()
    page.wait_for_url("**/costs/budgets/")
    assert not Budget.objects.exists()
