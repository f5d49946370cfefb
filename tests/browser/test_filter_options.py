"""A filter bar's multi-select (the status of requests and allocations, the shared bar
``includes/filters.html``) shows each option whole: at 390 px the requests' status list was a
half-row box 178 px wide that cut "Accepted: capacity planned" after "capacity pl" (and after
"capacity" at 1280). Measured in Chromium at a phone's and a laptop's width; screenshots under
the test's tmp_path."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

# The options of the filter bar's multi-selects whose text is wider than the room inside their
# box (its width inside the border and scroll bar, less its own and the option's padding), in
# the select's font.
CLIPPED_OPTIONS = """() => {
  const ctx = document.createElement("canvas").getContext("2d");
  const px = (style, side) => parseFloat(style[`padding${side}`]) || 0;
  return [...document.querySelectorAll("form.filters select[multiple]")].flatMap((select) => {
    const style = getComputedStyle(select);
    ctx.font = style.font;
    return [...select.options].flatMap((option) => {
      const own = getComputedStyle(option);
      const room = select.clientWidth - px(style, "Left") - px(style, "Right")
        - px(own, "Left") - px(own, "Right");
      const text = Math.ceil(ctx.measureText(option.text).width);
      return text > room ? [`${select.name}: ${option.text} (${text} px in ${room} px)`] : [];
    });
  }); }"""
# The tops of the filter bar's fields: one value, one row.
BAR_ROWS = """() => new Set([...document.querySelectorAll("form.filters > label")]
  .map((label) => Math.round(label.getBoundingClientRect().top))).size"""


@pytest.mark.parametrize("width,height", [(390, 844), (1280, 900)])
@pytest.mark.parametrize("path", ["/requests/", "/allocations/"])
def test_a_filter_bars_multi_select_shows_its_options_whole(
    signed_in, live_server, tmp_path, path, width, height
):
    page = signed_in
    page.set_viewport_size({"width": width, "height": height})

    page.goto(f"{live_server.url}{path}")

    assert page.locator("form.filters select[multiple]").count() == 1
    page.screenshot(path=str(tmp_path / f"{path.strip('/')}-{width}.png"))
    assert page.evaluate(CLIPPED_OPTIONS) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    if width == 1280:  # the wider status list does not push "Per page" onto a row of its own
        assert page.evaluate(BAR_ROWS) == 1
