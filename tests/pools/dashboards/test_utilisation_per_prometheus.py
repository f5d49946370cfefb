"""The dashboard's utilisation reads each pool's cluster's Prometheus (``Cluster.prometheus_url``;
blank, or a pool without a cluster: ``PROMETHEUS_URL``), each Prometheus once per read with the
same queries as the single-Prometheus case. Real HTTP: loopback servers answering with no series
(:mod:`prometheus_support`): every card is without a reading; what matters is who was asked."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone
from factories import GpuFactory, NodeFactory, PoolFactory
from prometheus_support import asked, prometheus_clusters

from pools.dashboards import capacity as dashboard
from pools.dashboards.capacity import DashboardFilters
from pools.dashboards.utilisation import (
    NOT_CONFIGURED,
    cards_reading_read,
    heatmap_utilisation,
    history_for,
    history_reading_read,
    in_use_for,
)
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db


def utilisation_now(*, filters: DashboardFilters, now):
    """Cards in use as a page shows them: the fleet's reading narrowed to ``filters``."""
    return in_use_for(cards_reading_read(now=now), filters, now=now)


def utilisation_history(*, filters: DashboardFilters, now):
    return history_for(history_reading_read(now=now), filters)


@pytest.fixture
def fleet(prometheuses):
    """One node with one L40S in a pool of each of: cluster ``train`` and ``infer`` (a
    Prometheus each), cluster ``plain`` (none) and no cluster."""
    l40s = GpuModel.objects.get(slug="l40s")
    clusters = prometheus_clusters(prometheuses)
    for slug, cluster in clusters.items():
        pool = PoolFactory(slug=slug, name=slug.title(), cluster=cluster)
        node = NodeFactory(hostname=f"{slug}-01", pool=pool)
        GpuFactory(node=node, index=0, gpu_model=l40s, raw_model_name="NVIDIA L40S")
    return clusters


def test_in_use_now_asks_each_prometheus_its_two_instant_queries(fleet, prometheuses):
    found = utilisation_now(filters=DashboardFilters(), now=timezone.now())
    assert (found.error, found.missed) == (None, "")
    assert asked(prometheuses) == {"global": 2, "train": 2, "infer": 2}  # PROF, DEV each
    assert sum(row.total for row in found.rows.values()) == 4
    assert sum(row.reporting for row in found.rows.values()) == 0  # no series: unknown


def test_in_use_now_names_the_prometheus_that_is_down(fleet, prometheuses):
    prometheuses["infer"].stop()
    found = utilisation_now(filters=DashboardFilters(), now=timezone.now())
    assert found.error is None
    assert found.missed.startswith("1 card(s) without a reading: Prometheus could not be read: ")
    assert f"Prometheus at {prometheuses['infer'].url}" in found.missed
    assert asked(prometheuses) == {"global": 2, "train": 2, "infer": 0}


def test_without_prometheus_url_the_clusters_with_their_own_are_still_read(
    fleet, prometheuses, settings
):
    settings.PROMETHEUS_URL = ""
    found = utilisation_now(filters=DashboardFilters(), now=timezone.now())
    assert found.error is None and asked(prometheuses)["train"] == 2
    assert found.missed == (
        "2 card(s) without a reading: no Prometheus is configured for their cluster."
    )
    settings.PROMETHEUS_URL = prometheuses["global"].url
    only_env = utilisation_now(filters=DashboardFilters(pool="env"), now=timezone.now())
    assert only_env.error is None and asked(prometheuses)["global"] == 2
    settings.PROMETHEUS_URL = ""
    assert utilisation_now(filters=DashboardFilters(pool="env"), now=timezone.now()).error == (
        NOT_CONFIGURED
    )


def test_the_heatmap_asks_each_prometheus_for_its_own_cards(fleet, prometheuses):
    now = timezone.now()
    rows, _pages = dashboard.node_heatmap(filters=DashboardFilters(), now=now)
    prometheuses["train"].stop()
    cells, why = heatmap_utilisation(rows=rows, reading=cards_reading_read(now=now))
    assert why is None
    assert asked(prometheuses) == {"global": 2, "train": 0, "infer": 2}
    titles = {r.hostname: r.cells[0].title for r in cells}
    assert f"cannot reach Prometheus at {prometheuses['train'].url}" in titles["train-01"]
    assert "Prometheus could not be read" not in titles["infer-01"]


def test_the_history_asks_each_prometheus_its_four_range_queries(fleet, prometheuses):
    history = utilisation_history(filters=DashboardFilters(), now=timezone.now())
    assert (history.error, history.missed, history.series) == (None, "", [])
    assert asked(prometheuses) == {"global": 4, "train": 4, "infer": 4}  # sum, count x2
    prometheuses["infer"].stop()
    history = utilisation_history(filters=DashboardFilters(), now=timezone.now())
    assert history.error is None
    assert f"cannot reach Prometheus at {prometheuses['infer'].url}" in history.missed


def test_the_page_says_which_prometheus_gave_no_reading(fleet, prometheuses, django_user_model):
    client = Client()
    client.force_login(django_user_model.objects.create_user("boss", password="pw", is_staff=True))
    prometheuses["infer"].stop()
    page = client.get("/dashboard/").content.decode()
    assert "<strong>In use: partly unknown.</strong> 1 card(s) without a reading: " in page
    assert f"cannot reach Prometheus at {prometheuses['infer'].url}" in page
    assert "In use: not available." not in page
    chart = client.get("/dashboard/?part=utilisation").content.decode()
    assert "<strong>Utilisation: partly unknown.</strong>" in chart
    assert f"cannot reach Prometheus at {prometheuses['infer'].url}" in chart
