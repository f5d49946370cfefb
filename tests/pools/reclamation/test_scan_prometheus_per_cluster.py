"""Each cluster's idle scan reads its own Prometheus (``Cluster.prometheus_url``), not the
whole fleet's ``PROMETHEUS_URL``; a cluster without one, and the pools without a cluster, read
``PROMETHEUS_URL``. Real HTTP: three loopback servers that answer every instant query with an
empty vector (Prometheus HTTP API, ``/api/v1/query``; a range query with an empty matrix) and
record what they were asked. A pool's reclamation what-if, and an elastic allocation's, read
their cluster's Prometheus too."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from factories import AllocationFactory, ElasticPolicyFactory, PoolFactory
from prometheus_support import asked, prometheus_clusters

from pools.capacity.models import Allocation
from pools.common.choices import AllocationStatus
from pools.elastic.services import elastic_whatif
from pools.inventory.models import Pool
from pools.reclamation.models import ReclamationPolicy
from pools.reclamation.services.runs import idle_scan_cluster
from pools.reclamation.services.whatif import reclamation_what_if
from scheduler_adapters.fake import FakeScheduler

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(prometheuses, monkeypatch):
    """Clusters ``train`` and ``infer`` with a Prometheus each, ``plain`` without one, and a
    pool without a cluster; a policy and one allocation active since yesterday in each pool."""
    now = timezone.now()
    clusters = prometheus_clusters(prometheuses)
    for slug, cluster in clusters.items():
        pool = PoolFactory(slug=f"{slug}-gpu", cluster=cluster)
        ReclamationPolicy.objects.create(pool=pool)
        AllocationFactory(pool=pool, card_count=2, status=AllocationStatus.ACTIVE,
                          starts_at=now - timedelta(days=1),
                          ends_at=now + timedelta(days=1))  # fmt: skip
    monkeypatch.setattr("pools.reclamation.services.scan.pool_adapter", lambda p: FakeScheduler())
    return clusters


def test_each_cluster_scan_asks_only_its_own_prometheus(fleet, prometheuses):
    train = idle_scan_cluster(cluster_id=fleet["train"].pk)
    assert (train.error, train.allocations) == ("", 1)
    summary = len(prometheuses["train"].queries)
    assert summary > 0
    assert asked(prometheuses) == {"global": 0, "train": summary, "infer": 0}
    assert all("dcgm_fi_" in q.lower() for q in prometheuses["train"].queries)  # dcgm-exporter

    infer = idle_scan_cluster(cluster_id=fleet["infer"].pk)  # its URL has a trailing "/"
    assert (infer.error, infer.allocations) == ("", 1)
    # the same queries (one policy each, the same window): as many as train's scan sent
    assert asked(prometheuses) == {"global": 0, "train": summary, "infer": summary}


def test_a_cluster_without_its_own_and_the_pools_without_a_cluster_read_prometheus_url(
    fleet, prometheuses
):
    plain = idle_scan_cluster(cluster_id=fleet["plain"].pk)
    assert (plain.error, plain.allocations) == ("", 1)
    once = len(prometheuses["global"].queries)
    assert once > 0 and asked(prometheuses) == {"global": once, "train": 0, "infer": 0}

    unclustered = idle_scan_cluster(cluster_id=None)
    assert (unclustered.error, unclustered.allocations) == ("", 1)
    assert asked(prometheuses) == {"global": 2 * once, "train": 0, "infer": 0}


def test_a_clusters_prometheus_that_is_down_fails_its_scan_only(fleet, prometheuses):
    prometheuses["infer"].stop()
    infer = idle_scan_cluster(cluster_id=fleet["infer"].pk)
    assert infer.error.startswith("Prometheus unavailable, nothing changed: ")
    assert f"cannot reach Prometheus at {prometheuses['infer'].url}" in infer.error
    train = idle_scan_cluster(cluster_id=fleet["train"].pk)
    assert train.error == "" and asked(prometheuses)["global"] == 0


def test_a_pools_what_if_reads_its_clusters_prometheus(fleet, prometheuses):
    report = reclamation_what_if(pool=Pool.objects.get(slug="train-gpu"), days=1)
    assert report.error is None and len(report.rows) == 1
    range_reads = len(prometheuses["train"].queries)
    assert range_reads > 0 and asked(prometheuses) == {"global": 0, "train": range_reads,
                                                       "infer": 0}  # fmt: skip

    reclamation_what_if(pool=Pool.objects.get(slug="env-gpu"), days=1)
    assert asked(prometheuses) == {"global": range_reads, "train": range_reads, "infer": 0}


def test_an_elastic_what_if_reads_its_allocations_clusters_prometheus(fleet, prometheuses):
    policy = ElasticPolicyFactory(allocation=Allocation.objects.get(pool__slug="infer-gpu"))
    elastic_whatif(policy=policy, days=1, source="prometheus")
    reads = len(prometheuses["infer"].queries)
    assert reads > 0 and asked(prometheuses) == {"global": 0, "train": 0, "infer": reads}
