"""Waiting work at scale (issue #33, "Speed"): reading and storing 1,000 pending jobs < 2 s.

A fake slurmrestd on loopback (``http.server`` in a thread) answers in v0.0.42's shapes, built
from the answers a real 24.11.5 gave (``tests/fixtures/slurm/rest_v0.0.42/``: one pending job
of ``jobs.json`` copied per job, the running job likewise; ``associations.json`` and
``partitions.json`` as recorded, the account renamed): ``BENCH_JOBS`` (1,000) pending jobs of
20 team accounts, 50 each, with the reasons a busy cluster shows (AssocGrpGRES 40 %,
Resources 30 %, Priority 20 %, QOSMaxGRESPerUser 5 %, Dependency 3 %, and 2 % a code no Slurm
has, which must be kept untranslated), and 4 running jobs per account holding the cap (2 cards
each, GrpTRES gres/gpu:a100=8). The real adapter (httpx, JWT auth, the v0.0.42 dialect's
parser) reads it; ``pending_work_refresh(force=True)`` then reads the caps of the 20 capped
accounts and replaces the rows in PostgreSQL (database ``gpu_pool_portal_bench_waiting``,
dropped and recreated each run).

Reported over ``BENCH_RUNS`` (5) refreshes: p50 / max wall seconds, the HTTP requests per
refresh, rows stored, translated share. Target: p50 < 2 s.
Run: ``.venv/bin/python benchmarks/waiting.py`` (PostgreSQL on 127.0.0.1:5432).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.base")
os.environ["DATABASE_URL"] = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpu_pool_portal_bench_waiting"
)
os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("SECRET_KEY", "bench-waiting")
os.environ.setdefault("ALLOWED_HOSTS", "localhost")

JOBS = int(os.environ.get("BENCH_JOBS", "1000"))
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
ACCOUNTS = [f"bench-team-{i:02d}" for i in range(20)]
VERSION = "v0.0.42"
RECORDED = ROOT / "tests" / "fixtures" / "slurm" / f"rest_{VERSION}"
REASONS = (
    [("AssocGrpGRES", 40), ("Resources", 30), ("Priority", 20)]
    + [("QOSMaxGRESPerUser", 5), ("Dependency", 3), ("NoSuchSlurmReason", 2)]
)  # fmt: skip
TARGET_S = 2.0


def recorded(name: str) -> dict:
    return json.loads((RECORDED / f"{name}.json").read_text())["body"]


def wrapped(number: int) -> dict:
    return {"infinite": False, "number": number, "set": True}


def build_jobs() -> dict:
    """The ``GET /jobs`` answer: the recorded pending and running jobs, copied and renumbered."""
    body = recorded("jobs")
    pending_proto = next(j for j in body["jobs"] if j["job_state"] == ["PENDING"])
    running_proto = next(j for j in body["jobs"] if j["job_state"] == ["RUNNING"])
    reasons = [code for code, share in REASONS for _ in range(share)]
    jobs = []
    now = int(time.time())
    for index in range(JOBS):
        job = copy.deepcopy(pending_proto)
        job["job_id"] = 10_000 + index
        job["account"] = ACCOUNTS[index % len(ACCOUNTS)]
        job["state_reason"] = reasons[index % len(reasons)]
        job["name"] = f"train-{index}"
        job["dependency"] = "afterok:42" if job["state_reason"] == "Dependency" else ""
        job["submit_time"] = wrapped(now - 600 + index % 600)
        jobs.append(job)
    for index, account in enumerate(ACCOUNTS * 4):
        job = copy.deepcopy(running_proto)
        job["job_id"] = 5_000 + index
        job["account"] = account
        job["tres_alloc_str"] = "cpu=1,mem=100M,node=1,billing=1,gres/gpu=2,gres/gpu:a100=2"
        job["start_time"] = wrapped(now - 3600)
        job["end_time"] = wrapped(now - 3600 + 3600 * (2 + index % 5))
        jobs.append(job)
    return {**body, "jobs": jobs}


class Fake(BaseHTTPRequestHandler):
    jobs_body = b""
    requests = 0

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        Fake.requests += 1
        url = urlparse(self.path)
        if url.path == f"/slurm/{VERSION}/jobs":
            payload = Fake.jobs_body
        elif url.path == f"/slurmdb/{VERSION}/associations":
            account = parse_qs(url.query).get("account", [""])[0]
            body = recorded("associations")
            association = copy.deepcopy(body["associations"][0])
            association["account"] = account
            association["lineage"] = f"/{account}/"
            association["max"]["tres"]["total"] = [
                {"count": 8, "id": 1002, "name": "gpu:a100", "type": "gres"}
            ]
            payload = json.dumps({**body, "associations": [association]}).encode()
        elif url.path == f"/slurm/{VERSION}/partitions":
            payload = json.dumps(recorded("partitions")).encode()
        else:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def fresh_database() -> None:
    import psycopg

    name = os.environ["DATABASE_URL"].rsplit("/", 1)[1]
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as db:
        db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        db.execute(f'CREATE DATABASE "{name}"')


def main() -> None:
    Fake.jobs_body = json.dumps(build_jobs()).encode()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Fake)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    fresh_database()

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    from pools.tenancy.models import Team
    from pools.waiting import services
    from pools.waiting.models import PendingWork
    from scheduler_adapters.slurm.client import SlurmRestAdapter

    Team.objects.bulk_create([Team(slug=a, name=a) for a in ACCOUNTS])
    adapter = SlurmRestAdapter(
        url=f"http://127.0.0.1:{server.server_address[1]}",
        user="portal",
        cluster="portal",
        token_provider=lambda user: "bench-token",
        api_version=VERSION,
    )
    services.scheduler_adapter = lambda name: adapter if name == "slurm" else None

    timings, requests = [], []
    for _ in range(RUNS):
        before = Fake.requests
        started = time.perf_counter()
        report = services.pending_work_refresh(force=True)
        timings.append(time.perf_counter() - started)
        requests.append(Fake.requests - before)
        assert report.errors == {}, report.errors
    rows = PendingWork.objects.count()
    translated = PendingWork.objects.filter(translated=True).count()
    untranslated = PendingWork.objects.filter(reason_code="NoSuchSlurmReason").count()
    adapter.close()
    server.shutdown()

    p50 = statistics.median(timings)
    print(f"waiting work: {JOBS} pending jobs, {len(ACCOUNTS)} teams, Slurm {VERSION} over HTTP")
    print(f"  refresh p50 {p50:.3f} s, max {max(timings):.3f} s over {RUNS} runs")
    print(f"  HTTP requests per refresh: {statistics.median(requests):.0f}")
    print(f"  rows stored {rows}; translated {translated}; kept untranslated {untranslated}")
    assert rows == JOBS, rows
    assert untranslated == JOBS * 2 // 100, untranslated  # 2 of every 100 reasons
    verdict = "PASS" if p50 < TARGET_S else "FAIL"
    print(f"  target p50 < {TARGET_S:.0f} s: {verdict}")
    if verdict == "FAIL":
        sys.exit(1)


if __name__ == "__main__":
    main()
