"""Pointing this process's Celery app at another broker for one test (a closed port to play an
outage, kombu's in-memory transport, or a queue of its own on the machine's Redis), and back.

The machine's Redis is shared by everyone working here: an outage is played by a closed port,
never by stopping it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from celery import current_app

# Nothing listens on port 1 (tcpmux) here: a connection is refused at once, as from a Redis
# that is down.
CLOSED_BROKER = "redis://127.0.0.1:1/0"
CLOSED_CACHE = "redis://127.0.0.1:1/1"


def _drop_connections() -> None:
    """Forget the app's broker connections and producers, so the next send uses the broker
    configured now."""
    current_app.close()
    for name in ("_pool", "_producer_pool"):
        for owner in (current_app, current_app.amqp):
            if hasattr(owner, name):
                setattr(owner, name, None)


@contextmanager
def celery_broker(url: str, *, queue: str | None = None) -> Iterator[None]:
    """Within the block tasks are sent to ``url`` (not run eagerly), to ``queue`` if given."""
    conf = current_app.conf
    previous = (conf.task_always_eager, conf.broker_url, conf.task_default_queue)
    conf.update(task_always_eager=False, broker_url=url, task_default_queue=queue or "celery")
    _drop_connections()
    try:
        yield
    finally:
        conf.update(
            task_always_eager=previous[0], broker_url=previous[1], task_default_queue=previous[2]
        )
        _drop_connections()


def catalogue_loaded() -> None:
    """Load the GPU catalogue again: a transactional test starts from an empty database
    (the data migration's rows were flushed by the one before it)."""
    from pools.inventory.catalogue.sync import catalogue_sync
    from pools.inventory.models import GpuModel, GpuModelAlias

    catalogue_sync(GpuModel, GpuModelAlias)
