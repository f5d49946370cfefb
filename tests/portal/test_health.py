"""/healthz, /readyz and /healthz/deep: what a load balancer, an orchestrator and a pool admin
ask. Readiness is the database only (a broker outage must not take the web pods out of the
Service); no public body names a host, a port or an error's text."""

from __future__ import annotations

import time

import pytest
from broker_support import CLOSED_BROKER, celery_broker
from django.db.utils import OperationalError
from django.test import Client, override_settings
from django.utils import timezone

from pools.jobs.models import QueuedJob

pytestmark = pytest.mark.django_db

# What psycopg says when PostgreSQL is down: it names the server, which no public body may.
DB_DOWN = 'connection failed: connection to server at "10.0.0.5", port 5432 failed'


def test_healthz_answers_ok_without_signing_in():
    response = Client().get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


def test_healthz_only_answers_get():
    assert Client().post("/healthz").status_code == 405


def test_readyz_is_200_when_the_database_answers():
    response = Client().get("/readyz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {"database": "ok"}}


def test_readyz_stays_200_when_the_broker_is_unreachable():
    started = time.monotonic()
    with celery_broker(CLOSED_BROKER):
        response = Client().get("/readyz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {"database": "ok"}}
    assert time.monotonic() - started < 1  # it does not even try the broker


def _database_down(monkeypatch):
    from django.db.backends.base.base import BaseDatabaseWrapper

    def refuse(self, *args, **kwargs):
        raise OperationalError(DB_DOWN)

    monkeypatch.setattr(BaseDatabaseWrapper, "cursor", refuse)


def test_readyz_is_503_without_the_database_and_names_no_address(monkeypatch, caplog):
    _database_down(monkeypatch)

    response = Client().get("/readyz")

    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "checks": {"database": "unavailable (OperationalError)"},
    }
    # The operator finds the details in the log.
    assert "10.0.0.5" in caplog.text


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
@override_settings(SECURE_SSL_REDIRECT=True)
def test_probes_and_metrics_answer_over_plain_http_when_https_redirect_is_on(path):
    # Kubelet, compose and Prometheus (the ServiceMonitor) reach the pods over plain HTTP
    # inside the network; a 301 would fail them.
    assert Client().get(path).status_code == 200


@override_settings(SECURE_SSL_REDIRECT=True)
def test_other_pages_still_redirect_to_https():
    response = Client().get("/login/")

    assert response.status_code == 301
    assert response["Location"] == "https://testserver/login/"


def test_deep_health_is_for_pool_admins_only(api_as, member):
    assert Client().get("/healthz/deep").status_code == 401
    assert Client().get("/healthz/deep").json()["code"] == "not_authenticated"
    assert api_as(member).get("/healthz/deep").status_code == 403


def test_deep_health_reports_every_service_and_the_outbox(api_as, pool_admin):
    QueuedJob.objects.create(
        task_name="pools.capacity.tasks.reconcile_task",
        created_at=timezone.now() - timezone.timedelta(seconds=90),
    )

    response = api_as(pool_admin).get("/healthz/deep")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["broker"] == "eager (no broker configured)"
    assert body["checks"]["cache"] == "local (this process's memory)"
    assert body["checks"]["outbox"]["queued"] == 1
    assert 90 <= body["checks"]["outbox"]["oldest_age_s"] < 100


def test_deep_health_is_503_naming_the_broker_without_its_address(api_as, pool_admin):
    started = time.monotonic()
    with celery_broker(CLOSED_BROKER):
        response = api_as(pool_admin).get("/healthz/deep")

    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "degraded"
    assert body["checks"]["broker"] == "unavailable (OperationalError)"
    assert "127.0.0.1" not in response.content.decode()
    assert time.monotonic() - started < 3  # within a probe's patience
