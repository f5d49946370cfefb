"""The admin dashboard's cluster panel: each cluster's status and reason, for one query
whatever the number of clusters (issue #35: at most 2)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from factories import ClusterFactory, PoolFactory

from pools.capacity.models import SchedulerDrift
from pools.clusters.models import ClusterError
from pools.common.choices import ClusterStatus, Scheduler

pytestmark = pytest.mark.django_db


def queries(client) -> tuple[int, str]:
    """(queries, page); and of them exactly one reads the clusters table."""
    with CaptureQueriesContext(connection) as captured:
        response = client.get("/dashboard/")
    assert response.status_code == 200
    # the panel's one read of the clusters (utilisation's card query only joins them, for
    # each pool's cluster's Prometheus URL; its check whether any cluster names its own
    # Prometheus is one EXISTS, whatever the number of clusters)
    reads = [q["sql"] for q in captured if 'FROM "pools_cluster"' in q["sql"]]
    assert len([sql for sql in reads if not sql.startswith('SELECT 1 AS "a"')]) == 1
    assert len(reads) <= 2
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


def test_the_panel_shows_each_clusters_health_for_the_same_one_query(admin_page):
    """8 more clusters, each with a pool, an unrepaired drift, an error 5 minutes ago and
    credentials expiring in 3 days: the same number of queries as with one cluster, and every
    figure on the page (8 × "1 unrepaired drift", 8 × "1 error in the last hour")."""
    queries(admin_page)
    now = timezone.now()
    ClusterFactory(slug="c0")
    one, _ = queries(admin_page)
    for n in range(8):
        cluster = ClusterFactory(
            slug=f"h{n}", credential_expires_at=now + timedelta(days=3), reconciled_at=now
        )
        PoolFactory(slug=f"p{n}", cluster=cluster)
        SchedulerDrift.objects.create(
            scheduler=Scheduler.SLURM, subject=f"s{n}", expected="0", found="1", cluster=cluster
        )
        ClusterError.objects.create(
            cluster=cluster,
            operation="reconcile",
            message=f"boom {n}",
            at=now - timedelta(minutes=5),
        )

    eight, body = queries(admin_page)

    assert eight == one
    assert body.count("1 unrepaired drift<") == 8
    assert body.count("1 error in the last hour<") == 8
    assert body.count('data-credential="soon"') == 8
    assert 'title="boom 7"' in body
