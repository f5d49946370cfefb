"""The web pages' routes and the demo paths that open them, for the tests that walk every page:
the page sweep (``tests/portal/test_page_probing.py``: no 500, no write on a refusal) and the
phone layout test (``tests/browser/test_layout.py``: no page wider than the screen). Both read
the routes from the URL configuration (:func:`routes`) and fail on a route nobody listed, so a
new page is added here once.

A path's ``{name}`` is filled by the test with the demo's objects: ``{team}`` (a team's slug),
``{allocation}``, ``{request}``, ``{estimate}``, ``{budget}``, ``{burst}`` (a burst opt-in),
``{elastic}`` (an elastic policy), ``{maintenance}``, ``{upload}`` (an inventory upload),
``{override}``, ``{idle}`` (an idle finding), ``{advisor}`` (an advisor finding). Where the two
tests open a route differently (a cluster with pools or without, a page with or without its
query), each says so in its own table; everything else is here.
"""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, get_resolver

# Route -> the path a GET opens, a page a person looks at.
PAGES = {
    "": "/",
    "nodes/": "/nodes/",
    "nodes/<str:hostname>/": "/nodes/trn-a100-01/",
    "gpus/": "/gpus/",
    "gpu-models/": "/gpu-models/",
    "gpu-models/new/": "/gpu-models/new/",
    "gpu-models/<slug:slug>/edit/": "/gpu-models/h100_sxm/edit/",
    "pools/": "/pools/",
    "pools/<slug:pool>/<slug:model>/calendar/": "/pools/infer-k8s/l40s/calendar/",
    "driver-groups/<int:branch>/calendar/": "/driver-groups/550/calendar/",
    "clusters/": "/clusters/",
    "clusters/new/": "/clusters/new/",
    "clusters/<slug:slug>/edit/": "/clusters/slurm-legacy/edit/",
    "maintenance/": "/maintenance/",  # the demo's driver-upgrade waves
    "maintenance/new/": "/maintenance/new/",
    "maintenance/waves/": "/maintenance/waves/",
    "maintenance/<int:pk>/": "/maintenance/{maintenance}/",  # wave 1, with its sibling waves
    "maintenance/<int:pk>/cancel/": "/maintenance/{maintenance}/cancel/",
    "classes/": "/classes/",  # the demo's classes and the cards they hold
    "overrides/": "/overrides/",  # the demo's override in force
    "overrides/new/": "/overrides/new/",
    "unrecognised-models/": "/unrecognised-models/",
    "inventory/import/": "/inventory/import/",
    "inventory/uploads/<int:pk>/": "/inventory/uploads/{upload}/",  # a background import, done
    "scheduler/drift/": "/scheduler/drift/",
    "idle/": "/idle/",
    "idle/policies/": "/idle/policies/",
    "elastic/": "/elastic/",
    "advisor/": "/advisor/",  # the demo's findings (six rules)
    "allocations/<int:pk>/findings/": "/allocations/{allocation}/findings/",
    "teams/<slug:slug>/findings/": "/teams/{team}/findings/",
    "elastic/<int:pk>/": "/elastic/{elastic}/",
    "elastic/burst/": "/elastic/burst/",  # the demo team's opt-in, with its price
    "elastic/burst/<int:pk>/opt-out/": "/elastic/burst/{burst}/opt-out/",
    "teams/mine/": "/teams/mine/",
    "requests/": "/requests/",
    "requests/new/": "/requests/new/",
    "requests/queue/": "/requests/queue/",
    "requests/<int:pk>/": "/requests/{request}/",
    "requests/<int:pk>/explanation/": "/requests/{request}/explanation/",
    "requests/explain/": "/requests/explain/",
    "allocations/": "/allocations/",
    "allocations/<int:pk>/serving/": "/allocations/{allocation}/serving/",
    # what it serves: the linked estimate, and the form a manager links another with
    "allocations/<int:pk>/serving/estimate/": "/allocations/{allocation}/serving/estimate/",
    "timeline/": "/timeline/",
    "sizing/": "/sizing/",
    "sizing/estimates/": "/sizing/estimates/",
    "sizing/estimates/<int:pk>/": "/sizing/estimates/{estimate}/",
    "costs/": "/costs/",
    "costs/budgets/": "/costs/budgets/",  # the demo team near its budget
    "costs/budgets/new/": "/costs/budgets/new/",
    "costs/budgets/<int:pk>/edit/": "/costs/budgets/{budget}/edit/",
    "costs/finance/<str:month>/": "/costs/finance/2026-10/",
    "costs/<slug:team>/<str:month>/": "/costs/{team}/2026-10/",
    "costs/token-flow/<slug:team>/": "/costs/token-flow/{team}/",  # demo agent tasks, retries
    "dashboard/": "/dashboard/",  # with stranded capacity, forecast and heatmap
    "teams/<slug:slug>/dashboard/": "/teams/{team}/dashboard/",
    "teams/<slug:slug>/waiting/": "/teams/{team}/waiting/",  # Slurm and Kueue waiting work
    "teams/<slug:slug>/calendar/": "/teams/{team}/calendar/",  # the demo's secret feed link
}

# Route -> (the path the sweep sends to, why it is not a page to look at): forms' targets and
# answers that are not HTML pages. The sweep sends them garbage; the layout test skips them.
ACTIONS = {
    "clusters/<slug:slug>/check/": (
        "/clusters/slurm-legacy/check/",
        "POST only (checks the connection now)",
    ),
    "overrides/<int:pk>/cancel/": (
        "/overrides/{override}/cancel/",
        "POST only (the list's End now button)",
    ),
    "idle/scan/": ("/idle/scan/", "POST only"),
    "idle/<int:pk>/<str:action>/": ("/idle/{idle}/exempt/", "POST only"),
    "advisor/run/": ("/advisor/run/", "POST only (queues an advisor pass)"),
    "advisor/digest/": ("/advisor/digest/", "POST only"),
    "advisor/<int:pk>/<str:action>/": ("/advisor/{advisor}/dismiss/", "POST only"),
    "requests/<int:pk>/<str:action>/": ("/requests/{request}/approve/", "POST only"),
    "allocations/<int:pk>/<str:action>/": ("/allocations/{allocation}/extend/", "POST only"),
    "sizing/save/": ("/sizing/save/", "POST only"),
    "costs/budgets/<int:pk>/delete/": (
        "/costs/budgets/{budget}/delete/",
        "POST only (the edit page's button)",
    ),
    "dashboard/stranded/recompute/": (
        "/dashboard/stranded/recompute/",
        "POST only (queues the stranded snapshot)",
    ),
    "teams/suggest/": (
        "/teams/suggest/",
        "the team pickers' <option>s (an htmx fragment for their datalist)",
    ),
    "teams/<slug:slug>/calendar/<str:action>/": (
        "/teams/{team}/calendar/reset/",
        "POST only (make or reset the feed link)",
    ),
    "teams/<slug:slug>/calendar.ics": (
        "/teams/{team}/calendar.ics",
        "the team's iCalendar feed (text/calendar)",
    ),
    "calendar/<str:token>.ics": (
        "/calendar/no-such-token.ics",
        "the team's iCalendar feed at its secret link (text/calendar)",
    ),
}


def routes(resolver=None, prefix: str = ""):
    """Every route of the URL configuration, as its pattern's text (``"nodes/<str:hostname>/"``),
    included ones with their prefix."""
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            yield from routes(entry, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern)
