"""The dashboard's typed team picker in a browser: typing fetches suggestions into its
datalist (htmx, under the page's Content-Security-Policy), and the slug typed filters the page
as the old ``<select>`` did."""

from __future__ import annotations

import time

import pytest
from factories import TeamFactory

pytestmark = pytest.mark.browser


def _until(page, expression: str, timeout_s: float = 10.0) -> None:
    # polled: wait_for_function evaluates its string with eval(), which the CSP refuses
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"still false after {timeout_s} s: {expression}"
        page.wait_for_timeout(100)


def test_typing_suggests_teams_and_the_slug_filters_the_dashboard(signed_in, live_server):
    page = signed_in
    TeamFactory(slug="nlp", name="Language")
    TeamFactory(slug="nlp-eval", name="Evaluation")
    TeamFactory(slug="vision", name="Vision")
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

    page.goto(f"{live_server.url}/dashboard/")
    picker = page.locator("input[name=team]")
    picker.click()
    picker.press_sequentially("nl", delay=50)
    options = "[...document.querySelectorAll('#id_team-suggestions option')].map(o => o.value)"
    # by name: Evaluation, Language; vision matches neither slug nor name
    _until(page, f"JSON.stringify({options}) === JSON.stringify(['nlp-eval', 'nlp'])")

    picker.fill("vision")
    _until(page, f"JSON.stringify({options}) === JSON.stringify(['vision'])")
    picker.press("Enter")  # change: the filter form's htmx request, pushed to the URL
    page.wait_for_url("**team=vision**")
    assert page.input_value("input[name=team]") == "vision"
    assert not [e for e in errors if "Content Security Policy" in e]

    refused = page.goto(f"{live_server.url}/dashboard/?team=no-such-team")
    assert refused.status == 400
    assert "No team you can see has this slug." in page.locator("p.errorlist").inner_text()


def _team_cleared(url: str) -> bool:
    return "/dashboard/?" in url and "team=nope" not in url and url.endswith("team=")


def test_fixing_a_refused_team_brings_back_the_utilisation_box_and_history_the_typed_team(
    signed_in, live_server
):
    """After ``?team=nope`` (a 400, no figures), clearing the team draws the figures and the
    utilisation box (heading, range picker) as a fresh page does; Back then Forward shows the
    URL's team in the box (empty), not the "nope" htmx's copy of the page was drawn with."""
    page = signed_in
    TeamFactory(slug="nlp")
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

    assert page.goto(f"{live_server.url}/dashboard/?team=nope").status == 400
    assert page.locator("#utilisation").count() == 0
    picker = page.locator("input[name=team]")
    picker.fill("")
    picker.dispatch_event("change")
    page.wait_for_url(_team_cleared)
    _until(page, "!!document.querySelector('#utilisation header strong')")
    heading = page.locator("#utilisation header strong").inner_text()
    assert heading == "Mean utilisation over time, per pool × GPU model"
    assert page.locator("#utilisation input[name=range]").count() == 3  # 24 h, 7 d, 30 d

    page.go_back()
    page.wait_for_url("**/dashboard/?team=nope")
    _until(page, "document.querySelector('input[name=team]').value === 'nope'")
    page.go_forward()
    page.wait_for_url(_team_cleared)
    _until(page, "document.querySelector('input[name=team]').value === ''")
    _until(page, "!!document.querySelector('#utilisation header strong')")
    assert page.locator("p.errorlist").count() == 0
