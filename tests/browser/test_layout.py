"""No page is wider than the screen, on a phone (390 × 844) and a laptop (1366 × 900), with the
demo's data (issue #21): tables scroll inside their card, the navigation folds behind *Menu*.

The pages are read from the URL configuration, not listed by hand: every route is either opened
here (``PAGES`` says with which arguments, ``VARIANTS`` adds states of a page worth a look) or
named in ``NOT_PAGES`` with the reason, so a new page that nobody added fails the first test.

On a phone every table keeps its columns marked ``data-essential`` in view (issue #37): a table
that does not fit shows its essential columns and the button that unfolds the rest
(static/js/portal.js), or is stacked as cards with every cell in view; ``TABLE_CHECK`` reports a
table that hides an essential column, or hides any column without that cue."""

from __future__ import annotations

from pathlib import Path

import pytest
from browser_support import count_htmx_requests, log_in, settled
from django.core.management import call_command
from pages_support import ACTIONS
from pages_support import PAGES as SHARED_PAGES
from pages_support import routes as all_routes

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]

# Each page's route and the path opened for it (tests/pages_support.py; {name}: the demo's ids,
# _demo_ids). Chosen here: the cluster that holds pools, and the live panel with a request.
PAGES = {
    **SHARED_PAGES,
    # the demo's training cluster holds pools: the page lists them and offers no delete
    "clusters/<slug:slug>/delete/": "/clusters/env-slurm/delete/",
    # the form's live panel opened directly: a page of its own (30 L40S, more than are free)
    "requests/explain/": "/requests/explain/?{explain_fields}",
    "api/docs/": "/api/docs/",
    "login/": "/login/",  # opened signed in: the form, with the navigation
}
VARIANTS = [
    # a what-if done (its totals and the chart's line), one still queued (the progress), and a
    # reclamation what-if (failed in the demo: no Prometheus)
    "/elastic/{elastic}/?whatif={elastic_whatif}",
    "/elastic/{elastic}/?whatif={elastic_whatif_queued}",
    "/idle/policies/?pool=infer-k8s&whatif={reclamation_whatif}",
    "/idle/policies/?pool=infer-k8s&whatif={reclamation_whatif_done}",  # its table
    "/nodes/?pool=train-slurm&ordering=-gpus",
    "/allocations/?status=active",
    "/pools/infer-k8s/l40s/calendar/?month=",  # the month view
    "/driver-groups/550/calendar/?month=",
    "/advisor/?severity=critical&ordering=team",
    "/allocations/{allocation}/serving/?span=7d",
    "/clusters/k8s-rented/delete/",  # a cluster without pools: the confirmation
    # the request panel with a shape: per pool and model whether it fits (issue #20)
    "/requests/new/?workload_kind=inference&gpu_model=l40s&card_count=8&cards_per_node=4"
    "&node_count=2&one_nvlink_domain=on&pool=infer-k8s",
    # capacity to add, prefilled as the sizing page links it
    "/requests/new/?workload_kind=inference&kind=growth&gpu_model=h100_nvl&card_count=6",
    "/sizing/?model=llama3_70b&precision=BF16&kv_cache_dtype=FP16&engine=vllm&input_len=1000"
    "&output_len=200&demand_kind=output_rate&output_tok_s=2000&prompt_cache_hit_rate=0"
    "&input_weight=0.5&tpot_target_ms=50&ttft_target_ms=2000&seed_per_card_tok_s=60",
]
# Routes that are not pages a person opens, and why.
NOT_PAGES = {
    **{route: why for route, (_path, why) in ACTIONS.items()},
    "healthz": "probe, plain text",
    "readyz": "probe, plain text",
    "healthz/deep": "JSON for pool admins and their monitoring (services and the outbox)",
    "metrics": "Prometheus exposition, plain text",
    "logout/": "POST only",
    "api/schema/": "the OpenAPI document (YAML)",
    "start/": "a redirect by role (after sign-in): to Fleet or My teams",
}
NOT_PAGE_PREFIXES = (
    "admin/",  # Django's admin: its own stylesheet, not the portal's layout
    "api/v1/",  # JSON
)
WIDTHS = [(390, 844), (1366, 900)]

# What a phone hides, per visible table in <main>: essential columns (data-essential on the last
# header row's cell) out of view — header or first full body row, or in a stacked table (header
# not displayed) the body cell — and, for a table that hides any column, whether the "Show all"
# cue is in view right before it. A cell is in view when it has a size and lies inside the
# viewport's width and inside the visible part of every box around the table that clips or
# scrolls it (1 px of rounding either side): a folded table 7 px wider than its card cut off the
# edge of its last kept column.
TABLE_CHECK = """() => {
  const width = document.documentElement.clientWidth, found = [];
  const visible = (table) => { let left = 0, right = width;
    for (let el = table; el && el !== document.body; el = el.parentElement) {
      if (getComputedStyle(el).overflowX === "visible") continue;
      const r = el.getBoundingClientRect();
      left = Math.max(left, r.left + el.clientLeft);
      right = Math.min(right, r.left + el.clientLeft + el.clientWidth);
    }
    return [left, right]; };
  for (const table of document.querySelectorAll("main table")) {
    const head = table.tHead && table.tHead.rows[table.tHead.rows.length - 1];
    if (!table.offsetParent || !head) continue;
    const [left, right] = visible(table);
    const inView = (el) => { const r = el.getBoundingClientRect();
      return r.width > 0 && r.height > 0 && r.left >= left - 1 && r.right <= right + 1; };
    const stacked = getComputedStyle(table.tHead).display === "none";
    const heads = [...head.cells];
    const row = [...table.tBodies].flatMap((b) => [...b.rows])
      .find((r) => r.cells.length === heads.length);
    const label = (i) => heads[i].textContent.trim() || `column ${i + 1}`;
    const essential = heads.map((h, i) => (h.hasAttribute("data-essential") ? i : -1))
      .filter((i) => i >= 0);
    const essentialHidden = essential
      .filter((i) => (!stacked && !inView(heads[i])) || (row && !inView(row.cells[i])));
    const hidden = stacked ? [] : heads.filter((h) => !inView(h));
    const cue = table.previousElementSibling;
    const cued = Boolean(cue && cue.matches(".cols-cue") && inView(cue));
    if (essentialHidden.length || (hidden.length && !cued)) {
      found.push({ table: heads.map((h) => h.textContent.trim()).join(" | ").slice(0, 80),
                   essential_hidden: essentialHidden.map(label),
                   hidden_without_cue: hidden.length > 0 && !cued });
    }
  }
  return found;
}"""


def test_every_route_is_opened_or_named_as_not_a_page(db):
    routes = {r for r in all_routes() if not r.startswith(NOT_PAGE_PREFIXES)}

    assert sorted(routes - set(PAGES) - set(NOT_PAGES)) == []  # a new page: add it to PAGES
    assert sorted((set(PAGES) | set(NOT_PAGES)) - routes) == []  # a route that is gone


def _demo_ids() -> dict[str, int | str]:
    from django.contrib.auth import get_user_model

    from billing.budgets.models import Budget
    from pools.capacity.models import CapacityRequest
    from pools.elastic.models import BurstOptIn, ElasticPolicy
    from pools.maintenance.models import MaintenanceWindow
    from pools.serving.models import ServingRollup
    from pools.sizing.services import PAGE_INITIAL, sizing_estimate_create, sizing_estimate_run

    admin = get_user_model().objects.get(username="admin")
    estimate = sizing_estimate_create(actor=admin, inputs=dict(PAGE_INITIAL))
    sizing_estimate_run(estimate_id=estimate.pk)  # done, with results (as after the job)
    from pools.inventory.services.uploads import inventory_upload_queue, inventory_upload_run

    capture = ROOT / "tests" / "fixtures" / "nvidia-smi" / "linux-x86_64__nvidia-l40s__595.80.txt"
    upload = inventory_upload_queue(
        data=capture.read_bytes(), source="nvidia-smi", node="layout-l40s-01", actor=admin,
        filename=capture.name,
    )  # fmt: skip
    inventory_upload_run(upload_id=upload.pk)  # done, with its report
    from pools.elastic.models import ElasticWhatIf
    from pools.elastic.services import elastic_whatif_queue
    from pools.inventory.models import Pool
    from pools.reclamation.services.whatif import reclamation_whatif_queue

    policy = ElasticPolicy.objects.order_by("pk").first()
    whatif = elastic_whatif_queue(policy=policy, actor=admin, days=7)  # run eagerly: done
    queued = ElasticWhatIf.objects.create(policy=policy, params={"days": 7, "fields": {}})
    infer = Pool.objects.get(slug="infer-k8s")
    reclaim = reclamation_whatif_queue(pool=infer, actor=admin)
    from pools.capacity.models import Allocation
    from pools.reclamation.models import ReclamationWhatIf

    held = Allocation.objects.filter(pool=infer).select_related("team").order_by("pk")[:3]
    row = {"first_idle": "2026-12-01T10:00:00+00:00", "would_reclaim_at": None,
           "cards_reclaimed": 0, "card_hours_freed": 0.0, "findings": 1, "note": ""}  # fmt: skip
    reclaimed = ReclamationWhatIf.objects.create(
        pool=infer, params={"days": 7, "overrides": {}}, status="done", progress=100,
        result={"start": "2026-11-28T12:00:00+00:00", "end": "2026-12-05T12:00:00+00:00",
                "step_minutes": 60, "policy": {}, "findings": len(held), "reclaimed": 0,
                "cards_reclaimed": 0, "card_hours_freed": 0.0,
                "rows": [{**row, "allocation": a.pk, "team": a.team.slug,
                          "card_count": a.card_count} for a in held]},
    )  # fmt: skip
    from datetime import timedelta
    from urllib.parse import urlencode

    from django.utils import timezone

    start = (timezone.localtime() + timedelta(days=7)).replace(hour=9, minute=0)
    explain_fields = urlencode(
        {"team": "nlp", "kind": "cards", "workload_kind": "inference", "pool": "infer-k8s",
         "gpu_model": "l40s", "card_count": 30, "starts_at": f"{start:%Y-%m-%dT%H:%M}",
         "ends_at": f"{start + timedelta(hours=3):%Y-%m-%dT%H:%M}"}
    )  # fmt: skip
    return {
        "explain_fields": explain_fields,
        "request": CapacityRequest.objects.order_by("pk").first().pk,
        "elastic": policy.pk,
        "elastic_whatif": whatif.pk,
        "elastic_whatif_queued": queued.pk,
        "reclamation_whatif": reclaim.pk,
        "reclamation_whatif_done": reclaimed.pk,
        "burst": BurstOptIn.objects.order_by("pk").first().pk,
        "estimate": estimate.pk,
        "upload": upload.pk,
        "budget": Budget.objects.order_by("pk").first().pk,
        "maintenance": MaintenanceWindow.objects.order_by("pk").first().pk,
        "team": "nlp",
        # the team's allocation with recorded serving series: its findings and serving panel
        "allocation": ServingRollup.objects.filter(allocation__team__slug="nlp")
        .first()
        .allocation_id,
    }


def test_no_page_scrolls_sideways_and_the_menu_opens_on_a_phone(browser, live_server):
    call_command("load_demo", verbosity=0)
    call_command("load_demo_billing", verbosity=0)
    ids = _demo_ids()

    pages = [path.format(**ids) for path in [*PAGES.values(), *VARIANTS]]
    too_wide, hides, opened = [], [], 0
    for width, height in WIDTHS:
        context = browser.new_context(viewport={"width": width, "height": height})
        count_htmx_requests(context)
        page = context.new_page()
        page.goto(f"{live_server.url}/login/")
        if page.evaluate("document.documentElement.scrollWidth") > width:
            too_wide.append((width, "/login/ (signed out)"))
        log_in(page, live_server.url, "admin")
        for path in pages:
            response = page.goto(f"{live_server.url}{path}")
            assert response.status == 200, path
            settled(page)
            scroll_width = page.evaluate("document.documentElement.scrollWidth")
            opened += 1
            if scroll_width > width:
                too_wide.append((width, path, scroll_width))
            if width < 768:
                hides.extend((path, t) for t in page.evaluate(TABLE_CHECK))
        menu = page.get_by_role("button", name="Menu")
        page.goto(f"{live_server.url}/")
        if width < 768:
            assert not page.locator("#site-links").is_visible()
            menu.click()
            assert page.get_by_role("link", name="Request GPUs").is_visible()
        else:
            assert not menu.is_visible()  # the links themselves are in the bar
            assert page.get_by_role("link", name="Request GPUs").is_visible()
        context.close()

    assert too_wide == []
    assert hides == []  # mark the table's key columns data-essential; keep them in view
    assert opened == 2 * (len(PAGES) + len(VARIANTS))


def test_the_phone_check_reports_a_table_that_hides_an_essential_column(browser):
    """The check itself: a 10-column table of nowrap cells (each about 120 px) at 390 px puts its
    last column near x = 1100, out of view; it is essential, and nothing says columns are hidden.
    The same table with that column first, and the others folded, passes; one whose kept
    columns are a few pixels wider than the card that scrolls it does not."""
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    heads = "".join(f"<th>Column {i}</th>" for i in range(1, 10))
    cells = "".join(f"<td>value {i}</td>" for i in range(1, 10))
    style = "<style>td,th{white-space:nowrap;min-width:120px}</style>"
    page.set_content(
        f"{style}<main><div style='overflow-x:auto'><table><thead><tr>{heads}"
        "<th data-essential>Amount</th></tr></thead>"
        f"<tbody><tr>{cells}<td>12.00 EUR</td></tr></tbody></table></div></main>"
    )
    assert page.evaluate(TABLE_CHECK) == [
        {
            "table": " | ".join([*(f"Column {i}" for i in range(1, 10)), "Amount"])[:80],
            "essential_hidden": ["Amount"],
            "hidden_without_cue": True,
        }
    ]
    page.set_content(
        "<main><button class='cols-cue'>1 of 10 columns shown · Show all 10</button>"
        "<table><thead><tr><th data-essential>Amount</th>"
        f"{heads.replace('<th>', '<th hidden>')}</tr></thead>"
        f"<tbody><tr><td>12.00 EUR</td>{cells.replace('<td>', '<td hidden>')}</tr></tbody>"
        "</table></main>"
    )
    assert page.evaluate(TABLE_CHECK) == []
    # folded to its two kept columns, 307 px in a 300 px card that scrolls it: the essential
    # Amount's last 7 px are cut off although the window is wider (the dashboard's stranded table)
    page.set_content(
        "<main><button class='cols-cue'>2 of 3 columns shown · Show all 3</button>"
        "<table style='display:block;overflow-x:auto;width:300px;border-spacing:0'><thead><tr>"
        "<th data-essential style='min-width:200px'>Pool</th><th hidden>Cards</th>"
        "<th data-essential style='min-width:107px;white-space:nowrap'>Amount</th></tr></thead>"
        "<tbody><tr><td>train</td><td hidden>8</td><td>12.00 EUR</td></tr></tbody></table></main>"
    )
    assert page.evaluate(TABLE_CHECK) == [
        {"table": "Pool | Cards | Amount", "essential_hidden": ["Amount"],
         "hidden_without_cue": False}
    ]  # fmt: skip
    context.close()


def test_a_phone_table_folds_to_its_key_columns_and_unfolds_on_request(browser, live_server):
    """The queue at 390 px shows its five essential columns (#, Team, Cards, Could approve now,
    Decide) of eleven, the cue says so, and "Show all 11" unfolds the six others; at 1366 px
    every column of the queue, Decide included, lies inside the window."""
    call_command("load_demo", verbosity=0)
    for width, height in WIDTHS:
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        log_in(page, live_server.url, "admin", next_path="/requests/queue/")
        shown = "main table thead th:visible"
        if width < 768:
            cue = page.locator(".cols-cue")
            assert cue.inner_text() == "5 of 11 columns shown · Show all 11"
            assert page.locator(shown).all_inner_texts() == [
                "#", "Team", "Cards", "Could approve now", "Decide",
            ]  # fmt: skip
            cue.click()
            assert page.locator(shown).count() == 11
            assert cue.inner_text() == "Show the 5 key columns"
        else:
            assert not page.locator(".cols-cue").is_visible()
            box = page.locator("main table thead th.decide").bounding_box()
            assert page.locator(shown).count() == 11
            assert 0 <= box["x"] and box["x"] + box["width"] <= width
            assert page.evaluate(TABLE_CHECK) == []
        context.close()


def test_a_phone_reaches_a_page_inside_a_menu_group(signed_in, live_server):
    """On a phone the groups (Capacity, Inventory) open inside the folded menu and their links
    take a tap: Pico's full-screen catcher of an open dropdown must not swallow it."""
    page = signed_in
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/")
    page.get_by_role("button", name="Menu").click()
    page.locator("header summary", has_text="Capacity").click()
    page.locator("header").get_by_role("link", name="Idle GPUs", exact=True).click(timeout=5000)
    page.wait_for_url(f"{live_server.url}/idle/")
