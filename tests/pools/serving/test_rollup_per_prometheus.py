"""The serving rollup reads each allocation's cluster's Prometheus (``Cluster.prometheus_url``;
blank, or a pool without a cluster: ``PROMETHEUS_URL``), every family once per Prometheus a
pass. Real HTTP: loopback servers answering with no series (:mod:`prometheus_support`), so every
Kubernetes allocation's row is unknown; what matters is who was asked and who got a row."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from factories import AllocationFactory, PoolFactory, TeamFactory
from prometheus_support import asked, prometheus_clusters

from pools.common.choices import AllocationStatus, Scheduler
from pools.serving.models import ServingRollup
from pools.serving.selectors import serving_state
from pools.serving.services import serving_rollup_pass

NOW = datetime(2026, 12, 4, 10, 3, 20, tzinfo=UTC)

pytestmark = pytest.mark.django_db


@pytest.fixture
def allocations(prometheuses):
    """An open allocation of team ``<slug>`` in a Kubernetes pool of each of: cluster ``train``
    and ``infer`` (a Prometheus each), cluster ``plain`` (none) and no cluster
    (:func:`prometheus_support.prometheus_clusters`)."""
    clusters = prometheus_clusters(prometheuses, kind=Scheduler.KUBERNETES)
    found = {}
    for slug, cluster in clusters.items():
        pool = PoolFactory(slug=f"{slug}-gpu", cluster=cluster, scheduler=Scheduler.KUBERNETES,
                           slurm_partition="")  # fmt: skip
        found[slug] = AllocationFactory(pool=pool, team=TeamFactory(slug=slug),
                                        status=AllocationStatus.ACTIVE,
                                        starts_at=NOW - timedelta(days=1),
                                        ends_at=NOW + timedelta(days=1))  # fmt: skip
    return found


def test_each_prometheus_is_asked_every_family_once(allocations, prometheuses):
    run = serving_rollup_pass(now=NOW)
    families = 6  # one instant query per family and Prometheus (pools.serving.services)
    assert asked(prometheuses) == {"global": families, "train": families, "infer": families}
    assert (run.ok, run.error, run.queries, run.rollups) == (True, "", 3 * families, 4)
    assert ServingRollup.objects.count() == 4


def test_a_prometheus_that_is_down_leaves_only_its_allocations_unrolled(allocations, prometheuses):
    prometheuses["train"].stop()
    run = serving_rollup_pass(now=NOW)
    assert run.ok and run.rollups == 3
    assert run.error.startswith("Prometheus could not be read, the last rollup of 1 allocation(s)")
    assert f"cannot reach Prometheus at {prometheuses['train'].url}" in run.error
    rolled = ServingRollup.objects.values_list("allocation__team__slug", flat=True)
    assert sorted(rolled) == ["env", "infer", "plain"]
    assert serving_state(now=NOW).error == run.error  # the pages say which one was missed
