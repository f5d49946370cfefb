"""The elastic loop and its hourly plans read each allocation's cluster's Prometheus
(``Cluster.prometheus_url``; blank, or a pool without a cluster: ``PROMETHEUS_URL``), each
Prometheus once per pass for its own allocations. Real HTTP: loopback servers answering with
no series (:mod:`prometheus_support`), so every allocation is unknown and holds; what matters is
who was asked for which namespace."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from factories import (
    AllocationFactory,
    ElasticPolicyFactory,
    PoolFactory,
    TeamFactory,
)
from prometheus_support import asked, prometheus_clusters

from pools.common.choices import AllocationStatus, Scheduler
from pools.elastic.models import SignalReading
from pools.elastic.services import elastic_forecast, elastic_scan

pytestmark = pytest.mark.django_db


@pytest.fixture
def policies(prometheuses):
    """One elastic allocation of team ``<slug>`` in a Kubernetes pool of each of: cluster
    ``train`` and ``infer`` (a Prometheus each; infer's URL ends in ``/``), cluster ``plain``
    (none) and no cluster; the last two read ``PROMETHEUS_URL``."""
    now = timezone.now()
    clusters = prometheus_clusters(prometheuses, kind=Scheduler.KUBERNETES)
    found = {}
    for slug, cluster in clusters.items():
        pool = PoolFactory(slug=f"{slug}-gpu", cluster=cluster, scheduler=Scheduler.KUBERNETES,
                           slurm_partition="")  # fmt: skip
        allocation = AllocationFactory(pool=pool, team=TeamFactory(slug=slug), card_count=2,
                                       status=AllocationStatus.ACTIVE,
                                       starts_at=now - timedelta(hours=1),
                                       ends_at=now + timedelta(days=1))  # fmt: skip
        found[slug] = ElasticPolicyFactory(allocation=allocation, per_card_tok_s=Decimal("100"))
    return found


def namespaces_in(server) -> set[str]:
    teams = ("team-train", "team-infer", "team-plain", "team-env")
    return {team for team in teams for query in server.queries if team in query}


def test_the_loop_asks_each_prometheus_once_for_its_own_allocations(policies, prometheuses):
    report = elastic_scan()
    assert (report.error, report.policies, report.unknown) == ("", 4, 4)
    counts = asked(prometheuses)
    # one inference_signals call per URL: train's and infer's ask for one namespace each,
    # PROMETHEUS_URL for plain's and env's together (the same four range queries each)
    assert counts["train"] > 0 and counts == {name: counts["train"] for name in counts}
    assert namespaces_in(prometheuses["train"]) == {"team-train"}
    assert namespaces_in(prometheuses["infer"]) == {"team-infer"}
    assert namespaces_in(prometheuses["global"]) == set()  # two namespaces: no filter
    assert SignalReading.objects.count() == 4  # every allocation's (unknown) reading


def test_a_prometheus_that_is_down_leaves_its_allocations_unknown_only(policies, prometheuses):
    prometheuses["infer"].stop()
    report = elastic_scan()
    assert report.error.startswith("Prometheus could not be read: ")
    assert f"cannot reach Prometheus at {prometheuses['infer'].url}" in report.error
    assert prometheuses["train"].url not in report.error
    assert asked(prometheuses)["train"] > 0 and asked(prometheuses)["global"] > 0
    assert (report.policies, report.unknown, report.holds) == (4, 4, 4)
    assert SignalReading.objects.count() == 4  # its allocations' readings: unknown


def test_without_prometheus_url_only_the_clusters_with_their_own_are_read(
    policies, prometheuses, settings
):
    settings.PROMETHEUS_URL = ""
    report = elastic_scan()
    assert report.error == (
        "PROMETHEUS_URL is not set: the metrics of 2 allocation(s) whose cluster names no "
        "Prometheus are unknown."
    )
    assert asked(prometheuses)["global"] == 0 and asked(prometheuses)["train"] > 0
    readings = SignalReading.objects.values_list("policy__allocation__team__slug", flat=True)
    assert sorted(readings) == ["infer", "train"]  # no reading where nothing was read


def test_the_plans_ask_each_prometheus_for_its_own_allocations(policies, prometheuses):
    assert elastic_forecast() == 0  # no series: empty plans
    counts = asked(prometheuses)
    assert counts["train"] > 0 and counts == {name: counts["train"] for name in counts}
    assert namespaces_in(prometheuses["train"]) == {"team-train"}
    assert namespaces_in(prometheuses["infer"]) == {"team-infer"}
    prometheuses["train"].stop()
    assert elastic_forecast() == 0  # train's is down: logged, the others still refreshed
    assert asked(prometheuses)["infer"] == 2 * counts["infer"]
