"""No table cell's text is cut at the edge of the card that scrolls or clips it, as the demo's
pages open (columns folded on a phone): the admin dashboard's Headroom ("peak 8…") and the
elastic scaling history's Applied ("…Kubernetes conne…") at 1280 px, a request's Decide table
("eligibl") at 390 px. No page scrolled sideways, so the layout test passed; the text ran past
the visible part of the table's scrolling wrapper. Measured in the browser: each cell's text
(``Range.getClientRects``) lies inside every ancestor box that clips or scrolls it."""

from __future__ import annotations

import pytest
from browser_support import count_htmx_requests, log_in, settled
from django.core.management import call_command

pytestmark = pytest.mark.browser

# Cells of tables in <main> with text outside the visible part of the boxes around them that
# clip or scroll (1 px of rounding), or outside the cell itself: text, its right edge and the
# visible right edge.
CLIPPED_CELLS = """() => {
  const width = document.documentElement.clientWidth, found = [];
  const visible = (node) => { let left = 0, right = width;
    for (let el = node.parentElement; el && el !== document.body; el = el.parentElement) {
      if (getComputedStyle(el).overflowX === "visible") continue;
      const r = el.getBoundingClientRect();
      left = Math.max(left, r.left + el.clientLeft);
      right = Math.min(right, r.left + el.clientLeft + el.clientWidth);
    }
    return [left, right]; };
  for (const cell of document.querySelectorAll("main td, main th")) {
    if (!cell.getClientRects().length || !cell.textContent.trim()) continue;  // folded, empty
    const range = document.createRange();
    range.selectNodeContents(cell);
    const boxes = [...range.getClientRects()].filter((r) => r.width > 0);
    if (!boxes.length) continue;
    const [left, right] = visible(cell);
    const box = cell.getBoundingClientRect();
    const textLeft = Math.min(...boxes.map((r) => r.left));
    const textRight = Math.max(...boxes.map((r) => r.right));
    if (textLeft < left - 1 || textRight > Math.min(right, box.right) + 1) {
      found.push([cell.textContent.trim().replace(/\\s+/g, " ").slice(0, 40),
                  Math.round(textRight), Math.round(right)]);
    }
  }
  return found;
}"""


def test_the_check_reports_a_cell_cut_at_its_cards_edge(browser):
    """The check itself: a 600 px table of nowrap cells in a 300 px box that scrolls it puts
    its last cell's text past the box's right edge; the same table whose cells wrap fits."""
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    cells = "<td>Inference (Kubernetes)</td><td>peak 8 / 24 usable, 67% spare</td>"
    page.set_content(
        "<main><div style='overflow-x:auto;width:300px'><table style='border-spacing:0'>"
        f"<tbody><tr>{cells}</tr></tbody></table></div></main>"
        "<style>td{white-space:nowrap;padding:0 4px;font:16px sans-serif}</style>"
    )
    assert [text for text, _, _ in page.evaluate(CLIPPED_CELLS)] == [
        "peak 8 / 24 usable, 67% spare"
    ]
    page.add_style_tag(content="td{white-space:normal !important}")
    assert page.evaluate(CLIPPED_CELLS) == []
    context.close()


def test_the_demos_tables_keep_their_text_inside_their_cards(browser, live_server):
    call_command("load_demo", verbosity=0)
    from pools.capacity.models import CapacityRequest
    from pools.elastic.models import ElasticPolicy

    policy = ElasticPolicy.objects.order_by("pk").first()
    submitted = CapacityRequest.objects.filter(status="submitted").order_by("pk")
    assert submitted.exists()  # a Decide panel to look at
    pages = {
        1280: ["/dashboard/", f"/elastic/{policy.pk}/", "/teams/nlp/dashboard/"],
        390: [*(f"/requests/{r.pk}/" for r in submitted), "/dashboard/", "/teams/nlp/dashboard/"],
    }
    cut = []
    for width, paths in pages.items():
        context = browser.new_context(viewport={"width": width, "height": 900})
        count_htmx_requests(context)
        page = context.new_page()
        log_in(page, live_server.url, "admin")
        for path in paths:
            assert page.goto(f"{live_server.url}{path}").status == 200, path
            settled(page)
            cut += [(width, path, *cell) for cell in page.evaluate(CLIPPED_CELLS)]
        context.close()
    assert cut == []
