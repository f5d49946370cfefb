"""Issue 38: the dashboard and the fleet overview with cards in MIG mode (``tests/mig_nodes.py``)
show the slices beside the whole cards and stay within the screen at 1366 and 390 px."""

from __future__ import annotations

import pytest
from mig_nodes import mig_fleet

pytestmark = pytest.mark.browser


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
    assert page.get_by_text(text).first.is_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(tmp_path / f"mig{path.replace('/', '_')}{width}.png"), full_page=True)
