"""A refusal the portal answers is one log line without a traceback; a real error keeps its
traceback (``portal.log_filters.RefusalWithoutTraceback``, named in ``LOGGING``)."""

from __future__ import annotations

import logging

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def _signed_in(user) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def _records(caplog, logger: str) -> list[tuple[str, str, bool]]:
    return [
        (r.levelname, r.getMessage(), r.exc_info is not None)
        for r in caplog.records
        if r.name == logger
    ]


def test_a_member_opening_a_pool_admin_page_logs_one_warning_line(member, caplog):
    with caplog.at_level(logging.INFO):
        response = _signed_in(member).get("/requests/queue/")

    assert response.status_code == 403
    assert _records(caplog, "django.request") == [
        ("WARNING", "Forbidden (Permission denied): /requests/queue/", False)
    ]
    assert "Traceback" not in caplog.text


def test_a_page_number_that_is_no_number_logs_one_warning_line(pool_admin, caplog):
    with caplog.at_level(logging.INFO):
        response = _signed_in(pool_admin).get("/nodes/?page=abc")

    assert response.status_code == 400
    assert _records(caplog, "django.request") == [
        ("WARNING", "page: a whole number from 1: /nodes/", False)
    ]
    assert "Traceback" not in caplog.text


def test_a_form_with_too_many_fields_logs_one_warning_line(settings, caplog):
    """Django logs a SuspiciousOperation at ERROR on its django.security logger; it is the
    client's malformed request, refused with a 400."""
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 5
    fields = {f"f{i}": "x" for i in range(6)}  # one more than allowed
    with caplog.at_level(logging.INFO):
        response = Client(raise_request_exception=False).post("/login/", fields)

    assert response.status_code == 400
    assert _records(caplog, "django.security.TooManyFieldsSent") == [
        ("WARNING", "The number of GET/POST parameters exceeded settings."
                    "DATA_UPLOAD_MAX_NUMBER_FIELDS.", False)
    ]  # fmt: skip


def test_a_real_error_keeps_its_traceback(pool_admin, caplog, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the node list")

    monkeypatch.setattr("pools.inventory.views.filtered_list", broken)
    with caplog.at_level(logging.INFO):
        response = _signed_in(pool_admin).get("/nodes/")

    assert response.status_code == 500
    (record,) = [r for r in caplog.records if r.name == "django.request"]
    assert (record.levelname, record.getMessage()) == ("ERROR", "Internal Server Error: /nodes/")
    assert record.exc_info[0] is RuntimeError
    assert "RuntimeError: a bug in the node list" in caplog.text
