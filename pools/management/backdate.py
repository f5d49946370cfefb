"""The demo's past, told at the time it happened.

Some demo allocations must have started days ago (idle findings, elastic history stand on
them). Granting them now and moving their window back afterwards left their requests submitted
and approved after the allocation started, and their audit events -- append-only, a
PostgreSQL trigger refuses any UPDATE -- could not be moved with them. So the loader runs the
services for them under :func:`demo_clock`: every ``timezone.now()`` (the services' own and
the ``auto_now_add`` stamps of requests, allocations and audit events) reads an earlier
instant, and the request, its decision, the allocation and the events are written as they
would have been then.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from django.utils import timezone


@contextmanager
def demo_clock(at: datetime) -> Iterator[None]:
    """Inside, ``django.utils.timezone.now()`` reads ``at`` (aware) plus the real time elapsed
    since entering, so successive steps keep their order. Demo loaders only: it patches the
    process-wide function (the loader is single-threaded); ``ValueError`` for a naive ``at``."""
    if timezone.is_naive(at):
        raise ValueError("demo_clock needs an aware datetime")
    real_now = timezone.now
    offset = at - real_now()
    timezone.now = lambda: real_now() + offset
    try:
        yield
    finally:
        timezone.now = real_now
