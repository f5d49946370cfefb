"""No number, unit or word cut in two by a line break: the advisor's evidence ("19 385 MiB",
"1 467.9 tok/s", no-break spaces inside) at a laptop's width as a member sees it (a narrower
evidence column than a pool admin's), and the elastic history's Why column on a phone
("handed back", "guaranteed", "(Kubernetes)"). Measured in the browser: a run of text between
ordinary spaces that wraps has more than one line box (``Range.getClientRects``)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from browser_support import log_in
from django.core.management import call_command

from pools.elastic.models import ElasticPolicy, ScaleEvent

pytestmark = pytest.mark.browser

# Runs of each matching element's text between ordinary spaces (a no-break space joins), each
# with the lines it is laid out on; runs with a hyphen or slash may break there and are left out.
BROKEN_RUNS = """(selector) => {
  const broken = [];
  for (const el of document.querySelectorAll(selector)) {
    if (!el.getClientRects().length) continue;  // a folded column
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const re = /[^ \\n\\t]+/g;
      let m;
      while ((m = re.exec(node.data))) {
        if (/[-\\/\u2212]/.test(m[0])) continue;
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].filter(r => r.width > 0)
                                                       .map(r => Math.round(r.top)));
        if (tops.size > 1) broken.push(m[0]);
      }
    }
  }
  return broken;
}"""


def _sign_in(browser, live_server, user, width, height):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    log_in(page, live_server.url, user)
    return context, page


def test_evidence_and_why_keep_their_words_whole(browser, live_server, tmp_path):
    call_command("load_demo", verbosity=0)
    context, page = _sign_in(browser, live_server, "alice", 1280, 900)
    page.goto(f"{live_server.url}/advisor/")
    page.wait_for_load_state("networkidle")
    assert page.locator("dl.evidence dd").count() > 10
    page.screenshot(path=str(tmp_path / "advisor-1280.png"), full_page=True)
    assert page.evaluate(BROKEN_RUNS, "dl.evidence dd") == []
    context.close()

    # the demo's newest decision, then a hand-back as the service words it (its message stored)
    policy = ElasticPolicy.objects.get()
    last = policy.events.first()
    ScaleEvent.objects.create(
        policy=policy, decided_at=last.decided_at + timedelta(minutes=1), source="hand_back",
        action="down", reason="hand_back", cards_from=last.cards_to, cards_to=last.cards_to,
        burst_pool=last.burst_pool, burst_cards_to=last.burst_cards_to,
        effective_at=last.decided_at + timedelta(minutes=1),
        message="2 burst card(s) handed back for a guaranteed allocation in Inference "
        "(Kubernetes): 10 -> 8 cards from 2026-12-06 17:22 UTC (notice 0 min)",
    )  # fmt: skip
    context, page = _sign_in(browser, live_server, "admin", 390, 844)
    page.goto(f"{live_server.url}/elastic/{policy.pk}/")
    page.wait_for_load_state("networkidle")
    why = page.locator("[data-why]")
    assert why.first.inner_text().startswith("handed back")
    page.screenshot(path=str(tmp_path / "elastic-390.png"), full_page=True)
    assert page.evaluate(BROKEN_RUNS, "[data-why]") == []
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    context.close()


def test_audit_action_codes_wrap_at_a_dot_or_not_at_all(browser, live_server, tmp_path):
    """Every demo request's audit trail at 390 px: each action code ("request.submitted")
    keeps the words between its dots whole (beside a long Why it read "request.submitt" /
    "ed"), the page no wider than the screen. A wrap at a dot is allowed: the break point
    there (``<wbr>``) starts a text node of its own, so no run spans it."""
    call_command("load_demo", verbosity=0)
    from pools.capacity.models import CapacityRequest

    context, page = _sign_in(browser, live_server, "admin", 390, 844)
    broken, seen = {}, set()
    for pk in CapacityRequest.objects.order_by("pk").values_list("pk", flat=True):
        page.goto(f"{live_server.url}/requests/{pk}/")
        page.wait_for_load_state("networkidle")
        seen.update(page.locator("[data-audit-trail] code").all_inner_texts())
        page.screenshot(path=str(tmp_path / f"request-{pk}-390.png"), full_page=True)
        broken[pk] = page.evaluate(BROKEN_RUNS, "[data-audit-trail] code")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
    context.close()
    assert {"request.submitted", "request.approved", "request.rejected"} <= seen
    assert {pk: runs for pk, runs in broken.items() if runs} == {}
