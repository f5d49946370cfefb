"""Playwright with Debian's chromium (not a downloaded browser): fixtures shared by the browser
tests and the integration tests that click through the portal."""

from __future__ import annotations

import os
import shutil
import time

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
