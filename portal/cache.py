"""The shared cache (Redis), and what the portal does while it does not answer.

Throttle counters, sign-in lockouts (django-axes) and cached readings live in Redis so every
process counts together. When Redis is unreachable a request must still be served (a sign-in
that answers 500 locks everyone out), so :class:`RedisCacheWithLocalFallback` logs a warning
and serves from this process's memory for :data:`FALLBACK_FOR_S` seconds before it asks Redis
again. That fallback is safe, not lax: throttles and lockouts still count, per process (with N
processes a client gets at most N times its budget while Redis is down).
"""

from __future__ import annotations

import logging
import time

from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

FALLBACK_FOR_S = 30.0
_UNREACHABLE = (RedisConnectionError, RedisTimeoutError)
# Per process: when each Redis location may be asked again (time.monotonic()).
_down_until: dict[str, float] = {}


class RedisCacheWithLocalFallback(RedisCache):
    """Django's Redis cache; while Redis is unreachable, this process's memory (logged once per
    outage). Give it short socket timeouts in ``OPTIONS`` so a silent Redis costs a second, not
    a request's whole time budget."""

    def __init__(self, server, params):
        super().__init__(server, params)
        self._location = str(server)
        # LocMemCache instances of one name share their storage: one fallback per process.
        self._local = LocMemCache(
            f"fallback:{self._location}", {"TIMEOUT": params.get("TIMEOUT", 300)}
        )

    def _either(self, name: str, *args, **kwargs):
        if time.monotonic() < _down_until.get(self._location, 0.0):
            return getattr(self._local, name)(*args, **kwargs)
        try:
            return getattr(super(), name)(*args, **kwargs)
        except _UNREACHABLE as exc:
            _down_until[self._location] = time.monotonic() + FALLBACK_FOR_S
            logger.warning(
                "cache unreachable (%s): serving from this process's memory for %.0f s",
                type(exc).__name__,
                FALLBACK_FOR_S,
            )
            return getattr(self._local, name)(*args, **kwargs)

    def add(self, *args, **kwargs):
        return self._either("add", *args, **kwargs)

    def get(self, *args, **kwargs):
        return self._either("get", *args, **kwargs)

    def set(self, *args, **kwargs):
        return self._either("set", *args, **kwargs)

    def touch(self, *args, **kwargs):
        return self._either("touch", *args, **kwargs)

    def delete(self, *args, **kwargs):
        return self._either("delete", *args, **kwargs)

    def get_many(self, *args, **kwargs):
        return self._either("get_many", *args, **kwargs)

    def has_key(self, *args, **kwargs):
        return self._either("has_key", *args, **kwargs)

    def incr(self, *args, **kwargs):
        return self._either("incr", *args, **kwargs)

    def set_many(self, *args, **kwargs):
        return self._either("set_many", *args, **kwargs)

    def delete_many(self, *args, **kwargs):
        return self._either("delete_many", *args, **kwargs)

    def clear(self, *args, **kwargs):
        return self._either("clear", *args, **kwargs)

    def ping(self) -> None:
        """Ask Redis itself (never the fallback); raises what redis raises when unreachable."""
        self._cache.get_client(write=True).ping()
