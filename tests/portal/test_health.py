"""/healthz and /readyz: what a load balancer and an orchestrator ask."""

from __future__ import annotations

import time

import pytest
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db


def test_healthz_answers_ok_without_signing_in():
    response = Client().get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


def test_healthz_only_answers_get():
    assert Client().post("/healthz").status_code == 405


@override_settings(CELERY_BROKER_URL="")
def test_readyz_is_200_when_the_database_answers():
    response = Client().get("/readyz")

    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "checks": {"database": "ok", "broker": "eager (no broker configured)"},
    }


@override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0")
def test_readyz_is_503_naming_the_broker_when_it_is_unreachable():
    started = time.monotonic()

    response = Client().get("/readyz")

    elapsed = time.monotonic() - started
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"] == "ok"
    # The error names the configured broker, not some default one.
    assert "127.0.0.1:1" in body["checks"]["broker"]
    # A refused connection must fail within a kubelet's default probe timeout (1 s).
    assert elapsed < 1


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
@override_settings(SECURE_SSL_REDIRECT=True, CELERY_BROKER_URL="")
def test_probes_answer_over_plain_http_when_https_redirect_is_on(path):
    # Kubelet and compose probe over HTTP inside the network; a 301 would fail them.
    assert Client().get(path).status_code == 200


@override_settings(SECURE_SSL_REDIRECT=True)
def test_other_pages_still_redirect_to_https():
    response = Client().get("/login/")

    assert response.status_code == 301
    assert response["Location"] == "https://testserver/login/"
