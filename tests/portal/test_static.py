"""Static files as the image builds and serves them: ``collectstatic`` with ``DEBUG=0``
(WhiteNoise's hashed, compressed manifest storage) succeeds, and a page using the base template
then answers 200.

Each case runs in a fresh interpreter, since settings are read once per process.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """``args`` in a fresh interpreter. The timeout only keeps a hung command from hanging the
    suite: compressing every static file (gzip and Brotli) took 166 s on a loaded 2-core machine."""
    return subprocess.run(
        [sys.executable, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=600
    )


def production_env(static_root: Path, **extra: str) -> dict[str, str]:
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
    env.update(
        PYTHONPATH=str(ROOT),
        ENV_FILE=os.devnull,
        DEBUG="0",
        SECRET_KEY="static-test-" + "k" * 50,
        DATABASE_URL=f"sqlite:///{static_root.parent / 'static-test.sqlite3'}",
        STATIC_ROOT=str(static_root),
        SECURE_SSL_REDIRECT="0",
        **extra,
    )
    return env


def test_no_vendored_file_names_a_source_map_that_is_not_in_the_repository():
    missing = []
    for path in (ROOT / "static").rglob("*"):
        if path.suffix not in {".js", ".css"}:
            continue
        for name in re.findall(r"sourceMappingURL=(\S+?)(?:\s|\*/|$)", path.read_text("utf-8")):
            if not (path.parent / name).exists():
                missing.append(f"{path.relative_to(ROOT)} -> {name}")
    assert missing == []


@pytest.mark.subprocess
def test_collectstatic_with_debug_off_writes_hashed_compressed_files_and_pages_answer(tmp_path):
    static_root = tmp_path / "collected"
    env = production_env(static_root)

    result = run([str(ROOT / "manage.py"), "collectstatic", "--noinput"], env, tmp_path)

    assert result.returncode == 0, result.stderr
    manifest = json.loads((static_root / "staticfiles.json").read_text())
    hashed = manifest["paths"]["vendor/chart.umd.min.js"]
    assert re.fullmatch(r"vendor/chart\.umd\.min\.[0-9a-f]{12}\.js", hashed)
    assert (static_root / hashed).exists()
    assert (static_root / (hashed + ".gz")).exists()  # CompressedManifestStaticFilesStorage

    # The login page renders {% static %} through that manifest: a missing entry would be a 500.
    code = (
        "import os; os.environ['DJANGO_SETTINGS_MODULE'] = 'portal.settings.base'\n"
        "import django; django.setup()\n"
        "from django.test import Client\n"
        "r = Client().get('/login/', HTTP_HOST='127.0.0.1')\n"
        "print(r.status_code)\n"
        "print(r.content.decode())\n"
    )
    page = run(["-c", code], env, tmp_path)
    assert page.returncode == 0, page.stderr
    status, _, body = page.stdout.partition("\n")
    assert status == "200"
    assert re.search(r"/static/vendor/htmx\.min\.[0-9a-f]{12}\.js", body), body
    assert re.search(r"/static/css/portal\.[0-9a-f]{12}\.css", body), body
    for url in re.findall(r'/static/([^"\']+)', body):
        assert (static_root / url).exists(), url
