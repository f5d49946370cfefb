"""Back after a filter change puts back the whole page, with its charts and without a
Content-Security-Policy error (``portal.middleware.HtmxMiddleware``, ``static/js/dashboard.js``).

htmx pushes each filter change as an address; Back to one after another page was loaded
restores it from htmx's history cache (its copy of the body) or, when the cache has lost it
(cleared here), asks the server with ``HX-History-Restore-Request``. The dashboard answered that
with its ``#body`` fragment alone, which htmx put in place of the whole ``<body>`` (no header,
no filters); and its inline chart script, swapped in again, was refused by the page's policy."""

from __future__ import annotations

import time

import pytest
from factories import GpuFactory, NodeFactory, PoolFactory

from pools.inventory.models import GpuModel

pytestmark = pytest.mark.browser

# Policy violations as the page sees them (an init script runs outside the page's policy).
WATCH = """
window.__violations = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`));
"""


def _until(page, expression: str, timeout_s: float = 10.0) -> None:
    # polled with evaluate: wait_for_function runs eval(), which the page's policy refuses
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"still false after {timeout_s} s: {expression}"
        page.wait_for_timeout(100)


def _watch(page) -> tuple[list[str], list[str]]:
    """Console errors and the addresses of the requests that were history restores."""
    errors, restores = [], []
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on(
        "request",
        lambda r: r.headers.get("hx-history-restore-request") == "true" and restores.append(r.url),
    )
    page.context.add_init_script(WATCH)
    return errors, restores


@pytest.fixture
def two_pools():
    l40s = GpuModel.objects.get(slug="l40s")
    for slug in ("infer", "train"):
        node = NodeFactory(hostname=f"{slug}-01", pool=PoolFactory(slug=slug, name=slug.title()))
        GpuFactory(node=node, index=0, gpu_model=l40s)


@pytest.mark.parametrize("cache", ["kept", "lost"])
def test_back_to_a_filtered_dashboard_is_the_whole_page_with_its_chart(
    signed_in, live_server, two_pools, cache
):
    page = signed_in
    errors, restores = _watch(page)
    page.goto(f"{live_server.url}/dashboard/")
    page.select_option("select[name=pool]", "infer")
    page.wait_for_url("**pool=infer**")
    page.select_option("select[name=pool]", "train")
    page.wait_for_url("**pool=train**")
    page.goto(f"{live_server.url}/gpus/")  # away, a page of its own
    if cache == "lost":
        page.evaluate("sessionStorage.removeItem('htmx-history-cache')")

    page.go_back()  # the last address pushed, loaded afresh
    page.wait_for_url("**pool=train**")
    page.go_back()  # the one before it: htmx puts it back
    page.wait_for_url("**pool=infer**")
    _until(page, "document.querySelector('select[name=pool]').value === 'infer'")
    _until(page, "!!(window.Chart && Chart.getChart(document.getElementById('plan-chart')))")

    assert page.locator("header.site").count() == 1  # the layout, not the body alone
    assert page.locator("#dash-filter-form").count() == 1
    assert page.locator("#dashboard-body").count() == 1
    assert page.locator("h2", has_text="Capacity dashboard").count() == 1
    if cache == "lost":
        assert [url for url in restores if "pool=infer" in url], restores
    assert page.evaluate("window.__violations") == []
    assert errors == []


def test_back_to_a_filtered_list_whose_cache_was_lost_is_the_whole_page(
    signed_in, live_server, two_pools
):
    page = signed_in
    errors, restores = _watch(page)
    page.goto(f"{live_server.url}/gpus/")
    page.select_option("form.filters select[name=pool]", "infer")
    page.wait_for_url("**pool=infer**")
    page.select_option("form.filters select[name=pool]", "train")
    page.wait_for_url("**pool=train**")
    page.goto(f"{live_server.url}/dashboard/")
    page.evaluate("sessionStorage.removeItem('htmx-history-cache')")

    page.go_back()
    page.wait_for_url("**pool=train**")
    page.go_back()
    page.wait_for_url("**pool=infer**")
    _until(
        page,
        "!!document.querySelector('#table td') && document.body.innerText.includes('infer-01')",
    )

    assert [url for url in restores if "pool=infer" in url], restores
    assert page.locator("header.site").count() == 1
    assert page.locator("form.filters").count() == 1
    assert "train-01" not in page.locator("#table").inner_text()
    assert page.evaluate("window.__violations") == []
    assert errors == []
