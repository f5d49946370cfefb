"""The PostgreSQL database a benchmark runs the portal against, created and migrated on demand."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def ensure_database(url: str, env: Mapping[str, str]) -> None:
    """Create the database ``url`` names (``postgres://.../<name>``) when absent, then migrate it
    with ``manage.py migrate`` run under ``env`` (a no-op when up to date). Raises
    ``psycopg.OperationalError`` when the server is unreachable and
    ``subprocess.CalledProcessError`` when a migration fails."""
    import psycopg

    name = url.rsplit("/", 1)[1]
    admin_url = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not found:
            conn.execute(f'CREATE DATABASE "{name}"')
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "migrate", "-v", "0"],
        check=True,
        capture_output=True,
        env=dict(env),
        cwd=ROOT,
    )
