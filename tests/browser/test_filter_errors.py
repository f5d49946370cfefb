"""A refused filter's error on a filter bar: no list bullet, under its own field, and the bar's
other fields stay in line (their controls' tops level with the refused one's), on the idle
page's own bar and on the shared one (``includes/filters.html``, here the advisor's), at a
laptop's and a phone's width (screenshots under the test's tmp_path)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser


def _box(page, selector: str) -> dict:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, selector
    return box


def _check_bar(page, field: str, neighbour: str) -> None:
    """``field``'s error sits under ``field`` (between its left and right edges, below its
    bottom), shows no bullet, and ``neighbour``, on the same row, has its top level with
    ``field``'s."""
    error = f"label:has({field}) .errorlist li"
    assert page.locator(error).count() == 1
    assert page.eval_on_selector(error, "li => getComputedStyle(li).listStyleType") == "none"
    control, said = _box(page, field), _box(page, error)
    assert said["y"] >= control["y"] + control["height"] - 0.5
    assert control["x"] - 0.5 <= said["x"] <= control["x"] + control["width"]
    other = _box(page, neighbour)
    if abs(other["x"] - control["x"]) > 1:  # side by side, not wrapped to another row
        assert other["y"] == pytest.approx(control["y"], abs=1)


@pytest.mark.parametrize("width,height", [(1366, 900), (390, 844)])
def test_a_refused_team_filter_sits_under_its_field(
    signed_in, live_server, tmp_path, width, height
):
    page = signed_in
    page.set_viewport_size({"width": width, "height": height})

    page.goto(f"{live_server.url}/idle/?team=no-such-team")
    _check_bar(page, "[name=team]", "select[name=state]")
    if width == 1366:  # the bar's button too, level with the controls
        button = _box(page, "form.filters button[type=submit]")
        assert button["y"] == pytest.approx(_box(page, "select[name=state]")["y"], abs=1)
    page.screenshot(path=str(tmp_path / f"idle-refused-{width}.png"), full_page=True)

    page.goto(f"{live_server.url}/advisor/?team=no-such-team")
    _check_bar(page, "[name=team]", "form.filters select")
    page.screenshot(path=str(tmp_path / f"advisor-refused-{width}.png"), full_page=True)
