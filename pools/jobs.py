"""How services hand work to Celery: retry back-off shared by the tasks."""

from __future__ import annotations

MAX_RETRIES = 8


def _backoff(retries: int) -> int:
    """Seconds before retry ``retries`` + 1: 5, 10, 20 … capped at 10 minutes."""
    return min(600, 5 * 2**retries)
