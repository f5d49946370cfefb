"""schemathesis with ``--checks all``, its own job (``make test-conformance``, marker
``conformance``): the real CLI against the portal as production serves it (gunicorn,
``DEBUG=0``, PostgreSQL) with the demo's data, as a pool admin and as a team member.

Each run reports (printed, and asserted where the portal promises it) the operations tested,
the test cases generated, and the failures per check by schemathesis' code:

- must be 0: server errors (ST101), undocumented status codes (ST103), responses violating
  their schema (ST108), undocumented content types, missing documented headers, and every
  other check but the two below;
- reported, not failed: ST201 (a schema-violating request accepted) and ST202 (a schema-valid
  request rejected). The fuzzer does not know which slugs and ids exist, so it names objects
  that do not (``pool=0``: a 400 naming the field) and writes cross-field combinations the
  schema cannot state (``ceiling_cards >= floor_cards``); an empty optional query parameter
  means "any", and DRF reads ``1`` as ``true`` and a number as text. Each is a rule of the
  portal, not a defect; the counts are printed so a change shows.

Not exercised: ``DELETE /auth/token/`` (it revokes the token the run signs in with; tested in
tests/portal/test_auth_token.py), NUL characters (refused on purpose with 400 before any view,
``portal.middleware.InputCharactersMiddleware``; a JSON schema cannot say "no NUL"), and the
stateful phase (it needs links between operations the schema does not declare).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import psycopg
import pytest
from broker_support import catalogue_loaded
from django.core.management import call_command
from django.db import connection
from psycopg import sql

pytestmark = [pytest.mark.conformance, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
# Failures that are the portal's rules, not defects (see the module docstring).
REPORTED_ONLY = {"ST201", "ST202"}
EXAMPLES_PER_OPERATION = 10


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def tokens(transactional_db) -> dict[str, str]:
    """The demo's data (``load_demo``, ``load_demo_billing``) and a token for ``admin`` (pool
    admin) and ``alice`` (member of team nlp). Committed, so gunicorn sees it; flushed after."""
    from django.contrib.auth import get_user_model

    from pools.access.services import api_token_create

    catalogue_loaded()
    call_command("load_demo", verbosity=0)
    call_command("load_demo_billing", verbosity=0)
    users = get_user_model().objects
    return {
        role: api_token_create(user=users.get(username=name), client="schemathesis")[1]
        for role, name in (("admin", "admin"), ("member", "alice"))
    }


@pytest.fixture
def databases(tokens) -> Iterator[dict[str, str]]:
    """The database each role's run writes to: the admin's is the test database with the
    demo's data, the member's a copy of it (``CREATE DATABASE … TEMPLATE``), so the two runs go
    side by side and neither sees the other's writes. The copy is dropped afterwards."""
    db = connection.settings_dict
    copy = f"{db['NAME']}_member"
    connection.close()  # a template database must have no other session
    with psycopg.connect(_server_dsn(db), autocommit=True) as server:
        server.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(copy))
        )
        server.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(copy), sql.Identifier(db["NAME"])
            )
        )
    try:
        yield {"admin": db["NAME"], "member": copy}
    finally:
        with psycopg.connect(_server_dsn(db), autocommit=True) as server:
            server.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(copy))
            )


def _server_dsn(db: dict) -> str:
    return f"host={db['HOST']} port={db['PORT']} user={db['USER']} dbname=postgres"


@contextmanager
def gunicorn(database: str, log: Path) -> Iterator[str]:
    """One gunicorn (2 sync workers) on ``database``; its base URL."""
    db = connection.settings_dict
    port = _free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "DEBUG": "0",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{database}",
        "CELERY_TASK_ALWAYS_EAGER": "1",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SECURE_SSL_REDIRECT": "0",
    }
    command = [sys.executable, "-m", "gunicorn", "portal.wsgi", "--bind", f"127.0.0.1:{port}",
               "--workers", "2", "--timeout", "60"]  # fmt: skip
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180  # shared cores: gunicorn can take a minute to start
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        else:
            raise AssertionError(f"gunicorn did not start:\n{log.read_text()[-3000:]}")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def start_schemathesis(url: str, token: str, report: Path) -> subprocess.Popen:
    """One run with every check, started; its JSON report is written to ``report``."""
    command = [
        str(SCHEMATHESIS), "run", f"{url}/api/schema/?format=json", "--url", url,
        "--checks", "all", "-H", f"Authorization: Token {token}",
        "--phases", "examples,coverage,fuzzing", "-n", str(EXAMPLES_PER_OPERATION),
        # one worker: CPython 3.11 compiling in several threads at once can fail schemathesis'
        # own code generation ("AST constructor recursion depth mismatch", python/cpython#106905)
        "--seed", "27", "--workers", "1", "--no-shrink", "--no-color",
        "--generation-database", "none", "--generation-allow-x00", "false",
        "--exclude-operation-id", "auth_token_destroy",
        "--report", "json", "--report-json-path", str(report),
    ]  # fmt: skip
    # run where it may write its cache (.schemathesis/), not in the checkout
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=report.parent
    )


def finished_report(run: subprocess.Popen, report: Path) -> dict:
    """The CLI's JSON report of a run started by :func:`start_schemathesis`."""
    stdout, stderr = run.communicate(timeout=1800)
    assert report.exists(), stdout[-3000:] + stderr[-3000:]
    result = json.loads(report.read_text())
    result["_output"] = stdout
    return result


def test_schemathesis_all_checks_as_admin_and_member(databases, tokens, tmp_path):
    """One run per role, side by side, each on its own copy of the demo's data (loading the
    demo takes ~40 s; the two runs in turn took ~10 min on two cores, side by side ~6)."""
    with ExitStack() as stack:
        urls = {
            role: stack.enter_context(gunicorn(database, tmp_path / f"web-{role}.log"))
            for role, database in databases.items()
        }
        runs = {
            role: start_schemathesis(url, tokens[role], tmp_path / f"{role}.json")
            for role, url in urls.items()
        }
        results = {
            role: finished_report(run, tmp_path / f"{role}.json") for role, run in runs.items()
        }
    defects = {role: _report(result, role, tmp_path) for role, result in results.items()}
    assert defects == {"admin": {}, "member": {}}, defects


def _report(result: dict, role: str, tmp_path: Path) -> dict[str, int]:
    """Print the counts of the run as ``role``; the failures of checks that must not fail."""

    per_code = {f["code"]: f["count"] for f in result["failures"]}
    titles = {f["code"]: f["title"] for f in result["failures"]}
    print(
        f"\nschemathesis --checks all as {role}: {result['operations']['tested']} operations, "
        f"{result['test_cases']['generated']} test cases, {result['running_time']:.0f} s; "
        f"failures per check: "
        + (", ".join(f"{c} {titles[c]} {n}" for c, n in sorted(per_code.items())) or "none")
    )
    assert result["operations"]["tested"] >= 80  # every operation but the token revocation
    assert result["test_cases"]["generated"] >= 5 * result["operations"]["tested"]
    assert result["errors"] == [], result["_output"][-6000:]
    defects = {code: n for code, n in per_code.items() if code not in REPORTED_ONLY}
    if defects:
        print(_sections_naming(result["_output"], defects))
    (tmp_path / f"{role}.out").write_text(result["_output"])
    return defects


def _sections_naming(output: str, codes: dict[str, int]) -> str:
    """The operations' sections of schemathesis' output that name one of ``codes`` (its output
    puts each operation under a ``____ METHOD /path ____`` rule), so the defects are not lost
    behind the reported-only failures."""
    sections = re.split(r"\n(?=_{3,} [A-Z]+ /)", output)
    return "\n".join(s for s in sections if any(f"- {code} " in s for code in codes))
