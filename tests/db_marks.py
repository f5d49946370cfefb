"""The ``postgresql`` mark: a test that needs PostgreSQL (row locks, advisory locks, triggers,
``synchronous_commit``) says so with ``@pytest.mark.postgresql``, and on another database it
fails rather than skips, so a CI run on the wrong database cannot pass it unseen."""

from __future__ import annotations

import pytest


def require_postgresql(item: pytest.Item) -> None:
    """Fail ``item`` (before it runs) when it is marked ``postgresql`` and the default
    database is not PostgreSQL; nothing otherwise."""
    if item.get_closest_marker("postgresql") is None:
        return
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.fail(f"{item.nodeid} needs PostgreSQL, not {connection.vendor}", pytrace=False)
