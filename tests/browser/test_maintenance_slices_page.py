"""Issue 32: the new-maintenance-window page's collision preview over a MIG node lists the team
and the slices it loses (``tests/mig_nodes.py``: a100-mixed holds all 9 1g.10gb of pool
``infer``), beside a team losing whole cards, and stays within the screen at 1366 and 390 px."""

from __future__ import annotations

from datetime import timedelta

import pytest
from mig_nodes import mig_fleet

pytestmark = pytest.mark.browser
H = timedelta(hours=1)


def _show_all_columns(page):
    """On a phone a table keeps its essential columns behind "Show all N": open them."""
    cues = page.locator("button.cols-cue")
    for n in range(cues.count()):
        if cues.nth(n).is_visible() and cues.nth(n).get_attribute("aria-expanded") == "false":
            cues.nth(n).click()


@pytest.mark.parametrize("width", [1366, 390])
def test_the_preview_lists_slices_lost_and_fits(signed_in, live_server, tmp_path, width):
    """nlp holds 3 × 1g.10gb and vision 4 whole A100 09:00-17:00; a100-mixed away 12:00-14:00
    takes all of both (its 9 slices and 6 whole cards are all the pool has): the team table
    reads NLP 0 cards, 3 × 1g.10gb; Vision 4 cards, no slices."""
    from django.utils import timezone
    from factories import AllocationFactory, TeamFactory, next_week_9am

    from pools.inventory.models import GpuModel

    pool = mig_fleet()
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    t = next_week_9am()
    window = {"starts_at": t, "ends_at": t + 8 * H, "pool": pool, "gpu_model": a100}
    AllocationFactory(team=TeamFactory(slug="nlp", name="NLP"), mig_profile="1g.10gb",
                      card_count=3, **window)  # fmt: skip
    AllocationFactory(team=TeamFactory(slug="vision", name="Vision"), card_count=4, **window)
    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/maintenance/new/")
    page.fill("input[name=title]", "R570 upgrade")
    page.fill("textarea[name=hostnames]", "a100-mixed")
    local = "%Y-%m-%dT%H:%M"
    page.fill("input[name=starts_at]", timezone.localtime(t + 3 * H).strftime(local))
    page.fill("input[name=ends_at]", timezone.localtime(t + 5 * H).strftime(local))
    page.click("button[value=preview]")
    rows = page.locator("#team-losses tbody tr")
    rows.first.wait_for()
    assert [rows.nth(i).inner_text().split("\t") for i in range(rows.count())] == [
        ["Vision", "4", "—"],
        ["NLP", "0", "3 × 1g.10gb"],
    ]
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(tmp_path / f"maintenance-slices-{width}.png"), full_page=True)


@pytest.mark.parametrize("width", [1366, 390])
def test_the_windows_page_lists_the_slices_away_and_fits(signed_in, live_server, tmp_path, width):
    """A window over the whole pool: A100 6 cards, 9 × 1g.10gb, 2 × 2g.20gb; H100 NVL 0 cards,
    14 × 1g.12gb — within the screen."""
    from django.contrib.auth import get_user_model
    from factories import next_week_9am

    from pools.maintenance.services.windows import maintenance_window_create

    pool = mig_fleet()
    t = next_week_9am()
    window = maintenance_window_create(
        actor=get_user_model().objects.get(username="ada"), title="R570", scope="pool",
        pool=pool, starts_at=t, ends_at=t + H,
    )  # fmt: skip
    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/maintenance/{window.pk}/")
    rows = page.locator("#away tbody tr")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(tmp_path / f"maintenance-away-{width}-folded.png"), full_page=True)
    _show_all_columns(page)
    assert [rows.nth(i).inner_text().split("\t") for i in range(rows.count())] == [
        ["Inference", "A100 SXM4 80GB", "6", "9 × 1g.10gb, 2 × 2g.20gb"],
        ["Inference", "H100 NVL", "0", "14 × 1g.12gb"],
    ]
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(tmp_path / f"maintenance-away-{width}.png"), full_page=True)
