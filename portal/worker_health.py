"""The Celery worker's liveness: a heartbeat file the worker process touches, and the probe that
reads its age (``python -m portal.worker_health``; the worker's livenessProbe in
deploy/kubernetes/base/worker.yaml and its healthcheck in docker-compose.yml).

The probe it replaces, ``celery inspect ping``, asks the worker through the broker: during a
Redis outage every worker fails it and Kubernetes restarted them all, which loses nothing
(tasks are acknowledged late) but turns an outage of the broker into a crash loop of workers
that would have reconnected by themselves. The heartbeat asks the process instead: a thread
started at ``worker_init`` (before the worker first connects, so a worker that starts during
an outage is alive too) rewrites the file every ``WORKER_HEARTBEAT_S`` seconds (default 30);
the probe passes while the file is younger than ``WORKER_HEARTBEAT_MAX_AGE_S`` (default 120,
four beats). What it does not see: a task running long (the hard time limit ends it,
``TASK_TIME_LIMIT_S``) or a main loop stuck while the process lives.

``WORKER_HEARTBEAT_FILE`` (environment) names the file; unset, no thread starts and the probe
fails saying so. Environment, not Django settings, so the probe starts in milliseconds.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

from celery.signals import worker_init

DEFAULT_INTERVAL_S = 30.0
DEFAULT_MAX_AGE_S = 120.0


def _beat(path: Path, interval_s: float, stop: threading.Event) -> None:
    while True:
        path.write_text(f"{time.time():.0f}\n", encoding="ascii")
        if stop.wait(interval_s):
            return


def heartbeat_start(path: Path, interval_s: float = DEFAULT_INTERVAL_S) -> threading.Event:
    """Touch ``path`` now and every ``interval_s`` seconds from a daemon thread; set the
    returned event to stop it."""
    stop = threading.Event()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{time.time():.0f}\n", encoding="ascii")
    threading.Thread(
        target=_beat, args=(path, interval_s, stop), name="worker-heartbeat", daemon=True
    ).start()
    return stop


@worker_init.connect
def _heartbeat_when_the_worker_starts(**_kwargs) -> None:
    name = os.environ.get("WORKER_HEARTBEAT_FILE")
    if name:
        interval = float(os.environ.get("WORKER_HEARTBEAT_S", DEFAULT_INTERVAL_S))
        heartbeat_start(Path(name), interval)


def heartbeat_age_s(path: Path, now: float | None = None) -> float | None:
    """Seconds since ``path`` was last written, ``None`` when it does not exist."""
    try:
        written = path.stat().st_mtime
    except FileNotFoundError:
        return None
    return (time.time() if now is None else now) - written


def probe(environ: dict[str, str] | None = None) -> tuple[int, str]:
    """``(exit status, message)``: 0 when the heartbeat is fresh, 1 otherwise."""
    environ = os.environ if environ is None else environ
    name = environ.get("WORKER_HEARTBEAT_FILE")
    if not name:
        return 1, "WORKER_HEARTBEAT_FILE is not set"
    max_age = float(environ.get("WORKER_HEARTBEAT_MAX_AGE_S", DEFAULT_MAX_AGE_S))
    age = heartbeat_age_s(Path(name))
    if age is None:
        return 1, f"no heartbeat file {name}"
    if age > max_age:
        return 1, f"heartbeat {age:.0f} s old (limit {max_age:.0f} s)"
    return 0, f"heartbeat {age:.0f} s old"


if __name__ == "__main__":
    status, message = probe()
    print(message)
    sys.exit(status)
