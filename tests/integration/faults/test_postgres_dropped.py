"""PostgreSQL drops the portal's connection in the middle of a request (``pg_terminate_backend``
of the real gunicorn worker's backend, as a failover or an admin's kill does): the API answers
503 JSON ``database_unavailable`` with ``Retry-After``, a page answers the portal's 503 page,
nothing the request had written stays, and the next request works.

"The middle" is made exact: the test holds an ACCESS EXCLUSIVE lock on a table the request
needs later on, waits until the gunicorn worker's backend is seen waiting for that lock in
``pg_stat_activity`` (its earlier writes done, uncommitted), and terminates that backend. For
the approval that table is the audit table: the request row is already updated and the
allocation inserted when the approval waits to write its two audit events.

gunicorn runs the portal with ``DEBUG=0`` (``portal.settings.test``: unhashed static files, so
no collectstatic) on the test database; its jobs go to a queue of this test's own on the
machine's Redis, which no worker reads (the queue is deleted afterwards).
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest
import redis
from broker_support import catalogue_loaded
from django.db import connection
from factories import CapacityRequestFactory, inference_fleet
from integration.processes import gunicorn_command

from pools.audit.models import AuditEvent
from pools.capacity.models import Allocation, CapacityRequest
from pools.common.choices import RequestStatus
from pools.jobs.models import QueuedJob

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[3]
REDIS = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
PASSWORD = "pw-faults-pg-123"


@pytest.fixture(autouse=True)
def _catalogue():
    catalogue_loaded()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _dsn() -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


@pytest.fixture
def web(tmp_path, django_db_setup):
    """``(url, log)`` of one gunicorn process (one sync worker) on the test database."""
    queue = f"faults-pg-{uuid.uuid4().hex[:12]}"
    port = _free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "DEBUG": "0",
        "DATABASE_URL": _dsn(),
        "CELERY_BROKER_URL": REDIS,
        "CELERY_QUEUE": queue,
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SECURE_SSL_REDIRECT": "0",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
    }
    log = tmp_path / "web.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            gunicorn_command(port, workers=1), cwd=ROOT, env=env, stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180  # shared cores: gunicorn's imports can take a minute
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        else:
            raise AssertionError(f"gunicorn did not start:\n{log.read_text()[-3000:]}")
        yield url, log
    finally:
        process.terminate()
        process.wait(timeout=30)
        redis.Redis.from_url(REDIS).delete(queue)


def _drop_mid_request(table: str, send) -> tuple[httpx.Response, float]:
    """Send the request (``send()``, in a thread) while ``table`` is locked; terminate the
    backend that waits for the lock; return the answer and the seconds from the kill to it."""
    holder = psycopg.connect(_dsn(), autocommit=False)
    # A second session looks: within the holder's transaction pg_stat_activity is a snapshot.
    watcher = psycopg.connect(_dsn(), autocommit=True)
    answer: dict[str, httpx.Response] = {}
    try:
        holder.execute(f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE')
        thread = threading.Thread(target=lambda: answer.setdefault("r", send()))
        thread.start()
        deadline = time.monotonic() + 30
        waiting: list[tuple[int]] = []
        while time.monotonic() < deadline and not waiting:
            waiting = watcher.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"
            ).fetchall()
            time.sleep(0.05)
        thread.join(timeout=0.1)
        early = answer["r"].text[:800] if "r" in answer else "(no answer yet)"
        assert len(waiting) == 1, f"nothing waited on {table}; the answer: {early}"
        killed = watcher.execute("SELECT pg_terminate_backend(%s)", waiting[0]).fetchone()
        assert killed == (True,)
        killed_at = time.monotonic()
        thread.join(timeout=30)
        answered_in = time.monotonic() - killed_at
    finally:
        holder.rollback()
        holder.close()
        watcher.close()
    return answer["r"], answered_in


def _token(url: str, username: str) -> str:
    response = httpx.post(
        f"{url}/api/v1/auth/token/", json={"username": username, "password": PASSWORD}, timeout=30
    )
    assert response.status_code == 200, response.text
    return response.json()["token"]


def test_an_approval_whose_connection_is_dropped_answers_503_and_writes_nothing(
    web, django_user_model, team
):
    url, _log = web
    django_user_model.objects.create_user("pg-admin", password=PASSWORD, is_staff=True)
    request = CapacityRequestFactory(team=team, pool=inference_fleet(), card_count=2)
    headers = {"Authorization": f"Token {_token(url, 'pg-admin')}"}
    events_before = AuditEvent.objects.count()
    approve = f"{url}/api/v1/requests/{request.pk}/approve/"

    response, answered_in = _drop_mid_request(
        AuditEvent._meta.db_table, lambda: httpx.post(approve, json={}, headers=headers, timeout=60)
    )

    assert response.status_code == 503, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["code"] == "database_unavailable"
    assert response.headers["Retry-After"] == "30"
    # Nothing half-written: the request row's update and the allocation rolled back with it.
    assert CapacityRequest.objects.get(pk=request.pk).status == RequestStatus.SUBMITTED
    assert not Allocation.objects.filter(request=request).exists()
    assert AuditEvent.objects.count() == events_before
    assert QueuedJob.objects.count() == 0

    # The next request gets a fresh connection and works: approved once, one allocation.
    again = httpx.post(approve, json={}, headers=headers, timeout=60)
    assert again.status_code == 200, again.text
    assert CapacityRequest.objects.get(pk=request.pk).status == RequestStatus.APPROVED
    assert Allocation.objects.filter(request=request).count() == 1
    print(f"\npostgres dropped (API): 503 answered {answered_in:.2f} s after the kill")


def test_a_page_whose_connection_is_dropped_is_the_portals_503_page(web, django_user_model, team):
    url, _log = web
    django_user_model.objects.create_user("pg-page-admin", password=PASSWORD, is_staff=True)
    CapacityRequestFactory(team=team, pool=inference_fleet(), card_count=1)
    browser = httpx.Client(base_url=url, timeout=60)
    form = browser.get("/login/")
    assert form.status_code == 200
    signed_in = browser.post(
        "/login/",
        data={
            "username": "pg-page-admin",
            "password": PASSWORD,
            "csrfmiddlewaretoken": browser.cookies["csrftoken"],
        },
        headers={"Referer": f"{url}/login/"},
    )
    assert signed_in.status_code == 302, signed_in.text[:500]

    response, answered_in = _drop_mid_request(
        CapacityRequest._meta.db_table, lambda: browser.get("/requests/queue/")
    )

    assert response.status_code == 503
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["Retry-After"] == "30"
    assert "Unavailable for a moment" in response.text
    assert "Try again in a minute" in response.text
    # The next page works on a new connection, the session intact.
    again = browser.get("/requests/queue/")
    assert again.status_code == 200
    assert "Unavailable for a moment" not in again.text
    assert 'href="/requests/queue/"' in again.text  # the pool admin's navigation
    print(f"\npostgres dropped (page): 503 answered {answered_in:.2f} s after the kill")
