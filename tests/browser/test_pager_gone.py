"""A pager link whose page has gone since the list was drawn (its rows deleted meanwhile): the
htmx 404 used to do nothing at all; the table area now says so and links to page 1 of the same
list (static/js/portal.js)."""

from __future__ import annotations

import pytest
from factories import NodeFactory, PoolFactory
from playwright.sync_api import expect

from pools.inventory.models import Node

pytestmark = pytest.mark.browser


def test_a_gone_page_says_so_and_links_to_page_1(signed_in, live_server, tmp_path):
    page = signed_in
    pool = PoolFactory()
    NodeFactory.create_batch(30, pool=pool)  # 25 a page: two pages
    page.goto(f"{live_server.url}/nodes/?page_size=25")
    expect(page.locator("#table")).to_contain_text("page 1 of 2")

    gone = list(Node.objects.order_by("-hostname").values_list("pk", flat=True)[:10])
    Node.objects.filter(pk__in=gone).delete()  # 20 left: page 2 is a 404 now
    page.get_by_role("link", name="Next ›").click()

    alert = page.locator("#table .page-gone[role=alert]")
    expect(alert).to_have_text("That page no longer exists; back to page 1")
    expect(alert.get_by_role("link", name="back to page 1")).to_have_attribute(
        "href", "/nodes/?page_size=25"
    )
    expect(page).to_have_url(f"{live_server.url}/nodes/?page_size=25")  # not pushed
    page.screenshot(path=str(tmp_path / "page-gone.png"), full_page=True)

    alert.get_by_role("link", name="back to page 1").click()
    expect(page.locator("#table")).to_contain_text("20 results")
    expect(page.locator("#table .page-gone")).to_have_count(0)
