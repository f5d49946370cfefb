"""A cluster's own Prometheus (``Cluster.prometheus_url``): given on the cluster's API and page,
``http(s)://`` with a host or blank; anything else is an error on that field and nothing is
written."""

from __future__ import annotations

import pytest
from cluster_support import offline_slurm_fields
from factories import ClusterFactory

from pools.audit.models import AuditEvent
from pools.clusters.models import Cluster

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_adapters")]

URL = "/api/v1/clusters/"


def test_the_api_saves_and_answers_a_clusters_prometheus_url(admin_api):
    response = admin_api.post(
        URL, offline_slurm_fields(prometheus_url="http://prometheus.legacy:9090"), format="json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["prometheus_url"] == "http://prometheus.legacy:9090"
    assert Cluster.objects.get(slug="legacy").prometheus_url == "http://prometheus.legacy:9090"

    cleared = admin_api.patch(f"{URL}legacy/", {"prometheus_url": ""}, format="json")
    assert cleared.status_code == 200 and cleared.json()["prometheus_url"] == ""


@pytest.mark.parametrize(
    "bad", ["ftp://prometheus.legacy/", "prometheus.legacy:9090", "http://", "file:///etc/hosts"]
)
def test_the_api_refuses_a_prometheus_url_that_is_not_http_with_a_host(admin_api, bad):
    response = admin_api.post(URL, offline_slurm_fields(prometheus_url=bad), format="json")
    assert response.status_code == 400, response.content
    assert "prometheus_url" in response.content.decode()
    assert not Cluster.objects.exists() and not AuditEvent.objects.exists()


def test_a_patch_with_a_bad_prometheus_url_changes_nothing(admin_api):
    ClusterFactory(slug="c", prometheus_url="http://prometheus.c:9090")
    response = admin_api.patch(f"{URL}c/", {"prometheus_url": "ftp://x.example"}, format="json")
    assert response.status_code == 400
    assert Cluster.objects.get(slug="c").prometheus_url == "http://prometheus.c:9090"
    assert not AuditEvent.objects.exists()


def test_the_environment_cluster_may_point_at_its_own_prometheus(admin_api):
    """``prometheus_url`` is not a connection field: the clusters the environment variables
    define keep their connection, but may name their Prometheus."""
    ClusterFactory(slug="env", credential_kind="environment")
    response = admin_api.patch(
        f"{URL}env/", {"prometheus_url": "https://thanos.example.org"}, format="json"
    )
    assert response.status_code == 200, response.content
    assert Cluster.objects.get(slug="env").prometheus_url == "https://thanos.example.org"


def test_the_cluster_page_has_the_field_and_refuses_a_bad_url(admin_page):
    form = admin_page.get("/clusters/new/").content.decode()
    assert 'name="prometheus_url"' in form and "Prometheus URL" in form

    response = admin_page.post(
        "/clusters/new/", offline_slurm_fields(prometheus_url="ftp://prometheus.x/")
    )
    assert response.status_code == 200
    assert response.context["form"].errors["prometheus_url"]
    assert not Cluster.objects.exists() and not AuditEvent.objects.exists()

    admin_page.post(
        "/clusters/new/", offline_slurm_fields(prometheus_url="https://prometheus.legacy")
    )
    assert Cluster.objects.get(slug="legacy").prometheus_url == "https://prometheus.legacy"


# A Docker Compose service, a Kubernetes Service of the same namespace: hosts of one label,
# as the environment's PROMETHEUS_URL and SLURM_REST_URL take them (Django's own URL check
# took only "localhost" so; "Enter a valid URL." for these).
ONE_LABEL = {"api_url": "http://slurmrestd:6820", "prometheus_url": "http://prometheus:9090"}


def test_the_api_takes_urls_whose_host_is_one_label(admin_api):
    response = admin_api.post(URL, offline_slurm_fields(**ONE_LABEL), format="json")
    assert response.status_code == 201, response.content
    saved = Cluster.objects.get(slug="legacy")
    assert (saved.api_url, saved.prometheus_url) == tuple(ONE_LABEL.values())

    patched = admin_api.patch(
        f"{URL}legacy/", {"prometheus_url": "https://thanos-query:10902/"}, format="json"
    )
    assert patched.status_code == 200, patched.content
    assert patched.json()["prometheus_url"] == "https://thanos-query:10902/"


def test_the_cluster_page_takes_urls_whose_host_is_one_label(admin_page):
    response = admin_page.post("/clusters/new/", offline_slurm_fields(**ONE_LABEL))
    assert response.status_code == 302, response.context["form"].errors
    saved = Cluster.objects.get(slug="legacy")
    assert (saved.api_url, saved.prometheus_url) == tuple(ONE_LABEL.values())


@pytest.mark.parametrize(
    "bad",
    [
        "http://12345:9090",  # a label of digits only: no host name, and no IPv4 address
        "http://-prometheus:9090",
        "http://prometheus-:9090",
        "http://prom_etheus:9090",
        f"http://{'p' * 64}:9090",  # 64 characters: a label is at most 63
        "prometheus:9090",
    ],
)
def test_a_one_label_host_is_still_a_host_name(admin_api, bad):
    response = admin_api.post(URL, offline_slurm_fields(prometheus_url=bad), format="json")
    assert response.status_code == 400, response.content
    assert "prometheus_url" in response.json()["errors"]
    assert not Cluster.objects.exists()
