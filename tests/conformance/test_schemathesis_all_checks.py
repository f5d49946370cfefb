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
from pathlib import Path

import httpx
import pytest
from broker_support import catalogue_loaded
from django.core.management import call_command
from django.db import connection

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
def web(tokens, tmp_path_factory) -> Iterator[str]:
    """One gunicorn (2 sync workers) on the test database; its base URL."""
    db = connection.settings_dict
    port = _free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "DEBUG": "0",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "CELERY_TASK_ALWAYS_EAGER": "1",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SECURE_SSL_REDIRECT": "0",
    }
    log = tmp_path_factory.mktemp("conformance") / "web.log"
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


def run_schemathesis(url: str, token: str, report: Path) -> dict:
    """The CLI's JSON report of one run with every check."""
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
    finished = subprocess.run(
        command, capture_output=True, text=True, timeout=1800, cwd=report.parent
    )
    assert report.exists(), finished.stdout[-3000:] + finished.stderr[-3000:]
    result = json.loads(report.read_text())
    result["_output"] = finished.stdout
    return result


def test_schemathesis_all_checks_as_admin_and_member(web, tokens, tmp_path):
    """One run per role on the same data (loading the demo takes ~40 s)."""
    defects = {}
    for role in ("admin", "member"):
        defects[role] = _run_and_report(web, tokens[role], role, tmp_path)
    assert defects == {"admin": {}, "member": {}}, defects


def _run_and_report(web: str, token: str, role: str, tmp_path: Path) -> dict[str, int]:
    """Run as ``role``; print the counts; the failures of checks that must not fail."""
    result = run_schemathesis(web, token, tmp_path / f"{role}.json")

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
