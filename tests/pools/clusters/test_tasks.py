"""The periodic check fans out: one task per cluster, each recording its own cluster only."""

from __future__ import annotations

import pytest
from factories import ClusterFactory

from pools.clusters.models import Cluster
from pools.clusters.tasks import cluster_check_task, clusters_check_task
from pools.common.choices import ClusterStatus

pytestmark = pytest.mark.django_db


def test_the_fan_out_checks_every_cluster_in_its_own_task(django_capture_on_commit_callbacks):
    """Three clusters whose key files do not exist: three checks, each unreachable."""
    for slug in ("a", "b", "c"):
        ClusterFactory(slug=slug, credential_path=f"/nonexistent/{slug}.key")

    with django_capture_on_commit_callbacks(execute=True):
        queued = clusters_check_task()

    assert queued == 3
    assert sorted(Cluster.objects.values_list("slug", "status")) == [
        ("a", ClusterStatus.UNREACHABLE),
        ("b", ClusterStatus.UNREACHABLE),
        ("c", ClusterStatus.UNREACHABLE),
    ]
    assert "/nonexistent/b.key" in Cluster.objects.get(slug="b").status_reason


def test_a_check_of_a_deleted_cluster_does_nothing():
    assert cluster_check_task(123456) == "missing"
