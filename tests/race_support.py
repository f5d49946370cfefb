"""Approvals racing on real PostgreSQL: every request approved in its own thread and database
connection, all released at once by a barrier. The harness of the approval race tests
(``tests/pools/capacity/test_approval_race.py``, ``test_shape_race.py``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from django.db import connections

from pools.capacity.models import CapacityRequest
from pools.capacity.services.requests import capacity_request_approve
from pools.common.errors import InsufficientCapacity


def approve_at_once(
    pending: Sequence[CapacityRequest],
    admin,
    *,
    refused: Callable[[InsufficientCapacity], str],
) -> dict[int, str]:
    """Request id -> outcome of approving every request of ``pending`` at once as ``admin``:
    ``"approved"``, ``refused(error)`` for :class:`InsufficientCapacity`, or ``"error: <type>:
    <message>"`` for anything else (a failure of the invariant under test). A thread still
    running after 120 s leaves its request out, so a test that counts the outcomes fails."""
    barrier = threading.Barrier(len(pending))
    outcomes: dict[int, str] = {}
    lock = threading.Lock()

    def approve(request: CapacityRequest) -> None:
        try:
            barrier.wait(timeout=30)
            capacity_request_approve(request=request, actor=admin)
            result = "approved"
        except InsufficientCapacity as exc:
            result = refused(exc)
        except Exception as exc:  # any other outcome is a failure of the invariant test
            result = f"error: {type(exc).__name__}: {exc}"
        finally:
            connections.close_all()
        with lock:
            outcomes[request.pk] = result

    threads = [threading.Thread(target=approve, args=(r,)) for r in pending]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return outcomes
