"""The token-flow page in chromium at a phone's and a laptop's width: the demo agent tasks
(``billing/tokenflow/demo.py``: 48 tasks, 288 calls, 84 retries), the chart drawn, the
costliest task first, sorting from the form, nothing wider than the screen. Screenshots go to
``$SCREENSHOT_DIR`` (default: the test's tmp dir) to be looked at."""

from __future__ import annotations

import os
from decimal import Decimal
from pathlib import Path

import pytest
from browser_support import log_in
from django.utils import timezone
from factories import MembershipFactory

from billing.choices import RateKind
from billing.services.rates import rate_card_create
from billing.tokenflow.demo import demo_agent_tasks_load

pytestmark = pytest.mark.browser

WIDTHS = [(390, 844), (1366, 900)]


def test_token_flow_page_at_both_widths(browser, live_server, tmp_path):
    now = timezone.now()
    user = MembershipFactory(team__slug="nlp", team__name="NLP", user__username="alice").user
    user.set_password("pw-alice-123")
    user.save()
    rate_card_create(name="demo", currency="EUR", effective_from=now.date().replace(day=1, month=1),
                     token_prices={("qwen", RateKind.TOKEN_INPUT): Decimal("0.20"),
                                   ("qwen", RateKind.TOKEN_CACHED_INPUT): Decimal("0.05"),
                                   ("qwen", RateKind.TOKEN_OUTPUT): Decimal("0.60")})  # fmt: skip
    assert demo_agent_tasks_load(now=now, served="qwen") == 288
    out = Path(os.environ.get("SCREENSHOT_DIR", tmp_path))
    out.mkdir(parents=True, exist_ok=True)

    for width, height in WIDTHS:
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        log_in(page, live_server.url, "alice", "pw-alice-123")

        page.goto(f"{live_server.url}/costs/token-flow/nlp/")
        page.wait_for_load_state("networkidle")

        assert page.locator(".cards").get_by_text("288 model calls").is_visible()
        assert page.get_by_text("84 retries, 0 errors").is_visible()
        assert page.evaluate(
            "!!window.Chart && !!Chart.getChart(document.querySelector("
            "'[data-token-flow-chart] canvas'))"
        )
        first = page.locator("#table tbody tr").first
        assert first.locator("td").nth(2).inner_text() == "12"  # the costliest: a retrying task
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        page.screenshot(path=str(out / f"token-flow-{width}.png"), full_page=True)

        page.select_option("select[name=ordering]", "first_call_at")
        page.get_by_role("button", name="Show", exact=True).click()
        page.wait_for_load_state("networkidle")
        assert "ordering=first_call_at" in page.url
        assert page.locator("#table tbody tr").first.locator("td").nth(2).inner_text() == "4"
        context.close()
