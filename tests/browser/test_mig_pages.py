"""Issue 38: the dashboard and the fleet overview with cards in MIG mode (``tests/mig_nodes.py``)
show the slices beside the whole cards and stay within the screen at 1366 and 390 px."""

from __future__ import annotations

import pytest
from mig_nodes import mig_fleet

pytestmark = pytest.mark.browser


def _show_all_columns(page):
    """On a phone, tables fold to their essential columns behind a "Show all N" button (issue
    37): open every folded table as a user would before reading its other columns."""
    cues = page.locator("button.cols-cue")
    for n in range(cues.count()):
        if cues.nth(n).is_visible() and cues.nth(n).get_attribute("aria-expanded") == "false":
            cues.nth(n).click()


@pytest.mark.parametrize("width", [1366, 390])
@pytest.mark.parametrize(
    ("path", "text"),
    [("/dashboard/", "2 cards: 9 × 1g.10gb, 2 × 2g.20gb"), ("/", "9 × 1g.10gb, 2 × 2g.20gb")],
)
def test_mig_slices_are_shown_and_the_page_fits(
    signed_in, live_server, tmp_path, width, path, text
):
    mig_fleet()
    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}{path}")
    _show_all_columns(page)
    assert page.get_by_text(text).first.is_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(tmp_path / f"mig{path.replace('/', '_')}{width}.png"), full_page=True)


@pytest.mark.parametrize("width", [1366, 390])
def test_a_request_for_slices_shows_its_slices_panel_and_fits(
    signed_in, live_server, tmp_path, width, django_user_model
):
    """The new-request page filled for 3 × A100 1g.10gb in Inference: the panel shows the 9
    slices, 9 free, eligible — within the screen."""
    from factories import MembershipFactory

    mig_fleet()
    MembershipFactory(team__slug="nlp", user=django_user_model.objects.get(username="ada"))
    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(
        f"{live_server.url}/requests/new/?workload_kind=inference&pool=infer"
        "&gpu_model=a100_80g_sxm&mig_profile=1g.10gb&card_count=3"
    )
    row = page.locator("#slice-options tbody tr").first
    row.wait_for()
    _show_all_columns(page)
    assert row.inner_text().split("\t")[:3] == ["Inference", "A100 SXM4 80GB · 1g.10gb", "9 of 9"]
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(tmp_path / f"slices{width}.png"), full_page=True)
    page.screenshot(path=f"/tmp/hmig/slices{width}.png", full_page=True)
