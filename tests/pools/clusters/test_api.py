"""/api/v1/clusters/: everyone signed in reads, pool admins write (audited); refusals are 4xx
with a machine-readable body and change nothing. A pool names its cluster by slug."""

from __future__ import annotations

import pytest
from cluster_support import offline_slurm_fields
from factories import ClusterFactory, PoolFactory
from kubernetes_support import fake_apiserver

from pools.audit.models import AuditEvent
from pools.clusters.models import Cluster
from pools.inventory.models import Pool

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_adapters")]

URL = "/api/v1/clusters/"


def new_slurm(**extra) -> dict:
    """The offline Slurm cluster at a loopback port nothing listens on, at a site, retiring."""
    api_url = f"http://127.0.0.1:{fake_apiserver().free_port()}"
    return offline_slurm_fields(api_url=api_url, site="Garching", retiring=True, **extra)


def test_a_pool_admin_reads_clusters_with_their_pool_count(admin_api):
    cluster = ClusterFactory(slug="modern", name="Modern", site="Munich", provider="on-prem")
    PoolFactory(slug="train", cluster=cluster)

    response = admin_api.get(f"{URL}modern/")

    assert response.status_code == 200
    body = response.json()
    assert (body["pool_count"], body["site"], body["provider"]) == (1, "Munich", "on-prem")
    assert (body["status"], body["status_reason"], body["credential_kind"]) == (
        "unknown",
        "",
        "jwt-key",
    )


@pytest.mark.parametrize(
    ("method", "path"),
    [("post", URL), ("patch", f"{URL}c/"), ("delete", f"{URL}c/"), ("post", f"{URL}c/check/")],
)
def test_a_member_changes_nothing(member_api, method, path):
    ClusterFactory(slug="c")

    response = getattr(member_api, method)(path, new_slurm(), format="json")

    assert response.status_code == 403
    assert Cluster.objects.count() == 1
    assert not AuditEvent.objects.exists()


def test_an_admin_creates_a_cluster_saved_unreachable_with_the_reason(
    admin_api, django_capture_on_commit_callbacks
):
    """The key file does not exist: the cluster is kept (201, its check pending), and the
    check queued on commit finds it unreachable and says why."""
    with django_capture_on_commit_callbacks(execute=True) as queued:
        response = admin_api.post(URL, new_slurm(), format="json")

    assert response.status_code == 201
    body = response.json()
    assert (body["status"], body["checked_at"], body["check_pending"]) == ("unknown", None, True)
    assert body["check_requested_at"] is not None
    assert (body["status_url"], len(queued)) == ("/api/v1/clusters/legacy/", 1)
    assert (body["retiring"], body["pool_count"]) == (True, 0)
    later = admin_api.get(body["status_url"]).json()
    assert (later["status"], later["check_pending"], later["check_requested_at"]) == (
        "unreachable", False, None,
    )  # fmt: skip
    assert later["status_reason"] == (
        "credentials cannot be read: [Errno 2] No such file or directory: '/nonexistent/jwt.key'"
    )
    event = AuditEvent.objects.get()
    assert (event.action, event.after["slug"]) == ("cluster.created", "legacy")


def test_the_environment_credential_kind_cannot_be_chosen(admin_api):
    response = admin_api.post(URL, new_slurm(credential_kind="environment"), format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    assert "credential_kind" in response.json()["errors"]
    assert not Cluster.objects.exists()


def test_a_taken_cluster_name_is_a_409_naming_the_other(admin_api):
    ClusterFactory(slug="first", slurm_cluster_name="legacy")

    response = admin_api.post(URL, new_slurm(), format="json")

    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "cluster_taken"
    assert body["data"] == {"field": "slurm_cluster_name", "cluster": "first"}
    assert Cluster.objects.count() == 1


def test_deleting_a_cluster_with_pools_is_a_409_listing_them(admin_api):
    cluster = ClusterFactory(slug="busy")
    PoolFactory(slug="train", cluster=cluster)

    response = admin_api.delete(f"{URL}busy/")

    assert response.status_code == 409
    assert response.json()["code"] == "cluster_in_use"
    assert response.json()["data"] == {"pools": ["train"]}
    assert Cluster.objects.filter(slug="busy").exists()


def test_a_bad_time_zone_is_a_400_on_its_field(admin_api):
    response = admin_api.post(URL, new_slurm(time_zone="Nowhere/Else"), format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    assert not Cluster.objects.exists()


def test_a_pin_the_adapter_does_not_speak_is_a_400_listing_those_it_does(admin_api):
    """The versions of scheduler_adapters/slurm/v0_0_*.py, oldest first."""
    response = admin_api.post(URL, new_slurm(api_version="v9.9.9"), format="json")

    assert response.status_code == 400
    assert response.json()["errors"] == {
        "api_version": [
            "The portal's Slurm adapter speaks v0.0.38, v0.0.40, v0.0.41, v0.0.42, v0.0.43, "
            "v0.0.44, v0.0.45; 'v9.9.9' is none of them (empty: the newest both know)."
        ]
    }
    assert not Cluster.objects.exists() and not AuditEvent.objects.exists()


def test_a_stored_pin_the_adapter_does_not_speak_is_kept_but_not_entered_anew(admin_api):
    ClusterFactory(slug="c", api_version="v0.0.36")

    kept = admin_api.patch(f"{URL}c/", {"site": "fra-1", "api_version": "v0.0.36"}, format="json")
    refused = admin_api.patch(f"{URL}c/", {"api_version": "v0.0.37"}, format="json")

    assert kept.status_code == 200
    assert (refused.status_code, list(refused.json()["errors"])) == (400, ["api_version"])
    cluster = Cluster.objects.get(slug="c")
    assert (cluster.site, cluster.api_version) == ("fra-1", "v0.0.36")


def test_check_is_accepted_and_its_result_read_where_it_says(
    admin_api, django_capture_on_commit_callbacks
):
    """202 with the cluster as it was (never checked), pending, and where to read the result;
    the check queued on commit records it there."""
    ClusterFactory(slug="c", credential_path="/nonexistent")

    with django_capture_on_commit_callbacks(execute=True):
        response = admin_api.post(f"{URL}c/check/")

    assert response.status_code == 202
    body = response.json()
    assert (body["status"], body["check_pending"]) == ("unknown", True)
    assert response["Location"] == body["status_url"] == "/api/v1/clusters/c/"
    later = admin_api.get(response["Location"]).json()
    assert (later["status"], later["check_pending"]) == ("unreachable", False)
    assert later["status_reason"] == (
        "credentials cannot be read: [Errno 2] No such file or directory: '/nonexistent'"
    )
    assert Cluster.objects.get(slug="c").checked_at is not None


def test_an_update_queues_a_check_only_when_the_connection_moved(
    admin_api, django_capture_on_commit_callbacks
):
    """A new site needs no check (nothing queued, 200); a new credential path does (200,
    pending, one check queued)."""
    ClusterFactory(slug="c", credential_path="/nonexistent/a")

    with django_capture_on_commit_callbacks(execute=False) as site_only:
        site = admin_api.patch(f"{URL}c/", {"site": "fra-1"}, format="json")
    with django_capture_on_commit_callbacks(execute=False) as moved:
        path = admin_api.patch(f"{URL}c/", {"credential_path": "/nonexistent/b"}, format="json")

    assert (site.status_code, site.json()["check_pending"], len(site_only)) == (200, False, 0)
    assert (path.status_code, path.json()["check_pending"], len(moved)) == (200, True, 1)


# ----------------------------------------------------------------- a pool's cluster


def test_a_pool_is_created_in_a_cluster_of_its_scheduler(admin_api):
    ClusterFactory(slug="modern")

    response = admin_api.post(
        "/api/v1/pools/",
        {
            "slug": "p",
            "name": "P",
            "scheduler": "slurm",
            "slurm_partition": "p",
            "cluster": "modern",
        },
        format="json",
    )

    assert response.status_code == 201
    assert response.json()["cluster"] == "modern"
    assert Pool.objects.get(slug="p").cluster.slug == "modern"


@pytest.mark.parametrize(
    ("cluster", "message"),
    [
        ({"kind": "kubernetes", "credential_kind": "kubeconfig"}, "k is a Kubernetes cluster."),
        ({"retiring": True}, "k is being retired: it takes no new pools."),
    ],
)
def test_a_pool_refuses_a_cluster_of_another_kind_or_retiring(admin_api, cluster, message):
    ClusterFactory(slug="k", **cluster)

    response = admin_api.post(
        "/api/v1/pools/",
        {"slug": "p", "name": "P", "scheduler": "slurm", "cluster": "k"},
        format="json",
    )

    assert response.status_code == 400
    assert response.json()["errors"]["cluster"] == [message]
    assert not Pool.objects.exists()


def test_a_display_name_another_cluster_has_is_a_400_with_its_code(admin_api):
    ClusterFactory(slug="first", name="Legacy", slurm_cluster_name="old")

    response = admin_api.post(URL, new_slurm(name="legacy"), format="json")

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "cluster_name_taken"
    assert body["data"] == {"field": "name", "cluster": "first"}
    assert Cluster.objects.count() == 1


def test_the_list_filters_as_the_clusters_page_does(admin_api, member_api):
    """The page's FilterSet (kind, status, retiring) filters the API's list too; it answered
    every cluster whatever was asked. Four clusters: two Slurm (one retiring, one unreachable),
    two Kubernetes: kind=slurm gives the two Slurm ones, retiring=True the one, status=
    unreachable the one; an unknown kind is a 400 naming it."""
    ClusterFactory(slug="old", retiring=True)
    ClusterFactory(slug="down", status="unreachable")
    for slug in ("k8s-a", "k8s-b"):
        ClusterFactory(slug=slug, kind="kubernetes", api_url=f"https://{slug}.example.com:6443",
                       slurm_cluster_name="", credential_kind="token-file")  # fmt: skip

    def slugs(client, query):
        response = client.get(URL, query)
        assert response.status_code == 200, response.content
        return sorted(c["slug"] for c in response.json()["results"])

    for client in (admin_api, member_api):
        assert slugs(client, {"kind": "slurm"}) == ["down", "old"]
        assert slugs(client, {"kind": "kubernetes"}) == ["k8s-a", "k8s-b"]
        assert slugs(client, {"retiring": "True"}) == ["old"]
    assert slugs(admin_api, {"status": "unreachable"}) == ["down"]
    refused = admin_api.get(URL, {"kind": "mainframe"})
    assert refused.status_code == 400 and "kind" in refused.json()["errors"]
