"""The cluster create / edit / delete pages (pool admins): the same services, refusals and
audit events as /api/v1/clusters/ — an unreachable cluster saved with its reason, a taken
Slurm ClusterName or Kubernetes API URL a field error naming the other, delete confirmed and
refused while the cluster holds pools, listing them. Nothing is written by a refusal."""

from __future__ import annotations

import pytest
from cluster_support import offline_slurm_fields
from factories import ClusterFactory, PoolFactory

from pools.audit.models import AuditEvent
from pools.clusters.models import Cluster
from pools.common.choices import ClusterStatus

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_adapters")]

NEW = "/clusters/new/"


def slurm(**extra) -> dict:
    """The offline Slurm cluster as the page's form posts it, at a site and retiring."""
    return offline_slurm_fields(site="Garching", retiring="on", **extra)


def _text(response) -> str:
    return " ".join(response.content.decode().split())


def test_a_pool_admin_creates_a_cluster_saved_unreachable_with_the_reason(
    admin_page, django_capture_on_commit_callbacks
):
    """Saved, and its check queued: the list it lands on says it is being checked; the check
    run on commit finds it unreachable and says why."""
    form = _text(admin_page.get(NEW))
    assert "Credentials file path" in form
    assert 'value="environment"' not in form  # only the environment's clusters use it

    with django_capture_on_commit_callbacks(execute=True) as queued:
        response = admin_page.post(NEW, slurm(), follow=True)

    assert len(queued) == 1
    assert "Legacy saved; its connection is being checked (see the list)." in _text(response)
    assert "data-check-pending" in response.content.decode()
    cluster = Cluster.objects.get(slug="legacy")
    reason = (
        "credentials cannot be read: [Errno 2] No such file or directory: '/nonexistent/jwt.key'"
    )
    assert (cluster.status, cluster.status_reason, cluster.retiring, cluster.check_pending) == (
        ClusterStatus.UNREACHABLE, reason, True, False,
    )  # fmt: skip
    event = AuditEvent.objects.get()
    # audited as the API audits: the API's representation of the cluster
    assert (event.action, event.after["slug"], event.after["site"]) == (
        "cluster.created", "legacy", "Garching",
    )  # fmt: skip
    assert event.after["credential_path"] == "/nonexistent/jwt.key"


@pytest.mark.parametrize("spelling", ["legacy", "Legacy"])
def test_a_taken_cluster_name_is_a_field_error_naming_the_other(admin_page, spelling):
    """Slurm maps a ClusterName's upper case letters to lower case (slurm.conf(5),
    ClusterName): "Legacy" is cluster "legacy" too."""
    ClusterFactory(slug="first", slurm_cluster_name="legacy")

    response = admin_page.post(NEW, slurm(slurm_cluster_name=spelling))

    assert response.status_code == 200
    form = response.context["form"]
    assert form.errors["slurm_cluster_name"] == [
        "Cluster first already has slurm cluster name 'legacy'."
    ]
    assert Cluster.objects.count() == 1 and not AuditEvent.objects.exists()


def test_a_taken_kubernetes_api_url_is_a_field_error(admin_page):
    url = "https://k8s.example.com:6443"
    ClusterFactory(slug="k1", kind="kubernetes", credential_kind="token-file", api_url=url,
                   slurm_cluster_name="")  # fmt: skip
    response = admin_page.post(NEW, {
        "slug": "k2", "name": "K2", "kind": "kubernetes", "api_url": url,
        "credential_kind": "token-file", "credential_path": "/nonexistent/token",
        "time_zone": "UTC",
    })  # fmt: skip
    assert response.context["form"].errors["api_url"] == [
        f"Cluster k1 already has api url '{url}'."
    ]
    assert not Cluster.objects.filter(slug="k2").exists()


@pytest.mark.parametrize(
    "spelling", ["HTTPS://K8S.Example.COM:6443", "https://k8s.example.com:6443/"]
)
def test_the_same_api_url_spelt_otherwise_is_taken_too(admin_page, spelling):
    """Scheme and host are case-insensitive (RFC 3986 §3.1, §3.2.2) and an empty path is "/"
    (§6.2.3): these name k1's API server; they were saved as a second cluster of it."""
    ClusterFactory(slug="k1", kind="kubernetes", credential_kind="token-file",
                   api_url="https://k8s.example.com:6443", slurm_cluster_name="")  # fmt: skip
    response = admin_page.post(NEW, {
        "slug": "k2", "name": "K2", "kind": "kubernetes", "api_url": spelling,
        "credential_kind": "token-file", "credential_path": "/nonexistent/token",
        "time_zone": "UTC",
    })  # fmt: skip
    assert response.context["form"].errors["api_url"] == [
        "Cluster k1 already has api url 'https://k8s.example.com:6443'."
    ]
    assert not Cluster.objects.filter(slug="k2").exists()


def test_an_api_url_is_kept_in_one_spelling(admin_page):
    admin_page.post(NEW, {
        "slug": "k2", "name": "K2", "kind": "kubernetes", "api_url": "HTTPS://K8S.Example.COM/api/",
        "credential_kind": "token-file", "credential_path": "/nonexistent/token",
        "time_zone": "UTC",
    })  # fmt: skip
    assert Cluster.objects.get(slug="k2").api_url == "https://k8s.example.com/api"


@pytest.mark.parametrize(
    ("extra", "field", "message"),
    [
        ({"time_zone": "Nowhere/Else"}, "time_zone",
         "Not a time zone: 'Nowhere/Else' (e.g. Europe/Berlin)."),
        ({"slurm_user": ""}, "slurm_user", "A slurm cluster needs its slurm user."),
        # the versions of scheduler_adapters/slurm/v0_0_*.py, oldest first
        ({"api_version": "42"}, "api_version",
         "The portal's Slurm adapter speaks v0.0.38, v0.0.40, v0.0.41, v0.0.42, v0.0.43, "
         "v0.0.44, v0.0.45; '42' is none of them (empty: the newest both know)."),
        ({"api_version": "v9.9.9"}, "api_version",
         "The portal's Slurm adapter speaks v0.0.38, v0.0.40, v0.0.41, v0.0.42, v0.0.43, "
         "v0.0.44, v0.0.45; 'v9.9.9' is none of them (empty: the newest both know)."),
        ({"credential_kind": "kubeconfig"}, "credential_kind",
         "A slurm cluster's credentials are a jwt-key or token-file."),
        # the web process and the Celery workers need not share a working directory
        ({"credential_path": "../secrets/jwt.key"}, "credential_path",
         "Give an absolute path: '../secrets/jwt.key' would be read from each process's "
         "working directory."),
        ({"ca_path": "ca.crt"}, "ca_path",
         "Give an absolute path: 'ca.crt' would be read from each process's working "
         "directory."),
        ({"kueue": "on"}, "kueue",
         "Kueue queues Kubernetes workloads: a slurm cluster has none."),
        ({"credential_kind": "environment"}, "credential_kind",
         "Select a valid choice. environment is not one of the available choices."),
        # the page saved a name with a right-to-left override (the API refused it)
        ({"name": "Legacy\u202eevil"}, "name",
         "Right-to-left and other bidirectional formatting marks are not allowed in a name."),
    ],
)  # fmt: skip
def test_fields_that_do_not_fit_are_field_errors(admin_page, extra, field, message):
    response = admin_page.post(NEW, slurm(**extra))

    assert response.status_code == 200
    assert response.context["form"].errors[field] == [message]
    assert not Cluster.objects.exists() and not AuditEvent.objects.exists()


def test_a_pin_the_adapter_speaks_is_kept(admin_page):
    admin_page.post(NEW, slurm(api_version="v0.0.41"))

    assert Cluster.objects.get(slug="legacy").api_version == "v0.0.41"


def test_a_stored_pin_the_adapter_does_not_speak_does_not_block_other_edits(admin_page):
    """A row saved before the page refused the pin: its check marks it
    (scheduler_unsupported_api_version); an edit of its site keeps the pin, a new pin is
    refused."""
    ClusterFactory(slug="c", name="C", slurm_cluster_name="c", api_version="v0.0.36")
    kept = slurm(slug="c", name="C", slurm_cluster_name="c", api_version="v0.0.36")

    assert admin_page.post("/clusters/c/edit/", {**kept, "site": "fra-1"}).status_code == 302
    refused = admin_page.post("/clusters/c/edit/", {**kept, "api_version": "v0.0.37"})

    assert list(refused.context["form"].errors) == ["api_version"]
    cluster = Cluster.objects.get(slug="c")
    assert (cluster.site, cluster.api_version) == ("fra-1", "v0.0.36")


def test_an_edit_is_audited_before_and_after_and_keeps_the_slug(admin_page):
    cluster = ClusterFactory(slug="c", name="Old", slurm_cluster_name="c")

    response = admin_page.post("/clusters/c/edit/", slurm(slug="other", name="New",
                                                          slurm_cluster_name="c"))  # fmt: skip

    assert response.status_code == 302
    cluster.refresh_from_db()
    assert (cluster.slug, cluster.name, cluster.site) == ("c", "New", "Garching")
    event = AuditEvent.objects.get()
    assert (event.action, event.before["name"], event.after["name"]) == (
        "cluster.updated", "Old", "New",
    )  # fmt: skip


def test_a_kind_change_of_a_cluster_holding_pools_is_refused_on_kind(admin_page):
    cluster = ClusterFactory(slug="busy")
    PoolFactory(slug="train", cluster=cluster)

    response = admin_page.post("/clusters/busy/edit/", {
        "slug": "busy", "name": "Busy", "kind": "kubernetes", "credential_kind": "kubeconfig",
        "credential_path": "/nonexistent/kubeconfig", "time_zone": "UTC",
    })  # fmt: skip

    assert response.context["form"].errors["kind"] == [
        "Cluster busy holds pools; its kind cannot change."
    ]
    assert Cluster.objects.get(slug="busy").kind == "slurm" and not AuditEvent.objects.exists()


def test_the_environments_cluster_keeps_its_connection(admin_page):
    ClusterFactory(slug="env-slurm", name="Env", credential_kind="environment", api_url="",
                   credential_path="", slurm_cluster_name="train")  # fmt: skip

    form = admin_page.get("/clusters/env-slurm/edit/").context["form"]
    assert form.fields["api_url"].disabled and form.fields["credential_kind"].disabled
    response = admin_page.post("/clusters/env-slurm/edit/", {
        "name": "Training", "site": "fra-1", "api_url": "http://elsewhere:6820",
        "credential_kind": "jwt-key", "time_zone": "UTC",
    })  # fmt: skip

    assert response.status_code == 302
    cluster = Cluster.objects.get(slug="env-slurm")
    assert (cluster.name, cluster.site, cluster.api_url, cluster.credential_kind) == (
        "Training", "fra-1", "", "environment",
    )  # fmt: skip


def test_delete_asks_then_is_refused_listing_the_pools(admin_page):
    cluster = ClusterFactory(slug="busy", name="Busy")
    PoolFactory(slug="train", name="Training", cluster=cluster)
    PoolFactory(slug="dev", name="Dev", cluster=cluster)

    confirm = _text(admin_page.get("/clusters/busy/delete/"))
    assert "Busy holds 2 pools" in confirm
    assert '<li>Dev <small class="muted">(dev)</small></li><li>Training' in confirm
    assert "Delete Busy</button>" not in confirm

    refused = admin_page.post("/clusters/busy/delete/")

    assert refused.status_code == 409
    assert "Cluster busy holds 2 pool(s): dev, train; move or delete them first." in (
        refused.content.decode()
    )
    assert Cluster.objects.filter(slug="busy").exists() and not AuditEvent.objects.exists()


def test_delete_of_an_empty_cluster_after_confirming(admin_page):
    ClusterFactory(slug="idle", name="Idle")

    confirm = _text(admin_page.get("/clusters/idle/delete/"))
    assert "It holds no pools." in confirm and "Delete Idle</button>" in confirm
    assert Cluster.objects.filter(slug="idle").exists()

    assert admin_page.post("/clusters/idle/delete/").status_code == 302
    assert not Cluster.objects.exists()
    event = AuditEvent.objects.get()
    assert (event.action, event.before["slug"]) == ("cluster.deleted", "idle")


@pytest.mark.parametrize("path", [NEW, "/clusters/c/edit/", "/clusters/c/delete/"])
def test_a_member_gets_403_and_changes_nothing(member_page, path):
    ClusterFactory(slug="c")
    assert member_page.get(path).status_code == 403
    assert member_page.post(path, slurm(slug="c2", slurm_cluster_name="c2")).status_code == 403
    assert Cluster.objects.count() == 1 and not AuditEvent.objects.exists()


def test_the_list_links_the_editor_for_pool_admins_only(admin_page, member_page):
    ClusterFactory(slug="c")
    admin = admin_page.get("/clusters/").content.decode()
    assert 'href="/clusters/new/"' in admin and 'href="/clusters/c/edit/"' in admin
    assert 'href="/clusters/c/delete/"' in admin
    member = member_page.get("/clusters/").content.decode()
    assert "/clusters/new/" not in member and "/clusters/c/edit/" not in member


def test_a_kubeconfig_that_is_not_there_saves_unreachable_not_a_500(
    admin_page, django_capture_on_commit_callbacks
):
    """A Kubernetes cluster whose kubeconfig path names no file: the client library raises its
    own ConfigException (not an OSError); it was a 500 after the row was written. The list
    shows the check's reason once it has run."""
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_page.post(
            NEW,
            {
                "slug": "rented",
                "name": "Rented",
                "kind": "kubernetes",
                "api_url": "",
                "credential_kind": "kubeconfig",
                "credential_path": "/nonexistent/kubeconfig",
                "time_zone": "UTC",
            },
        )

    assert response.status_code == 302
    cluster = Cluster.objects.get(slug="rented")
    assert cluster.status == ClusterStatus.UNREACHABLE
    reason = (
        "settings refused: kubeconfig /nonexistent/kubeconfig: "
        "Invalid kube-config file. No configuration found."
    )
    assert cluster.status_reason == reason
    assert reason in _text(admin_page.get(response["Location"]))


@pytest.mark.parametrize("spelling", ["Legacy", "LEGACY"])
def test_a_display_name_another_cluster_has_is_a_field_error(admin_page, spelling):
    """Clusters are told apart by name on every page: "Legacy" twice (any case) is refused,
    on create and on an edit, naming the other; the database refuses it too."""
    from django.db import IntegrityError, transaction

    ClusterFactory(slug="first", name="Legacy", slurm_cluster_name="old")

    response = admin_page.post(NEW, slurm(name=spelling))

    assert response.status_code == 200
    assert response.context["form"].errors["name"] == [
        "Cluster first is already named 'Legacy'; give this one another name."
    ]
    assert Cluster.objects.count() == 1 and not AuditEvent.objects.exists()
    ClusterFactory(slug="c", name="Other", slurm_cluster_name="c")
    edit = admin_page.post("/clusters/c/edit/", slurm(slug="c", name=spelling,
                                                      slurm_cluster_name="c"))  # fmt: skip
    assert list(edit.context["form"].errors) == ["name"]
    assert Cluster.objects.get(slug="c").name == "Other"
    with pytest.raises(IntegrityError), transaction.atomic():
        Cluster.objects.filter(slug="c").update(name=spelling.lower())
