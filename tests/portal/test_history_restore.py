"""htmx's history restore gets the whole page (``portal.middleware.HtmxMiddleware``).

Back or Forward to an address htmx pushed (a list's filters, the dashboard's) whose page htmx
no longer holds in its history cache asks the server again with ``HX-Request: true`` and
``HX-History-Restore-Request: true``, and puts the answer in place of the whole ``<body>``. The
views answered it as any htmx request, with their fragment: a page without its layout."""

from __future__ import annotations

import pytest
from django.http import HttpResponse
from django.utils.cache import has_vary_header
from factories import SizingEstimateFactory, TeamFactory

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
RESTORE = {**HTMX, "HTTP_HX_HISTORY_RESTORE_REQUEST": "true"}
LAYOUT = '<header class="site">'

# Every kind of page that answers htmx with a fragment of itself (grep ``request.htmx``), each
# by an address that gives one; {estimate} filled in below.
FRAGMENT_PAGES = [
    "/gpus/?health=ok",  # pools.web.pages.filtered_list: every filtered list
    "/requests/?status=submitted",
    "/dashboard/?driver_branch=",
    "/teams/nlp/dashboard/",
    "/costs/token-flow/nlp/?ordering=-calls",
    "/pools/?cuda=12.4",
    "/requests/new/?team=nlp",
    "/sizing/estimates/{estimate}/",
    "/teams/nlp/findings/",
]


@pytest.fixture
def estimate(pool_admin):
    team = TeamFactory(slug="nlp")
    return SizingEstimateFactory(created_by=pool_admin, team=team).pk


@pytest.mark.parametrize("url", FRAGMENT_PAGES)
def test_a_history_restore_gets_the_whole_page_where_htmx_gets_a_fragment(
    admin_page, estimate, url
):
    url = url.format(estimate=estimate)

    fragment = admin_page.get(url, **HTMX)
    restored = admin_page.get(url, **RESTORE)

    assert fragment.status_code == restored.status_code == 200
    assert "<html" not in fragment.content.decode()
    html = restored.content.decode()
    assert "<html" in html and LAYOUT in html
    if has_vary_header(fragment, "HX-Request"):  # a cache keeps the two answers apart
        assert has_vary_header(restored, "HX-History-Restore-Request")


def test_a_refused_filter_restored_is_the_whole_page_with_the_refusal(admin_page, estimate):
    """A list under a filter it refuses answers 400 (htmx does not swap that in on a cache
    miss: static/js/portal.js then reloads the page); the page, not the table."""
    restored = admin_page.get("/requests/", {"team": "no-such"}, **RESTORE)

    assert restored.status_code == 400
    html = restored.content.decode()
    assert LAYOUT in html and 'role="alert"' in html


def test_a_bad_parameter_restored_is_the_whole_400_page(admin_page):
    htmx = admin_page.get("/gpus/", {"page": "abc"}, **HTMX)
    restored = admin_page.get("/gpus/", {"page": "abc"}, **RESTORE)

    assert htmx.status_code == restored.status_code == 400
    assert "<html" not in htmx.content.decode()
    html = restored.content.decode()
    assert LAYOUT in html and 'data-bad-parameter="page"' in html


def test_an_htmx_request_without_the_restore_header_is_still_htmx(rf):
    """``request.htmx`` is django-htmx's otherwise: its other details read as before."""
    from portal.middleware import HtmxMiddleware

    seen = {}

    def view(request):
        seen["htmx"], seen["restore"] = bool(request.htmx), request.htmx.history_restore_request
        seen["target"] = request.htmx.target
        return HttpResponse("")

    HtmxMiddleware(view)(rf.get("/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="table"))
    assert seen == {"htmx": True, "restore": False, "target": "table"}
    HtmxMiddleware(view)(
        rf.get("/", HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true")
    )
    assert seen == {"htmx": False, "restore": True, "target": None}
    HtmxMiddleware(view)(rf.get("/"))
    assert seen == {"htmx": False, "restore": False, "target": None}
