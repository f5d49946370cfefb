"""The command lines of the real processes the integration tier starts (one definition, so a
change of flags reaches every test): a Celery worker and a gunicorn web process."""

from __future__ import annotations

import sys


def celery_worker_command(*, name: str | None = None, app: str = "portal") -> list[str]:
    """A solo-pool worker of the portal's Celery app (or of ``app``, a module wrapping it),
    quiet on the broker (no gossip, mingle or heartbeat: the tests start and stop workers
    within seconds)."""
    command = [sys.executable, "-m", "celery", "-A", app, "worker", "--pool", "solo"]
    if name:
        command += ["-n", name]
    return command + [
        "--loglevel", "info", "--without-gossip", "--without-mingle", "--without-heartbeat",
    ]  # fmt: skip


def gunicorn_command(port: int, *, workers: int = 2, timeout_s: int = 60) -> list[str]:
    """The portal's WSGI app on 127.0.0.1:``port`` with ``workers`` processes."""
    return [
        sys.executable, "-m", "gunicorn", "portal.wsgi", "--bind", f"127.0.0.1:{port}",
        "--workers", str(workers), "--timeout", str(timeout_s),
    ]  # fmt: skip
