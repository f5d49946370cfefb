"""The admin dashboard's cluster panel: each cluster's status and reason, for one query
whatever the number of clusters (issue #35: at most 2)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from factories import ClusterFactory, PoolFactory

from pools.choices import ClusterStatus

pytestmark = pytest.mark.django_db


def queries(client) -> tuple[int, str]:
    """(queries, page); and of them exactly one reads the clusters table."""
    with CaptureQueriesContext(connection) as captured:
        response = client.get("/dashboard/")
    assert response.status_code == 200
    assert [q["sql"] for q in captured if '"pools_cluster"' in q["sql"]].__len__() == 1
    return len(captured), response.content.decode()


def test_the_panel_adds_one_query_whatever_the_number_of_clusters(admin_page):
    queries(admin_page)  # warm the per-process caches (stranded snapshot, node kinds)
    none, body = queries(admin_page)
    assert "data-clusters" not in body

    ClusterFactory(
        slug="c0",
        name="Legacy",
        status=ClusterStatus.UNREACHABLE,
        status_reason="scheduler_unavailable: connection refused",
    )
    one, body = queries(admin_page)
    for n in range(1, 8):
        PoolFactory(slug=f"p{n}", cluster=ClusterFactory(slug=f"c{n}"))
    eight, body8 = queries(admin_page)

    assert none == one == eight
    assert "scheduler_unavailable: connection refused — its pools are read-only" in body
    assert body8.count('<span class="muted">not checked yet</span>') == 7
