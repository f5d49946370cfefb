"""Scale-out as production runs it: two gunicorn web processes (``DEBUG=0``, static files
collected with hashed names and served by WhiteNoise, ``scale_out_settings``) and two Celery
workers on PostgreSQL and Redis.

- A real browser (Debian's chromium) signs in and asks for cards through a round-robin proxy in
  front of both web processes, so consecutive requests land on different processes: the session,
  the CSRF token and the flash message made by one are honoured by the other.
- The API is used through both: a token from one works on the other, a request created on one
  is approved on the other, and a worker (either) provisions it.
- The token throttle is one budget across both processes (counters in Redis).
- Scheduled work runs once: the lifecycle task sent twice at the same moment, one copy to each
  worker, ends and warns each allocation once (the task is idempotent; the Kubernetes objects
  keep exactly one beat, ``tests/deploy``).

Uses Redis database 5 (``SCALE_OUT_REDIS_URL``) for broker and cache.
"""

from __future__ import annotations

import http.server
import itertools
import os
import re
import shutil
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from django.db import connection
from django.utils import timezone
from integration.processes import celery_worker_command, gunicorn_command
from playwright.sync_api import expect

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
REDIS = os.environ.get("SCALE_OUT_REDIS_URL", "redis://127.0.0.1:6379/5")
PASSWORD = "pw-scale-out-123"
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "host"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(check, what: str, timeout_s: float = 60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def static_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("static")
    database = f"sqlite:///{root.parent / 'collectstatic.sqlite3'}"  # not opened
    env = {**os.environ, **base_env(database), "STATIC_ROOT": str(root)}
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=300,
    )
    return root


def base_env(database_url: str) -> dict[str, str]:
    return {
        "DJANGO_SETTINGS_MODULE": "integration.scale_out_settings",
        "PYTHONPATH": str(ROOT / "tests"),
        "ENV_FILE": os.devnull,
        "DEBUG": "0",
        "SECRET_KEY": "scale-out-test-" + "s" * 50,
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": REDIS,
        "CACHE_URL": REDIS,
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SECURE_SSL_REDIRECT": "0",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        "NUM_PROXIES": "1",  # the round-robin proxy below
        "LOG_LEVEL": "WARNING",
    }


@pytest.fixture(scope="module")
def stack(static_root, django_db_setup, tmp_path_factory) -> Iterator[dict]:
    """Two gunicorn processes (2 workers each) and two Celery workers on the test database;
    started once for the module, stopped afterwards."""
    tmp_path = tmp_path_factory.mktemp("scale-out")
    db = connection.settings_dict
    env = {
        **os.environ,
        **base_env(f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"),
        "STATIC_ROOT": str(static_root),
    }
    env.pop("CELERY_TASK_ALWAYS_EAGER", None)
    subprocess.run(
        [sys.executable, "-m", "celery", "-A", "portal", "purge", "-f"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    processes: list[subprocess.Popen] = []
    ports = [free_port(), free_port()]
    try:
        for n, port in enumerate(ports):
            log = (tmp_path / f"web{n}.log").open("w")
            processes.append(
                subprocess.Popen(
                    gunicorn_command(port),
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )  # fmt: skip
            )
        for n in range(2):
            log = (tmp_path / f"worker{n}.log").open("w")
            processes.append(
                subprocess.Popen(
                    celery_worker_command(name=f"scale-out-{n}@%h"),
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )  # fmt: skip
            )
        urls = [f"http://127.0.0.1:{port}" for port in ports]
        for url in urls:
            wait_for(lambda url=url: _answers(url), f"{url}/readyz")
        for n in range(2):
            wait_for(
                lambda n=n: " ready." in (tmp_path / f"worker{n}.log").read_text(),
                f"celery worker {n}",
            )
        yield {"web": urls, "env": env, "logs": tmp_path}
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


class RoundRobinProxy(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """The load balancer: a GET goes to the process after the one that answered the request
    before it, so a POST and the page it redirects to are answered by different processes;
    POSTs take the processes in turn among themselves, so however many htmx GETs a page fires
    between them, the POSTs of one session land on every process (static files always go to
    the first). Records ``(method, path, backend, status)``."""

    daemon_threads = True

    def __init__(self, backends: list[str]):
        self.backends = backends
        self.post_turn = itertools.cycle(range(len(backends)))
        self.last = len(backends) - 1
        self.lock = threading.Lock()
        self.log: list[tuple[str, str, int, int]] = []
        super().__init__(("127.0.0.1", 0), _ProxyHandler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    def _forward(self):
        server: RoundRobinProxy = self.server
        with server.lock:
            if self.path.startswith("/static/"):
                index = 0
            else:
                if self.command == "GET":
                    index = (server.last + 1) % len(server.backends)
                else:
                    index = next(server.post_turn)
                server.last = index
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        headers["Host"] = self.headers["Host"]
        headers["X-Forwarded-For"] = self.client_address[0]
        upstream = httpx.request(
            self.command,
            server.backends[index] + self.path,
            headers=headers,
            content=body,
            follow_redirects=False,
            timeout=60,
        )
        with server.lock:
            server.log.append((self.command, self.path, index, upstream.status_code))
        self.send_response(upstream.status_code)
        for key, value in upstream.headers.multi_items():
            if key.lower() not in HOP_BY_HOP | {"content-length", "content-encoding"}:
                self.send_header(key, value)
        content = upstream.content
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

    def log_message(self, *args):  # quiet
        pass


@pytest.fixture
def proxy(stack) -> Iterator[RoundRobinProxy]:
    server = RoundRobinProxy(stack["web"])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


@pytest.fixture
def fleet(stack, django_user_model):
    """Pool ``infer`` with 8 L40S (two nodes), team ``nlp`` with member alice, an admin; no
    throttle or lockout counters from earlier tests."""
    import redis

    from pools.common.choices import Scheduler, TeamRole
    from pools.inventory.catalogue.sync import catalogue_sync
    from pools.inventory.models import Gpu, GpuModel, GpuModelAlias, Node, Pool
    from pools.inventory.services.driver_groups import driver_group_for_version
    from pools.tenancy.models import Membership, Team

    catalogue_sync(GpuModel, GpuModelAlias)  # transactional tests start from an empty database
    cache = redis.Redis.from_url(REDIS)
    for key in cache.scan_iter(":1:*"):  # Django's cache keys (throttles, lockouts), not Celery's
        cache.delete(key)

    l40s = GpuModel.objects.get(slug="l40s")
    pool = Pool.objects.create(slug="infer", name="Inference", scheduler=Scheduler.KUBERNETES)
    group = driver_group_for_version("550.54.15")
    for n in range(2):
        node = Node.objects.create(
            hostname=f"inf-{n}",
            pool=pool,
            scheduler=Scheduler.KUBERNETES,
            state="up",
            driver_version="550.54.15",
            driver_group=group,
        )
        for i in range(4):
            Gpu.objects.create(
                node=node, index=i, gpu_model=l40s, raw_model_name=l40s.vendor_name, health="ok"
            )
    # Hashed as the web processes check it (the test settings hash with MD5 only).
    from django.contrib.auth.hashers import PBKDF2PasswordHasher

    hasher = PBKDF2PasswordHasher()
    hashed = hasher.encode(PASSWORD, hasher.salt())
    alice = django_user_model.objects.create(username="alice", password=hashed)
    admin = django_user_model.objects.create(username="admin", password=hashed, is_staff=True)
    team = Team.objects.create(slug="nlp", name="NLP")
    Membership.objects.create(team=team, user=alice, role=TeamRole.MEMBER)
    return {"pool": pool, "team": team, "alice": alice, "admin": admin, "l40s": l40s}


def test_a_browser_session_csrf_and_messages_work_whichever_process_answers(
    stack, proxy, fleet, page
):
    from pools.capacity.models import CapacityRequest

    start = (timezone.localtime() + timedelta(days=7)).replace(hour=9, minute=0)
    page.goto(f"{proxy.url}/login/")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", PASSWORD)
    page.click("main button[type=submit]")
    try:
        page.wait_for_url(f"{proxy.url}/teams/mine/", timeout=15_000)  # a member lands here
    except Exception as exc:
        raise AssertionError(f"sign-in failed: {proxy.log}\n{page.content()[:3000]}") from exc
    expect(page.locator("body")).to_contain_text("Sign out alice")

    page.goto(f"{proxy.url}/requests/new/")
    page.check("input[value=inference]")
    page.select_option("select[name=gpu_model]", "l40s")
    page.fill("input[name=card_count]", "2")
    page.fill("input[name=starts_at]", start.strftime("%Y-%m-%dT%H:%M"))
    page.fill("input[name=ends_at]", (start + timedelta(days=5)).strftime("%Y-%m-%dT%H:%M"))
    expect(page.locator("#options")).to_contain_text("Inference")  # htmx, through the proxy
    page.fill("textarea[name=justification]", "Serve the retriever")
    page.click("button[name=submit_request]")
    expect(page.locator("h2")).to_contain_text("Submitted")

    request = CapacityRequest.objects.get()
    assert (request.requested_by, request.card_count, request.status) == (
        fleet["alice"],
        2,
        "submitted",
    )
    # An admin approves in the queue: the POST is answered by one process, the page it
    # redirects to (with the flash message) by the other.
    page.context.clear_cookies()
    page.goto(f"{proxy.url}/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(f"{proxy.url}/")
    page.goto(f"{proxy.url}/requests/queue/")
    page.click("button:has-text('Approve')")
    expect(page.locator(".messages")).to_contain_text("Approved: allocation")
    approve = [n for n, e in enumerate(proxy.log) if e[0] == "POST" and "approve" in e[1]]
    assert approve, proxy.log
    post, shown = proxy.log[approve[-1]], proxy.log[approve[-1] + 1]
    assert post[3] == 302 and shown[0] == "GET" and shown[2] != post[2], proxy.log
    request.refresh_from_db()
    assert request.status == "approved"

    # Both processes answered signed-in pages and accepted CSRF-checked POSTs.
    posts = {index for method, _, index, status in proxy.log if method == "POST" and status < 400}
    pages = {index for method, path, index, _ in proxy.log if method == "GET"}
    assert posts == {0, 1}, proxy.log
    assert pages == {0, 1}, proxy.log
    assert not [entry for entry in proxy.log if entry[3] >= 500], proxy.log
    # Static files come hashed from WhiteNoise (collected, DEBUG off).
    css = page.locator("link[rel=stylesheet]").first.get_attribute("href")
    assert css.startswith("/static/vendor/pico.min.") and css.endswith(".css")
    assert httpx.get(stack["web"][1] + css).status_code == 200


def test_the_api_works_through_both_processes_and_a_worker_provisions(stack, fleet):
    from pools.audit.models import AuditEvent
    from pools.capacity.models import Allocation

    web_a, web_b = stack["web"]
    # The workers serve the whole module: read only what they log from here on.
    worker_logs = [stack["logs"] / f"worker{n}.log" for n in range(2)]
    offsets = [len(log.read_text()) for log in worker_logs]
    token_a = httpx.post(
        f"{web_a}/api/v1/auth/token/", data={"username": "alice", "password": PASSWORD}
    ).json()["token"]
    admin_token = httpx.post(
        f"{web_b}/api/v1/auth/token/", data={"username": "admin", "password": PASSWORD}
    ).json()["token"]
    now = timezone.now().replace(microsecond=0)

    created = httpx.post(
        f"{web_b}/api/v1/requests/",
        headers={"Authorization": f"Token {token_a}"},
        json={
            "team": "nlp",
            "workload_kind": "inference",
            "pool": "infer",
            "gpu_model": "l40s",
            "card_count": 3,
            "starts_at": (now - timedelta(minutes=1)).isoformat(),
            "ends_at": (now + timedelta(days=2)).isoformat(),
            "justification": "now, please",
        },
    )
    assert created.status_code == 201, created.text
    approved = httpx.post(
        f"{web_a}/api/v1/requests/{created.json()['id']}/approve/",
        headers={"Authorization": f"Token {admin_token}"},
        json={},
    )
    assert approved.status_code == 200, approved.text
    allocation_id = approved.json()["id"]

    # A worker picks up the provisioning task (no scheduler configured: reserved in the portal).
    def active():
        body = httpx.get(
            f"{web_b}/api/v1/allocations/{allocation_id}/",
            headers={"Authorization": f"Token {token_a}"},
        ).json()
        return body if body["status"] == "active" else None

    body = wait_for(active, "the allocation to be provisioned by a worker")
    assert (body["card_count"], body["team"], body["pool"]) == (3, "nlp", "infer")
    assert Allocation.objects.get(pk=allocation_id).status == "active"
    logs = "".join(log.read_text()[o:] for log, o in zip(worker_logs, offsets, strict=True))
    # Exactly one of the two workers ran the provisioning, once.
    assert logs.count("pools.capacity.tasks.allocation_provision_task[") >= 1
    assert len(re.findall(r"allocation_provision_task\[[^\]]+\] succeeded", logs)) == 1
    assert AuditEvent.objects.filter(action="request.approved").count() == 1


def test_the_token_throttle_is_one_budget_across_both_processes(stack, fleet):
    codes = [
        httpx.post(
            f"{stack['web'][n % 2]}/api/v1/auth/token/",
            data={"username": f"nobody-{n}", "password": "x"},
        ).status_code
        for n in range(21)
    ]

    # 20 a minute per client address in Redis: per-process counters would have allowed 40.
    assert codes == [400] * 20 + [429]


def test_scheduled_work_sent_twice_at_once_runs_once(stack, fleet):
    from pools.audit.models import AuditEvent
    from pools.capacity.models import Allocation, CapacityRequest
    from pools.common.choices import AllocationStatus
    from portal.celery import app as celery_app

    now = timezone.now()

    def allocation(starts, ends):
        request = CapacityRequest.objects.create(
            team=fleet["team"],
            requested_by=fleet["alice"],
            workload_kind="inference",
            pool=fleet["pool"],
            gpu_model=fleet["l40s"],
            card_count=1,
            starts_at=starts,
            ends_at=ends,
            justification="lifecycle",
            status="approved",
            submitted_at=starts,
        )
        return Allocation.objects.create(
            request=request,
            team=fleet["team"],
            pool=fleet["pool"],
            gpu_model=fleet["l40s"],
            card_count=1,
            starts_at=starts,
            ends_at=ends,
            status=AllocationStatus.ACTIVE,
        )

    finished = allocation(now - timedelta(days=3), now - timedelta(minutes=5))
    ending_soon = allocation(now - timedelta(days=3), now + timedelta(days=1))

    celery_app.conf.update(broker_url=REDIS, task_always_eager=False)
    try:
        with celery_app.connection_for_write() as conn:
            results = [
                celery_app.send_task(
                    "pools.capacity.tasks.allocation_lifecycle_task", connection=conn
                )
                for _ in range(2)
            ]
    finally:
        celery_app.conf.update(task_always_eager=True)

    def both_ran():
        logs = "".join((stack["logs"] / f"worker{n}.log").read_text() for n in range(2))
        return all(f"[{r.id}] succeeded" in logs for r in results)

    wait_for(both_ran, "both copies of the lifecycle task to finish")
    finished.refresh_from_db()
    ending_soon.refresh_from_db()
    assert (finished.status, ending_soon.status) == ("ended", "expiring")
    ended = AuditEvent.objects.filter(action="allocation.ended", object_id=str(finished.pk))
    warned = AuditEvent.objects.filter(action="allocation.expiring", object_id=str(ending_soon.pk))
    assert (ended.count(), warned.count()) == (1, 1)


@pytest.fixture(autouse=True)
def _chromium_present():
    if not shutil.which("chromium") and not os.path.exists("/usr/bin/chromium"):
        pytest.fail("chromium is not installed: apt-get install chromium")
