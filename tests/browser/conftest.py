"""Playwright driving Debian's chromium (not a downloaded browser) against the live server."""

from __future__ import annotations

import pytest
from browser_support import live_server_settled, log_in


@pytest.fixture(autouse=True)
def gpu_catalogue(transactional_db):
    """Browser tests are transactional: the database is flushed after each, migration data
    included, so the shipped catalogue is loaded again before each one; and the flush waits
    for the live server to finish what the page asked of it (:func:`live_server_settled`;
    this teardown runs after the pages' contexts closed, before the flush)."""
    from pools.inventory.catalogue.sync import catalogue_sync
    from pools.inventory.models import GpuModel, GpuModelAlias

    catalogue_sync(GpuModel, GpuModelAlias)
    yield
    live_server_settled()


@pytest.fixture
def signed_in(page, live_server, django_user_model):
    django_user_model.objects.create_user("ada", password="pw-ada-123", is_staff=True)
    log_in(page, live_server.url, "ada", "pw-ada-123")
    return page
