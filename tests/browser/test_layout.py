"""No page is wider than the screen, on a phone (390 × 844) and a laptop (1366 × 900), with the
demo's data (issue #21): tables scroll inside their card, the navigation folds behind *Menu*.

The pages are read from the URL configuration, not listed by hand: every route is either opened
here (``PAGES`` says with which arguments, ``VARIANTS`` adds states of a page worth a look) or
named in ``NOT_PAGES`` with the reason, so a new page that nobody added fails the first test."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import URLPattern, URLResolver, get_resolver

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]

# Each page's route and the path opened for it ({request}, {elastic}, {estimate}: demo ids).
PAGES = {
    "": "/",
    "nodes/": "/nodes/",
    "nodes/<str:hostname>/": "/nodes/trn-a100-01/",
    "gpus/": "/gpus/",
    "gpu-models/": "/gpu-models/",
    "gpu-models/new/": "/gpu-models/new/",
    "gpu-models/<slug:slug>/edit/": "/gpu-models/h100_sxm/edit/",
    "pools/": "/pools/",
    "clusters/": "/clusters/",
    "unrecognised-models/": "/unrecognised-models/",
    "inventory/import/": "/inventory/import/",
    "inventory/uploads/<int:pk>/": "/inventory/uploads/{upload}/",  # a background import, done
    "scheduler/drift/": "/scheduler/drift/",
    "idle/": "/idle/",
    "idle/policies/": "/idle/policies/",
    "elastic/": "/elastic/",
    "advisor/": "/advisor/",  # the demo's findings (six rules)
    "allocations/<int:pk>/findings/": "/allocations/{serving}/findings/",
    "teams/<slug:slug>/findings/": "/teams/nlp/findings/",
    "elastic/<int:pk>/": "/elastic/{elastic}/",
    "teams/mine/": "/teams/mine/",
    "requests/": "/requests/",
    "requests/new/": "/requests/new/",
    "requests/queue/": "/requests/queue/",
    "requests/<int:pk>/": "/requests/{request}/",
    "requests/<int:pk>/explanation/": "/requests/{request}/explanation/",
    "allocations/": "/allocations/",
    "allocations/<int:pk>/serving/": "/allocations/{serving}/serving/",  # recorded demo series
    # what it serves: the linked estimate, and the form a manager links another with
    "allocations/<int:pk>/serving/estimate/": "/allocations/{serving}/serving/estimate/",
    "timeline/": "/timeline/",
    "sizing/": "/sizing/",
    "sizing/estimates/": "/sizing/estimates/",
    "sizing/estimates/<int:pk>/": "/sizing/estimates/{estimate}/",
    "costs/": "/costs/",
    "costs/budgets/": "/costs/budgets/",  # the demo team near its budget
    "costs/budgets/new/": "/costs/budgets/new/",
    "costs/budgets/<int:pk>/edit/": "/costs/budgets/{budget}/edit/",
    "costs/finance/<str:month>/": "/costs/finance/2026-10/",
    "costs/<slug:team>/<str:month>/": "/costs/nlp/2026-10/",
    "costs/token-flow/<slug:team>/": "/costs/token-flow/nlp/",  # demo agent tasks, retries
    "dashboard/": "/dashboard/",  # with stranded capacity, forecast and heatmap
    "teams/<slug:slug>/dashboard/": "/teams/nlp/dashboard/",
    "teams/<slug:slug>/waiting/": "/teams/nlp/waiting/",  # Slurm and Kueue waiting work
    "api/docs/": "/api/docs/",
    "login/": "/login/",  # opened signed in: the form, with the navigation
}
VARIANTS = [
    "/nodes/?pool=train-slurm&ordering=-gpus",
    "/allocations/?status=active",
    "/advisor/?severity=critical&ordering=team",
    "/allocations/{serving}/serving/?span=7d",
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
    "healthz": "probe, plain text",
    "readyz": "probe, plain text",
    "healthz/deep": "JSON for pool admins and their monitoring (services and the outbox)",
    "metrics": "Prometheus exposition, plain text",
    "logout/": "POST only",
    "idle/scan/": "POST only",
    "clusters/<slug:slug>/check/": "POST only (checks the connection now)",
    "dashboard/stranded/recompute/": "POST only (queues the stranded snapshot)",
    "idle/<int:pk>/<str:action>/": "POST only",
    "advisor/run/": "POST only (queues an advisor pass)",
    "advisor/digest/": "POST only",
    "advisor/<int:pk>/<str:action>/": "POST only",
    "requests/<int:pk>/<str:action>/": "POST only",
    "allocations/<int:pk>/<str:action>/": "POST only",
    "sizing/save/": "POST only",
    "costs/budgets/<int:pk>/delete/": "POST only (the edit page's button)",
    "api/schema/": "the OpenAPI document (YAML)",
    "start/": "a redirect by role (after sign-in): to Fleet or My teams",
    "requests/explain/": "the request form's live panel (an htmx fragment; opened in its form)",
}
NOT_PAGE_PREFIXES = (
    "admin/",  # Django's admin: its own stylesheet, not the portal's layout
    "api/v1/",  # JSON
)
WIDTHS = [(390, 844), (1366, 900)]


def _routes(resolver=None, prefix: str = ""):
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            yield from _routes(entry, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern)


def test_every_route_is_opened_or_named_as_not_a_page(db):
    routes = {r for r in _routes() if not r.startswith(NOT_PAGE_PREFIXES)}

    assert sorted(routes - set(PAGES) - set(NOT_PAGES)) == []  # a new page: add it to PAGES
    assert sorted((set(PAGES) | set(NOT_PAGES)) - routes) == []  # a route that is gone


def _demo_ids() -> dict[str, int]:
    from django.contrib.auth import get_user_model

    from billing.budgets.models import Budget
    from pools.capacity.models import CapacityRequest
    from pools.elastic.models import ElasticPolicy
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
    return {
        "request": CapacityRequest.objects.order_by("pk").first().pk,
        "elastic": ElasticPolicy.objects.order_by("pk").first().pk,
        "estimate": estimate.pk,
        "upload": upload.pk,
        "budget": Budget.objects.order_by("pk").first().pk,
        "serving": ServingRollup.objects.filter(allocation__team__slug="nlp").first().allocation_id,
    }


def test_no_page_scrolls_sideways_and_the_menu_opens_on_a_phone(browser, live_server):
    call_command("load_demo", verbosity=0)
    call_command("load_demo_billing", verbosity=0)
    ids = _demo_ids()

    pages = [path.format(**ids) for path in [*PAGES.values(), *VARIANTS]]
    too_wide, opened = [], 0
    for width, height in WIDTHS:
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        page.goto(f"{live_server.url}/login/")
        if page.evaluate("document.documentElement.scrollWidth") > width:
            too_wide.append((width, "/login/ (signed out)"))
        page.fill("input[name=username]", "admin")
        page.fill("input[name=password]", "demo")
        page.click("button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")
        for path in pages:
            response = page.goto(f"{live_server.url}{path}")
            assert response.status == 200, path
            page.wait_for_load_state("networkidle")
            scroll_width = page.evaluate("document.documentElement.scrollWidth")
            opened += 1
            if scroll_width > width:
                too_wide.append((width, path, scroll_width))
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
    assert opened == 2 * (len(PAGES) + len(VARIANTS))
