"""Three things a newcomer saw at 390 px (issue #29), measured in chromium at 390 × 844 and
1366 × 900: the request form's checkboxes sit on their label's first line; the token-flow
table's "< 0.01 EUR" keeps "<" with its number and its cells inside their card; the approval
queue's budget row, with all 11 columns shown, stays readable in the visible width while the
columns scroll. Screenshots go to ``$SCREENSHOT_DIR`` (default: the test's tmp dir)."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from browser_support import log_in
from django.utils import timezone
from factories import CapacityRequestFactory, MembershipFactory
from playwright.sync_api import expect

from billing.choices import RateKind
from billing.services.rates import rate_card_create
from billing.tokenflow.demo import demo_agent_tasks_load
from pools.common.choices import Scheduler
from pools.inventory.models import Pool
from pools.inventory.services.import_files import inventory_import_file
from scheduler_adapters.types import InventorySource

pytestmark = pytest.mark.browser

WIDTHS = [(390, 844), (1366, 900)]
SAME_LINE_PX = 4  # two boxes on one line: their tops within this many pixels

# The text line boxes of an element: [{left, top, right, text}], one per line fragment of each
# text node (a Range over each character, merged by line top).
LINE_BOXES = """(el) => {
  const lines = [];
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.length; i++) {
      if (!node.data[i].trim()) continue;
      const range = document.createRange();
      range.setStart(node, i); range.setEnd(node, i + 1);
      const r = range.getBoundingClientRect();
      let line = lines.find((l) => Math.abs(l.top - r.top) < 3);
      if (!line) { line = {top: r.top, left: r.left, right: r.right, text: ""}; lines.push(line); }
      line.left = Math.min(line.left, r.left); line.right = Math.max(line.right, r.right);
      line.text += node.data[i];
    }
  }
  return lines.sort((a, b) => a.top - b.top);
}"""


@pytest.fixture
def out(tmp_path) -> Path:
    path = Path(os.environ.get("SCREENSHOT_DIR", tmp_path))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def ada(django_user_model):
    """A pool admin (staff) in team nlp, so she may request, decide and see the team's costs."""
    user = MembershipFactory(team__slug="nlp", team__name="NLP", user__username="ada").user
    user.is_staff = True
    user.set_password("pw-ada-123")
    user.save()
    return user


def _signed_in(browser, live_server, width, height):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    log_in(page, live_server.url, "ada", "pw-ada-123")
    return context, page


def test_the_request_forms_checkboxes_sit_on_their_labels_first_line(
    browser, live_server, ada, out
):
    """At 390 px "Groups may share a node (inference replicas)" filled the line and its box
    fell below it (22 px lower); each box now starts its label's first line, left of the text."""
    for width, height in WIDTHS:
        context, page = _signed_in(browser, live_server, width, height)
        page.goto(f"{live_server.url}/requests/new/")
        page.wait_for_load_state("networkidle")
        for name in ("one_nvlink_domain", "shared_nodes"):
            box = page.locator(f"#request-form input[name={name}]")
            check = box.bounding_box()
            lines = box.locator("xpath=ancestor::label").evaluate(LINE_BOXES)
            first = lines[0]
            assert abs(check["y"] - first["top"]) <= SAME_LINE_PX, (width, name, check, lines)
            assert check["x"] + check["width"] <= first["left"], (width, name, check, first)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        page.locator("input[name=shared_nodes]").scroll_into_view_if_needed()
        page.screenshot(path=str(out / f"request-form-{width}.png"))
        context.close()


def test_below_a_cent_keeps_its_sign_with_the_number_inside_its_card(
    browser, live_server, ada, out
):
    """The demo agent tasks: 36 of 48 cost less than a cent at these prices. "<" and "0.01"
    share a line (the currency code may wrap below them), and no cell of the table reaches
    past its card or makes the table scroll sideways."""
    now = timezone.now()
    rate_card_create(name="demo", currency="EUR", effective_from=now.date().replace(day=1, month=1),
                     token_prices={("qwen", RateKind.TOKEN_INPUT): Decimal("0.20"),
                                   ("qwen", RateKind.TOKEN_CACHED_INPUT): Decimal("0.05"),
                                   ("qwen", RateKind.TOKEN_OUTPUT): Decimal("0.60")})  # fmt: skip
    demo_agent_tasks_load(now=now, served="qwen")
    for width, height in WIDTHS:
        context, page = _signed_in(browser, live_server, width, height)
        page.goto(f"{live_server.url}/costs/token-flow/nlp/")
        page.wait_for_load_state("networkidle")
        cells = page.locator("#table td.num", has_text="<")
        assert cells.count() >= 36
        card = page.locator("#table article").bounding_box()
        for index in range(cells.count()):
            cell = cells.nth(index)
            if not cell.is_visible():
                continue  # Wasted, folded behind "Show all" at 390 px
            lines = cell.evaluate(LINE_BOXES)
            assert lines[0]["text"].startswith("<0.01"), (width, lines)
            box = cell.bounding_box()
            assert box["x"] >= card["x"] and box["x"] + box["width"] <= card["x"] + card["width"]
        table = page.locator("#table table")
        assert table.evaluate("t => t.scrollWidth <= t.clientWidth"), width
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        cells.first.scroll_into_view_if_needed()
        page.screenshot(path=str(out / f"token-flow-below-a-cent-{width}.png"))
        context.close()


def test_the_queues_budget_row_stays_in_view_with_every_column_shown(
    browser, live_server, ada, out
):
    """A request over its team's budget: the row under it explains why across the table. With
    all 11 columns shown at 390 px the table scrolls sideways, and the explanation ran 1,043 px
    wide with it; it now wraps within the visible width and stays there while scrolled."""
    reason = ("Beyond the month budget of NLP (all pools and models, 2026-12): 762.90 card-hours "
              "used + 1\u202f343.97 committed to approved allocations + 192.00 requested > 898.00 "
              "card-hours: a pool admin decides.")  # fmt: skip
    CapacityRequestFactory(team=ada.memberships.get().team, card_count=4,
                           budget_verdict="needs_admin", budget_reason=reason,
                           submitted_at=timezone.now() - timedelta(minutes=5))  # fmt: skip
    for width, height in WIDTHS:
        context, page = _signed_in(browser, live_server, width, height)
        page.goto(f"{live_server.url}/requests/queue/")
        page.wait_for_load_state("networkidle")
        if width < 768:
            page.locator(".cols-cue").click()  # Show all 11
            assert page.locator("main table thead th:visible").count() == 11
        table = page.locator("table.queue")
        note = page.locator("tr.queue-budget td > *").first
        assert note.inner_text().endswith("a pool admin decides.")
        scroller = table if width < 768 else page.locator(".table-wrap")
        for scroll in ("start", "end"):
            if scroll == "end":
                scroller.evaluate("s => { s.scrollLeft = s.scrollWidth; }")
            view = scroller.evaluate(
                "s => { const r = s.getBoundingClientRect(); return [r.left, r.right]; }"
            )
            lines = note.evaluate(LINE_BOXES)
            assert lines, width
            for line in lines:  # every line of the text inside the visible width
                assert view[0] - 1 <= line["left"] and line["right"] <= view[1] + 1, (
                    width, scroll, view, line,
                )  # fmt: skip
            page.screenshot(path=str(out / f"queue-budget-{width}-{scroll}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        context.close()


def test_the_request_forms_pool_options_fold_to_their_key_columns_on_a_phone(
    browser, live_server, ada, out
):
    """The panel "Where it can run" is swapped in over htmx as the form changes, its <table>
    the top-level element htmx names: at 390 px it kept all 5 columns and its "Fits?" verdict
    ran past the card's edge. It now folds to Pool, GPU model and Fits? like every phone table,
    the cue button says so, and the verdict sits inside the card; at 1366 px nothing folds."""
    labels = {"gpu-pool.example.com/pool": "inference", "nvidia.com/gpu.product": "NVIDIA-L40S",
              "nvidia.com/gpu.count": "4",
              "nvidia.com/cuda.driver-version.full": "550.54.15"}  # fmt: skip
    nodes = [{"kind": "Node", "metadata": {"name": f"inf-{i}", "labels": labels},
              "status": {"allocatable": {"nvidia.com/gpu": "4"},
                         "conditions": [{"type": "Ready", "status": "True"}]}}
             for i in range(2)]  # fmt: skip
    Pool.objects.create(slug="infer", name="Inference", scheduler=Scheduler.KUBERNETES,
                        k8s_node_selector={"gpu-pool.example.com/pool": "inference"})  # fmt: skip
    inventory_import_file(data=json.dumps({"kind": "NodeList", "items": nodes}).encode(),
                          source=InventorySource.KUBERNETES)  # fmt: skip
    for width, height in WIDTHS:
        context, page = _signed_in(browser, live_server, width, height)
        page.goto(f"{live_server.url}/requests/new/")
        page.check("input[value=inference]")
        page.select_option("select[name=gpu_model]", "l40s")
        verdict = page.locator("#options tbody tr").first.locator("td").last
        expect(verdict).to_contain_text("eligible")
        page.wait_for_load_state("networkidle")
        table = page.locator("#options table")
        shown = table.locator("thead th:visible")
        if width < 768:
            expect(page.locator("#options .cols-cue")).to_have_text(
                "3 of 5 columns shown · Show all 5"
            )
            assert shown.all_inner_texts() == ["Pool", "GPU model", "Fits?"]
        else:
            expect(page.locator("#options .cols-cue")).to_be_hidden()
            assert shown.count() == 5
        card = page.locator("#options").locator("xpath=ancestor::article").bounding_box()
        box = verdict.bounding_box()
        assert box["x"] + box["width"] <= card["x"] + card["width"], (width, box, card)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        table.scroll_into_view_if_needed()
        page.screenshot(path=str(out / f"request-form-options-{width}.png"))
        context.close()
