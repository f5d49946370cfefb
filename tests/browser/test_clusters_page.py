"""The clusters list while a connection check is pending: htmx asks for its table again every
3 s (templates/pools/clusters/cluster_list.html), every 30 s once the check has waited over a
minute for a worker; on a phone the table folds to its key columns (static/js/portal.js)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from factories import ClusterFactory
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
NEXT_SWAP = """() => new Promise((settled) =>
  document.addEventListener("htmx:afterSettle", () => settled(true), { once: true }))"""


def test_an_unfolded_table_stays_unfolded_and_scrolled_across_the_refresh(
    signed_in, live_server, tmp_path
):
    """The admin's table has 6 columns, 2 of them key (Cluster, Status). Unfolded with "Show
    all 6" and scrolled sideways, it folded back to 2 and to its first column each time the
    pending check's poll swapped the table in; it now keeps all 6 and where it was scrolled."""
    page = signed_in
    ClusterFactory(slug="legacy", name="Legacy Slurm", check_requested_at=timezone.now())
    ClusterFactory(slug="rented", name="Rented GPU cloud")
    page.set_viewport_size(PHONE)
    page.goto(f"{live_server.url}/clusters/")
    cue = page.locator("#table .cols-cue")
    expect(cue).to_have_text("2 of 6 columns shown · Show all 6")
    table = page.locator("#table table")

    cue.click()
    table.evaluate("t => { t.scrollLeft = t.scrollWidth; }")
    scrolled = table.evaluate("t => t.scrollLeft")
    assert scrolled > 0
    page.screenshot(path=str(tmp_path / "clusters-unfolded-before-refresh.png"), full_page=True)
    assert page.evaluate(NEXT_SWAP) is True  # the poll swapped a new table in

    expect(table).to_have_class("striped cluster-table key-cols all-cols")
    expect(cue).to_have_text("Show the 2 key columns")
    expect(cue).to_have_attribute("aria-expanded", "true")
    assert table.locator("thead th:visible").count() == 6
    assert table.evaluate("t => t.scrollLeft") == scrolled
    page.screenshot(path=str(tmp_path / "clusters-unfolded-after-refresh.png"), full_page=True)

    cue.click()  # folded again by the user: the next refresh keeps it folded
    assert page.evaluate(NEXT_SWAP) is True
    expect(cue).to_have_text("2 of 6 columns shown · Show all 6")
    assert table.locator("thead th:visible").count() == 2


@pytest.mark.parametrize("width", [1280, 390])
def test_a_check_no_worker_picks_up_says_so_instead_of_spinning(
    signed_in, live_server, tmp_path, width
):
    """Asked 2 min 5 s ago and begun by no worker (none runs in this test): the cluster's
    status says "queued 2 minutes ago, no worker has picked it up yet", the notice above the
    table asks whether a worker runs, nothing on the table spins (Pico's aria-busy), and the
    table is asked for again after 30 s, not 3 s."""
    page = signed_in
    ClusterFactory(slug="legacy", name="Legacy Slurm",
                   check_requested_at=timezone.now() - timedelta(seconds=125))  # fmt: skip
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/clusters/")

    status = page.locator("#table [data-check-unclaimed]")
    expect(status).to_have_text("check queued")
    expect(page.locator("#table")).to_contain_text(
        "queued 2\xa0minutes ago, no worker has picked it up yet"
    )
    notice = page.locator("#table [data-checks-unclaimed]")
    expect(notice).to_contain_text("No worker has picked up the connection check queued 2")
    expect(notice).to_have_attribute("hx-trigger", "load delay:30s")
    expect(page.locator("#table [aria-busy=true]")).to_have_count(0)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(tmp_path / f"clusters-unclaimed-{width}.png"), full_page=True)
