"""No number, unit or word cut in two by a line break: the advisor's evidence ("19 385 MiB",
"1 467.9 tok/s", no-break spaces inside) at a laptop's width as a member sees it (a narrower
evidence column than a pool admin's), and the elastic history's Why column on a phone
("handed back", "guaranteed", "(Kubernetes)"). Measured in the browser: a run of text between
ordinary spaces that wraps has more than one line box (``Range.getClientRects``)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from browser_support import DEMO_PASSWORD, log_in
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


# Each part of an identifier between its break points (|break_at_marks puts a <wbr> there, so
# each part is a text node of its own) laid out on one line; the parts that are not.
SPLIT_PARTS = """(selector) => {
  const split = [];
  for (const el of document.querySelectorAll(selector)) {
    if (!el.getClientRects().length) continue;  // a folded column
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const range = document.createRange();
      range.selectNodeContents(node);
      const tops = new Set([...range.getClientRects()].filter(r => r.width > 0)
                                                     .map(r => Math.round(r.top)));
      if (tops.size > 1) split.push(node.data);
    }
  }
  return split;
}"""


def test_identifiers_wrap_at_their_marks_or_not_at_all(browser, live_server, tmp_path):
    """At 390 px, GPU UUIDs and a node's labels (``nvidia.com/gpu.product``), a drift's subject
    and waiting work's references and reason codes wrap only at a dot, hyphen, slash, colon,
    underscore or equals sign, never inside ``product`` or ``AssocGrpGRES``; no page is wider
    than the screen (a table scrolls instead)."""
    from factories import (
        MembershipFactory,
        PendingWorkFactory,
        SchedulerDriftFactory,
        TeamFactory,
        UserFactory,
        node_with_gpus,
    )

    node = node_with_gpus(4, hostname="gpu-node-with-a-long-name-017")
    node.labels = {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "nvidia.com/gpu.deploy.container-toolkit": "true",
        "feature.node.kubernetes.io/pci-10de.present": "true",
    }
    node.save(update_fields=["labels"])
    SchedulerDriftFactory(subject="account nlp-research GrpTRES gres/gpu:a100_80g_sxm")
    team = TeamFactory(slug="nlp-research")
    PendingWorkFactory(team=team, ref="4125", reason_code="AssocGrpGRESRunMinutes")
    PendingWorkFactory(
        team=team, scheduler="kubernetes", ref="team-nlp-research/job-nvl-8gpu-6e6e2",
        reason_code="TopologyPlacementFailed", kind="topology", queue="default",
    )  # fmt: skip
    admin = UserFactory(username="admin", is_staff=True, password=DEMO_PASSWORD)
    MembershipFactory(team=team, user=admin)

    context, page = _sign_in(browser, live_server, "admin", 390, 844)
    split, seen = {}, []
    for path in (
        f"/nodes/{node.hostname}/",
        "/gpus/",
        "/scheduler/drift/",
        f"/teams/{team.slug}/waiting/",
    ):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
        for summary in page.locator("main details > summary").all():
            summary.click()  # the node's labels
        for unfold in page.get_by_text("Show all").all():
            unfold.click()  # every column of a table folded to its key columns
        seen += page.locator("code.ident").all_inner_texts()
        page.screenshot(path=str(tmp_path / f"{path.strip('/').replace('/', '-')}-390.png"),
                        full_page=True)  # fmt: skip
        split[path] = page.evaluate(SPLIT_PARTS, "code.ident")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390, path
    context.close()
    assert {"nvidia.com/gpu.product", "AssocGrpGRESRunMinutes"} <= set(seen)
    assert {path: parts for path, parts in split.items() if parts} == {}
