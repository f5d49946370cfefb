"""Playwright with Debian's chromium (not a downloaded browser): fixtures shared by the browser
tests and the integration tests that click through the portal."""

from __future__ import annotations

import os
import shutil
import time
from urllib.parse import urlencode, urlsplit

import pytest

CHROMIUM = os.environ.get("CHROMIUM", shutil.which("chromium") or "/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"chromium not found at {CHROMIUM}: apt-get install chromium (make services)")
    # Playwright's sync API runs an event loop; Django refuses sync DB calls inside one.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield instance
        instance.close()


# Counts the page's htmx requests in flight (added to a context before its pages load).
HTMX_IN_FLIGHT = """
window.__htmxInFlight = 0;
document.addEventListener("htmx:beforeRequest", () => { window.__htmxInFlight += 1; });
document.addEventListener("htmx:afterRequest", () => { window.__htmxInFlight -= 1; });
"""
SETTLED = """() => window.__htmxInFlight === 0
  && !document.querySelector(".htmx-request, .htmx-swapping, .htmx-settling")"""


def count_htmx_requests(context) -> None:
    """Make :func:`settled` work on every page ``context`` opens from now on."""
    context.add_init_script(HTMX_IN_FLIGHT)


def settled(page, timeout_ms: float = 15_000) -> None:
    """Wait until the page has loaded and every htmx request it made (a part loaded on
    ``load``, and the parts those bring) is answered, swapped and settled. Faster than
    Playwright's ``networkidle``, which always waits 500 ms with no request; the portal's pages
    fetch nothing but through htmx (charts draw from data in the page). Needs
    :func:`count_htmx_requests` on the page's context."""
    page.wait_for_load_state("load")
    page.wait_for_function(SETTLED, timeout=timeout_ms)


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    yield page
    context.close()


def live_server_settled(timeout_s: float = 10.0) -> None:
    """Wait (at most ``timeout_s`` s) until no other connection to the test database is inside
    a statement or a transaction: a request the page started (an htmx part, a chart) may still
    be answered by the live server after the browser closed, and the flush that ends a
    transactional test then deadlocks with it (TRUNCATE's exclusive locks against the request's
    reads; PostgreSQL aborts the flush and the next test starts on the rows left behind).
    Nothing to wait for on SQLite or where the test has no database access."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND pid <> pg_backend_pid() AND state IS NOT NULL AND state <> 'idle'"
                )
                if cursor.fetchone()[0] == 0:
                    return
            time.sleep(0.05)
    except RuntimeError:  # pytest-django: no database access in this test
        return


DEMO_PASSWORD = "demo"
"""The demo users' password (``load_demo``: admin, alice, bob)."""


def log_in(
    page, base_url: str, username: str, password: str = DEMO_PASSWORD, *, next_path: str = ""
) -> None:
    """Sign ``username`` in through the portal's own sign-in form on the server at ``base_url``
    (``live_server.url``), in ``page``'s browser context, and return once the page the sign-in
    lands on has loaded: ``next_path`` when given (``/requests/queue/``), else where ``/start/``
    sends the user's role (Fleet for a pool admin, My teams for a member). A refused sign-in
    (wrong password, unknown user) fails the test here, naming the user, rather than as a
    timeout on the first page that needed it."""
    query = f"?{urlencode({'next': next_path})}" if next_path else ""
    page.goto(f"{base_url}/login/{query}")
    page.fill("main input[name=username]", username)
    page.fill("main input[name=password]", password)
    with page.expect_navigation():
        page.click("main button[type=submit]")
    if urlsplit(page.url).path == "/login/":
        pytest.fail(f"signing in as {username!r} was refused (still on {page.url})")
