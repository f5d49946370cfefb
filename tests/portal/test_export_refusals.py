"""One rule for ``?export=`` on every page that has downloads
(:func:`pools.web.pages.checked_export`): a name the page has not is a 400 naming the ones it
has -- the 400 page for a browser, the same words in plain text for a script -- never the page
itself (a 200 a script saves as its CSV) nor a page chosen quietly. ``?export=`` (empty) is the
page, as ``?page_size=`` is the default size."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.utils.html import escape
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


# A download whose filters the page cannot use, and a month that is none under a download:
# (path, query, the parameter(s) named, the refusal), the words written out by hand from
# Django's ModelChoiceField message and the portal's team filter.
CHOICE = "Select a valid choice. That choice is not one of the available choices."
NO_TEAM = "No team you can see has this slug."
FILTER_DOWNLOADS = [
    ("/gpus/", {"gpu_model": "nope"}, "csv", "gpu_model", f'GPU model "nope": {CHOICE}'),
    ("/timeline/", {"team": "no-such"}, "csv", "team", f'Team "no-such": {NO_TEAM}'),
    ("/dashboard/", {"team": "no-such"}, "plan", "team", f'Team "no-such": {NO_TEAM}'),
    ("/costs/budgets/", {"team": "no-such"}, "csv", "team", f'Team "no-such": {NO_TEAM}'),
    ("/idle/", {"team": "no-such"}, "csv", "team", f'Team "no-such": {NO_TEAM}'),
]
SCRIPT_ACCEPTS = [{}, {"HTTP_ACCEPT": "*/*"}, {"HTTP_ACCEPT": "text/csv"}]


@pytest.mark.parametrize(("path", "filters", "export", "parameter", "refusal"), FILTER_DOWNLOADS)
def test_a_browser_download_with_a_refused_filter_gets_the_400_page_naming_it(
    admin_page, world, path, filters, export, parameter, refusal
):
    answer = admin_page.get(path, {**filters, "export": export}, HTTP_ACCEPT=BROWSER)

    assert answer.status_code == 400 and answer["Content-Type"].startswith("text/html")
    html = answer.content.decode()
    assert "<html" in html and f'data-bad-parameter="{parameter}"' in html
    assert f"<h2>That {parameter} could not be used</h2>" in html
    assert f"<p>{escape(refusal)} Nothing was downloaded.</p>" in html
    value = filters[parameter]
    # the same download without the filter, and the page with it (its form shows the error)
    without, page = f"{path}?export={export}", f"{path}?{parameter}={value}"
    assert f'<a href="{without}" data-without>' in html
    assert f'<a href="{page}" data-page>' in html
    assert admin_page.get(without).status_code == 200
    assert admin_page.get(page, HTTP_ACCEPT=BROWSER).status_code == 400  # the page's own refusal


@pytest.mark.parametrize(("path", "filters", "export", "parameter", "refusal"), FILTER_DOWNLOADS)
@pytest.mark.parametrize("accept", SCRIPT_ACCEPTS)
def test_a_script_download_with_a_refused_filter_gets_one_line(
    admin_page, world, path, filters, export, parameter, refusal, accept
):
    answer = admin_page.get(path, {**filters, "export": export}, **accept)

    assert (answer.status_code, answer["Content-Type"]) == (400, "text/plain; charset=utf-8")
    assert answer.content.decode() == f"The filters are invalid: {refusal}\n"


@pytest.mark.parametrize(
    ("path", "filters", "export", "refusal"),
    [
        ("/gpus/", {"gpu_model": "nope"}, "csv", f'GPU model "nope": {CHOICE}'),
        ("/dashboard/", {"team": "no-such"}, "plan", f'Team "no-such": {NO_TEAM}'),
    ],
)
def test_htmx_download_with_a_refused_filter_gets_the_pages_fragment(
    admin_page, world, path, filters, export, refusal
):
    """What htmx gets for the filters without ``export``: the table (the dashboard's body)
    with the refusal, not the 400 page nor a line of text."""
    download = admin_page.get(path, {**filters, "export": export}, HTTP_HX_REQUEST="true")
    fragment = admin_page.get(path, filters, HTTP_HX_REQUEST="true")

    assert download.status_code == fragment.status_code == 400
    assert download["Content-Type"].startswith("text/html")
    for answer in (download, fragment):
        html = answer.content.decode()
        assert "<html" not in html and "data-bad-parameter" not in html
        assert 'role="alert"' in html and escape(refusal) in html


def test_several_refused_filters_are_each_named_and_dropped_from_the_link(admin_page, world):
    query = {"pool": "nope", "gpu_model": "nope", "health": "ok", "export": "csv"}

    browser = admin_page.get("/gpus/", query, HTTP_ACCEPT=BROWSER).content.decode()
    script = admin_page.get("/gpus/", query).content.decode()

    refusal = f'Pool "nope": {CHOICE} GPU model "nope": {CHOICE}'
    assert script == f"The filters are invalid: {refusal}\n"
    assert 'data-bad-parameter="pool, gpu_model"' in browser
    assert "<h2>Those filters could not be used</h2>" in browser
    assert "without <code>pool</code> and <code>gpu_model</code></a>" in browser
    assert '<a href="/gpus/?health=ok&amp;export=csv" data-without>' in browser
    assert '<a href="/gpus/?pool=nope&amp;gpu_model=nope&amp;health=ok" data-page>' in browser


@pytest.mark.parametrize(
    ("url", "line"),
    [
        (
            "/costs/finance/2026-13/?export=statements",
            "The month in the address, '2026-13', is not a month YYYY-MM (2026-11); "
            "nothing was exported.",
        ),
        (
            "/costs/?month=junk&export=csv",
            "?month=junk is not a month YYYY-MM (2026-11); nothing was exported.",
        ),
    ],
)
def test_a_cost_download_of_a_month_that_is_none_answers_as_every_refused_download(
    admin_page, url, line
):
    """The statements' downloads of a month that is no month: the 400 page for a browser (as
    without ``export``), one line for a script, which would save the page as its CSV."""
    script = admin_page.get(url, HTTP_ACCEPT="*/*")
    browser = admin_page.get(url, HTTP_ACCEPT=BROWSER)

    assert (script.status_code, script["Content-Type"]) == (400, "text/plain; charset=utf-8")
    assert script.content.decode() == f"{line}\n"
    assert browser.status_code == 400
    assert 'data-bad-parameter="month"' in browser.content.decode()
