"""One rule for ``?export=`` on every page that has downloads
(:func:`pools.web.pages.checked_export`): a name the page has not is a 400 naming the ones it
has -- the 400 page for a browser, the same words in plain text for a script -- never the page
itself (a 200 a script saves as its CSV) nor a page chosen quietly. ``?export=`` (empty) is the
page, as ``?page_size=`` is the default size."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from factories import (
    AllocationFactory,
    ElasticPolicyFactory,
    SizingEstimateFactory,
    TeamFactory,
    node_with_gpus,
)

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

# Each page with downloads, by a path template ({team}, {node}, {request}, {elastic},
# {estimate} filled in below), and the downloads it has, written out here by hand from the
# pages' docstrings and templates rather than read from the code.
PAGES = [
    ("/", "csv"),
    ("/nodes/", "csv"),
    ("/nodes/{node}/", "csv"),
    ("/gpus/", "csv"),
    ("/gpu-models/", "csv"),
    ("/pools/", "csv, driver-groups"),
    ("/clusters/", "csv"),
    ("/classes/", "csv"),
    ("/unrecognised-models/", "csv"),
    ("/maintenance/", "csv"),
    ("/overrides/", "csv"),
    ("/scheduler/drift/", "csv"),
    ("/idle/", "csv"),
    ("/idle/policies/", "policies, exemptions, csv"),
    ("/advisor/", "csv"),
    ("/elastic/", "csv"),
    ("/elastic/{elastic}/", "csv"),
    ("/elastic/burst/", "csv"),
    ("/teams/mine/", "allocations, requests"),
    ("/teams/{team}/waiting/", "csv"),
    ("/requests/", "csv"),
    ("/requests/queue/", "csv"),
    ("/requests/{request}/", "audit, request, allocation, scheduler, drifts"),
    ("/allocations/", "csv"),
    ("/timeline/", "csv"),
    ("/sizing/", "csv"),
    ("/sizing/estimates/", "csv"),
    ("/sizing/estimates/{estimate}/", "csv"),
    (
        "/dashboard/",
        "capacity, serving, serving-allocations, stranded, plan, forecast, teams-cards, "
        "teams-cost, alerts, heatmap",
    ),
    ("/teams/{team}/dashboard/", "serving, allocations, spend"),
    ("/costs/budgets/", "csv"),
    ("/costs/token-flow/{team}/", "csv"),
    ("/costs/{team}/2026-10/", "csv, focus, showback, pdf, top"),
    ("/costs/finance/2026-10/", "csv, focus, statements, idle, top, shared"),
]


@pytest.fixture
def world(pool_admin):
    """One of each object a page with downloads is about; the pool admin sees them all."""
    team = TeamFactory(slug="nlp")
    allocation = AllocationFactory(team=team)
    return {
        "team": team.slug,
        "node": node_with_gpus(1, hostname="trn-01").hostname,
        "request": allocation.request_id,
        "elastic": ElasticPolicyFactory(allocation__team=team).pk,
        "estimate": SizingEstimateFactory(created_by=pool_admin, team=team).pk,
    }


@pytest.mark.parametrize(("template", "exports"), PAGES)
def test_an_export_a_page_has_not_is_a_400_naming_those_it_has(
    admin_page, world, template, exports
):
    url = template.format(**world)

    script = admin_page.get(url, {"export": "xyz"})
    browser = admin_page.get(url, {"export": "xyz"}, HTTP_ACCEPT=BROWSER)
    empty = admin_page.get(url, {"export": ""}, HTTP_ACCEPT=BROWSER)

    assert (script.status_code, script["Content-Type"]) == (400, "text/plain; charset=utf-8")
    assert script.content.decode() == f"No export 'xyz' here; export is one of: {exports}.\n"
    assert browser.status_code == 400 and browser["Content-Type"].startswith("text/html")
    html = browser.content.decode()
    assert 'data-bad-parameter="export"' in html and "<html" in html
    assert f"<code>?export=xyz</code> is not one of {exports}." in html
    assert empty.status_code == 200  # no export named: the page


def test_htmx_gets_the_message_alone(admin_page, world):
    response = admin_page.get("/nodes/", {"export": "xyz"}, HTTP_HX_REQUEST="true")

    assert response.status_code == 400
    html = response.content.decode()
    assert 'data-bad-parameter="export"' in html and "<html" not in html


def test_no_view_reads_export_but_through_the_one_check():
    """Every page reads ``?export=`` with :func:`pools.web.pages.checked_export` (and the 400
    handler reads it back to say it); the API has no ``export``."""
    readers = {
        str(path.relative_to(ROOT))
        for package in ("pools", "billing", "portal")
        for path in (ROOT / package).rglob("*.py")
        if re.search(r"GET(\.get\(|\[)\"export\"", path.read_text(encoding="utf-8"))
    }
    assert readers == {"pools/web/pages.py", "portal/handlers.py"}
