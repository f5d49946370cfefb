"""The portal's Celery app as the worker-kill fault test runs it (``celery -A
integration.faults.stalling_worker worker``): the real app and tasks, with two test-only changes
read from the environment.

- ``FAULT_VISIBILITY_TIMEOUT_S``: the Redis visibility timeout, seconds (production: 960, from
  ``TASK_TIME_LIMIT_S``; a test cannot wait 16 minutes). The unacknowledged-message keys are
  named after ``CELERY_QUEUE`` so this worker never restores (hands out again) a message of
  another worker sharing the machine's Redis, and a live worker scans them every second
  (kombu's default: every 100 s).
- ``FAULT_STALL_FILE``: when set, the sizing arithmetic of a running estimate first writes
  this file (the test's cue that the task is in the middle: the estimate says ``running``),
  then sleeps until the worker is killed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from celery.signals import worker_ready

from portal.celery import app

_QUEUE = os.environ["CELERY_QUEUE"]
app.conf.broker_transport_options = {
    **app.conf.broker_transport_options,
    "visibility_timeout": float(os.environ["FAULT_VISIBILITY_TIMEOUT_S"]),
    "unacked_key": f"{_QUEUE}-unacked",
    "unacked_index_key": f"{_QUEUE}-unacked-index",
    "unacked_mutex_key": f"{_QUEUE}-unacked-mutex",
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
}


@worker_ready.connect
def _stall_the_arithmetic(**_kwargs) -> None:
    stall_file = os.environ.get("FAULT_STALL_FILE")
    if not stall_file:
        return
    from pools.sizing import services

    def stalled(**_kwargs):
        Path(stall_file).write_text(str(os.getpid()))
        time.sleep(3600)

    services.sizing_results = stalled


__all__ = ["app"]
