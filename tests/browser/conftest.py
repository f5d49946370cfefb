"""Playwright driving Debian's chromium (not a downloaded browser) against the live server."""

from __future__ import annotations

import os
import shutil

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


@pytest.fixture(autouse=True)
def gpu_catalogue(transactional_db):
    """Browser tests are transactional: the database is flushed after each, migration data
    included, so the shipped catalogue is loaded again before each one."""
    from pools.catalogue.sync import catalogue_sync
    from pools.models import GpuModel, GpuModelAlias

    catalogue_sync(GpuModel, GpuModelAlias)


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def signed_in(page, live_server, django_user_model):
    django_user_model.objects.create_user("ada", password="pw-ada-123", is_staff=True)
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", "pw-ada-123")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    return page
