"""A burst of simultaneous approvals against the SQLite demo database, through a real server.

Builds a fresh SQLite file (migrations, one Kubernetes pool of ``BURST_CARDS`` L40S cards, one
team, ``BURST_REQUESTS`` submitted one-card requests for the same week), starts gunicorn on it
(``BURST_WORKERS`` processes x ``BURST_THREADS`` threads, the demo's settings: ``DEBUG=1``,
eager tasks) and fires every ``POST /api/v1/requests/{id}/approve/`` at once from as many client
threads, released together by a barrier. Prints one JSON object: the HTTP statuses and error
codes counted, cards granted, holding allocations, latency p50/max in ms, and ``ok`` — true when
no answer was a 5xx, exactly ``min(requests, cards)`` were granted and the rest were refused with
409 ``insufficient_capacity``. Exit status 0 when ok.

Run: ``.venv/bin/python benchmarks/sqlite_burst.py`` (no services needed);
``tests/portal/test_sqlite_burst.py`` runs it with the defaults (30 requests, 20 cards).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REQUESTS = int(os.environ.get("BURST_REQUESTS", "30"))
CARDS = int(os.environ.get("BURST_CARDS", "20"))
WORKERS = int(os.environ.get("BURST_WORKERS", "3"))
THREADS = int(os.environ.get("BURST_THREADS", "10"))
CARDS_PER_NODE = 4


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def demo_env(db_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CELERY_"))}
    env.update(
        PYTHONPATH=str(ROOT),
        ENV_FILE=os.devnull,
        DJANGO_SETTINGS_MODULE="portal.settings.base",
        DATABASE_URL=f"sqlite:///{db_path}",
        DEBUG="1",
        SECURE_SSL_REDIRECT="0",
        CACHE_URL="",
    )
    return env


def build(env: dict[str, str]) -> tuple[str, list[int]]:
    """Migrate and create the fleet, team, admin token and requests; return (token, ids)."""
    code = f"""
import json
from datetime import timedelta
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.contrib.auth import get_user_model
from django.utils import timezone
from pools.access.services import api_token_create
from pools.models import CapacityRequest, Gpu, GpuModel, Membership, Node, Pool, Team
from pools.inventory.services.driver_groups import driver_group_for_version

l40s = GpuModel.objects.get(slug="l40s")
pool = Pool.objects.create(slug="infer", name="Inference", scheduler="kubernetes")
group = driver_group_for_version("550.54.15")
cards = {CARDS}
for n in range((cards + {CARDS_PER_NODE} - 1) // {CARDS_PER_NODE}):
    node = Node.objects.create(hostname=f"inf-{{n:02d}}", pool=pool, scheduler="kubernetes",
                               state="up", driver_version="550.54.15", driver_group=group)
    for i in range(min({CARDS_PER_NODE}, cards - n * {CARDS_PER_NODE})):
        Gpu.objects.create(node=node, index=i, gpu_model=l40s, raw_model_name=l40s.vendor_name,
                           health="ok")
User = get_user_model()
admin = User.objects.create_user("burst-admin", password="x", is_staff=True)
member = User.objects.create_user("burst-member", password="x")
team = Team.objects.create(slug="nlp", name="NLP", cost_centre="CC-1")
Membership.objects.create(team=team, user=member, role="manager")
start = (timezone.now() + timedelta(days=7)).replace(hour=9, minute=0, second=0, microsecond=0)
ids = [
    CapacityRequest.objects.create(
        team=team, requested_by=member, workload_kind="inference", pool=pool, gpu_model=l40s,
        card_count=1, starts_at=start, ends_at=start + timedelta(days=7),
        justification="burst", status="submitted", submitted_at=timezone.now(),
    ).pk
    for _ in range({REQUESTS})
]
print(json.dumps({{"token": api_token_create(user=admin, client="burst")[1], "ids": ids}}))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return data["token"], data["ids"]


def holding(env: dict[str, str]) -> tuple[int, int]:
    code = """
import django
django.setup()
from django.db.models import Sum
from pools.models import Allocation
qs = Allocation.objects.holding()
print(qs.count(), qs.aggregate(s=Sum("card_count"))["s"] or 0)
"""
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    count, cards = out.stdout.split()
    return int(count), int(cards)


def wait_ready(url: str, proc: subprocess.Popen, timeout_s: float = 60) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {proc.returncode}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError("gunicorn did not answer /healthz")


def fire(url: str, token: str, ids: list[int]) -> list[tuple[int, str, float]]:
    import httpx

    barrier = threading.Barrier(len(ids))
    results: list[tuple[int, str, float]] = [(0, "", 0.0)] * len(ids)

    def one(slot: int, request_id: int) -> None:
        with httpx.Client(base_url=url, timeout=60) as client:
            barrier.wait()
            started = time.perf_counter()
            response = client.post(
                f"/api/v1/requests/{request_id}/approve/",
                json={},
                headers={"Authorization": f"Token {token}"},
            )
            elapsed = (time.perf_counter() - started) * 1000
            try:
                code = response.json().get("code", "") if response.status_code >= 400 else ""
            except ValueError:
                code = "not-json"
            results[slot] = (response.status_code, code, elapsed)

    threads = [threading.Thread(target=one, args=(n, i)) for n, i in enumerate(ids)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        env = demo_env(Path(tmp) / "burst.sqlite3")
        token, ids = build(env)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "portal.wsgi",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                str(WORKERS),
                "--threads",
                str(THREADS),
                "--timeout",
                "120",
                "--log-level",
                "warning",
            ],  # fmt: skip
            env=env,
            cwd=ROOT,
        )
        try:
            wait_ready(url, server)
            results = fire(url, token, ids)
        finally:
            server.terminate()
            server.wait(timeout=30)
        allocations, cards = holding(env)
    statuses = Counter(status for status, _, _ in results)
    codes = Counter(code for _, code, _ in results if code)
    latencies = sorted(ms for _, _, ms in results)
    expected_granted = min(REQUESTS, CARDS)
    report = {
        "requests": REQUESTS,
        "cards": CARDS,
        "gunicorn": f"{WORKERS} workers x {THREADS} threads",
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "codes": dict(codes),
        "holding_allocations": allocations,
        "cards_granted": cards,
        "p50_ms": round(statistics.median(latencies), 1),
        "max_ms": round(latencies[-1], 1),
    }
    report["ok"] = (
        not any(status >= 500 for status in statuses)
        and statuses.get(200, 0) == expected_granted
        and statuses.get(409, 0) == REQUESTS - expected_granted
        and codes.get("insufficient_capacity", 0) == REQUESTS - expected_granted
        and cards == expected_granted
    )
    print(json.dumps(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
