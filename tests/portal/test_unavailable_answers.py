"""Answers under /api/ are JSON with a code even when no view answers: an unmatched path, the
database refusing (OperationalError) and a request past its deadline (QA round 2, item 10: all
three answered Django's or gunicorn's HTML). Pages keep their HTML error pages."""

from __future__ import annotations

import time

import pytest
from django.db.utils import OperationalError
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db

DB_DOWN = 'connection failed: connection to server at "10.0.0.5", port 5432 failed'


def test_an_unmatched_api_path_is_a_json_404(member_api):
    for path in ("/api/v1/no-such-thing/", "/api/nope", "/api/v1/gpus/1/nope/"):
        response = member_api.get(path)

        assert response.status_code == 404, path
        assert response["Content-Type"] == "application/json"
        assert response.json() == {"code": "not_found", "detail": "No API operation at this path."}


def test_an_unmatched_page_is_still_the_404_page(member_page):
    response = member_page.get("/no-such-page/")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def _refuse(*args, **kwargs):
    raise OperationalError(DB_DOWN)


def test_the_database_refusing_a_view_is_a_json_503(member_api, monkeypatch):
    from django.db.backends.base.base import BaseDatabaseWrapper

    monkeypatch.setattr(BaseDatabaseWrapper, "cursor", _refuse)

    response = member_api.get("/api/v1/gpus/")

    assert response.status_code == 503
    assert response.json()["code"] == "database_unavailable"
    assert response["Retry-After"] == "30"
    assert "10.0.0.5" not in response.content.decode()


def test_the_database_refusing_in_middleware_is_a_json_503_under_the_api(monkeypatch):
    from django.contrib.auth.middleware import AuthenticationMiddleware

    monkeypatch.setattr(AuthenticationMiddleware, "process_request", _refuse)
    client = Client(raise_request_exception=False)

    api = client.get("/api/v1/gpus/")
    page = client.get("/login/")

    assert (api.status_code, api.json()["code"]) == (503, "database_unavailable")
    assert "10.0.0.5" not in api.content.decode()
    assert (page.status_code, page["Content-Type"].split(";")[0]) == (503, "text/html")
    # The portal's own 503 page (templates/503.html), not Django's bare "Server Error (500)".
    assert "Unavailable for a moment" in page.content.decode()
    assert "Server Error (500)" not in page.content.decode()


@override_settings(REQUEST_TIMEOUT_S=0.3)
def test_a_request_past_its_deadline_is_a_json_503_timeout(member_api, monkeypatch):
    from pools.inventory.api import GpuViewSet

    monkeypatch.setattr(GpuViewSet, "list", lambda self, request: time.sleep(5))
    started = time.monotonic()

    response = member_api.get("/api/v1/gpus/")

    assert time.monotonic() - started < 2
    assert response.status_code == 503
    assert response.json()["code"] == "timeout"


@override_settings(REQUEST_TIMEOUT_S=0.3)
def test_a_page_past_its_deadline_is_a_503_page_and_the_timer_is_off_afterwards(
    member_page, monkeypatch
):
    from pools.inventory import selectors

    monkeypatch.setattr(selectors, "gpu_list", lambda: time.sleep(5))
    client = Client(raise_request_exception=False)
    client.cookies = member_page.cookies

    response = client.get("/gpus/")
    time.sleep(0.5)  # a timer left running would fire here, outside any request

    assert response.status_code == 503
    assert response["Content-Type"].startswith("text/html")
