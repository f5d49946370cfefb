"""No page is wider than the screen, on a phone (390 × 844) and a laptop (1366 × 900), with the
demo's data (issue #21): tables scroll inside their card, the navigation folds behind *Menu*."""

from __future__ import annotations

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.browser

PAGES = [
    "/", "/nodes/", "/nodes/trn-a100-01/", "/gpus/", "/gpu-models/", "/pools/",
    "/unrecognised-models/", "/inventory/import/", "/scheduler/drift/", "/teams/mine/",
    "/requests/", "/requests/new/", "/requests/queue/", "/requests/{request}/", "/allocations/",
    "/timeline/", "/sizing/", "/idle/", "/idle/policies/", "/dashboard/", "/costs/",
    "/costs/finance/2026-10/", "/costs/nlp/2026-10/", "/teams/nlp/dashboard/",
]  # fmt: skip
WIDTHS = [(390, 844), (1366, 900)]


def test_no_page_scrolls_sideways_and_the_menu_opens_on_a_phone(browser, live_server):
    call_command("load_demo", verbosity=0)
    call_command("load_demo_billing", verbosity=0)
    from pools.capacity.models import CapacityRequest

    pages = [p.format(request=CapacityRequest.objects.order_by("pk").first().pk) for p in PAGES]
    too_wide = []
    for width, height in WIDTHS:
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        page.goto(f"{live_server.url}/login/")
        page.fill("input[name=username]", "admin")
        page.fill("input[name=password]", "demo")
        page.click("button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")
        for path in pages:
            response = page.goto(f"{live_server.url}{path}")
            assert response.status == 200, path
            page.wait_for_load_state("networkidle")
            scroll_width = page.evaluate("document.documentElement.scrollWidth")
            if scroll_width > width:
                too_wide.append((width, path, scroll_width))
        menu = page.get_by_role("button", name="Menu")
        if width < 768:
            assert not page.locator("#site-links").is_visible()
            menu.click()
            assert page.get_by_role("link", name="Request GPUs").is_visible()
        else:
            assert not menu.is_visible()  # the links themselves are in the bar
            assert page.get_by_role("link", name="Request GPUs").is_visible()
        context.close()

    assert too_wide == []
