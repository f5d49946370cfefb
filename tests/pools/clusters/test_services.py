"""Clusters as data: the environment's clusters, adapters per cluster, the connection check,
and the refusals (a taken ClusterName or API URL, a cluster holding pools, bad fields)."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.test import override_settings
from factories import ClusterFactory, PoolFactory
from kubernetes_support import fake_apiserver, kubernetes_cluster_fields

from pools.audit.models import AuditEvent
from pools.clusters import adapters
from pools.clusters.environment import environment_clusters
from pools.clusters.models import Cluster
from pools.clusters.services import (
    cluster_check,
    cluster_create,
    cluster_delete,
    cluster_update,
)
from pools.common.choices import ClusterStatus, Scheduler
from pools.common.errors import ClusterInUse, ClusterTaken, InvalidInput
from pools.inventory.models import Pool
from scheduler_adapters.fake import FakeScheduler

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_adapters")]

SLURM_ENV = {
    "BACKEND": "slurm",
    "URL": "http://127.0.0.1:6820",
    "USER": "portal",
    "CLUSTER": "modern",
    "TOKEN": "t",
    "TIME_ZONE": "Europe/Berlin",
}
FAKE_SLURM = {"slurm": {"BACKEND": "fake"}}


def render(cluster: Cluster) -> dict:
    return {"slug": cluster.slug, "kind": cluster.kind}


# ----------------------------------------------------------------- the environment's clusters


def test_environment_clusters_are_the_real_connections_only():
    """A real Slurm connection gives one described row; a fake backend gives none (the demo
    and the tests' fakes are no cluster to show)."""
    assert environment_clusters(
        {"slurm": SLURM_ENV, "kubernetes": {"BACKEND": "kubernetes-fake"}}
    ) == [
        {
            "slug": "env-slurm",
            "name": "Slurm (SLURM_REST_URL)",
            "kind": "slurm",
            "credential_kind": "environment",
            "api_url": "http://127.0.0.1:6820",
            "slurm_cluster_name": "modern",
            "slurm_user": "portal",
            "time_zone": "Europe/Berlin",
            "api_version": "",
        }
    ]


def test_the_migration_puts_existing_pools_in_the_environment_cluster():
    """The data step of 0038: with SLURM_REST_URL set, the Slurm pools go into ``env-slurm``;
    the Kubernetes pool (no KUBERNETES_* variables) keeps no cluster, i.e. the environment's."""
    train = PoolFactory(slug="train")
    infer = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES)
    migration = importlib.import_module("pools.migrations.0038_clusters_cluster")

    with override_settings(SCHEDULERS={"slurm": SLURM_ENV}):
        migration.environment_clusters_create(apps, None)

    train.refresh_from_db()
    infer.refresh_from_db()
    assert train.cluster.slug == "env-slurm"
    assert train.cluster.slurm_cluster_name == "modern"
    assert infer.cluster is None


@override_settings(SCHEDULERS=FAKE_SLURM)
def test_the_environment_configuration_keeps_working_unchanged():
    """A pool without a cluster, and a pool in the environment's cluster, both get the very
    adapter ``settings.SCHEDULERS["slurm"]`` builds, as before clusters were data."""
    env = Cluster.objects.create(
        slug="env-slurm", name="Env", kind=Scheduler.SLURM, credential_kind="environment"
    )
    plain = PoolFactory(slug="plain")
    in_env = PoolFactory(slug="in-env", cluster=env)

    expected = adapters.scheduler_adapter("slurm")

    assert isinstance(expected, FakeScheduler)
    assert adapters.pool_adapter(plain) is expected
    assert adapters.pool_adapter(in_env) is expected


# ----------------------------------------------------------------- adapters per cluster


def test_two_kubernetes_clusters_each_get_their_own_adapter(
    apiservers, tmp_path, django_capture_on_commit_callbacks
):
    """Each pool's adapter talks to its own cluster's API server: listing nodes through the
    pool of cluster A reaches server A only, and through B server B only."""
    with django_capture_on_commit_callbacks(execute=True):  # the checks the creates queue
        fields = kubernetes_cluster_fields(apiservers[0], tmp_path, "site-a")
        a = cluster_create(fields=fields, actor=None, render=render)
        fields = kubernetes_cluster_fields(apiservers[1], tmp_path, "site-b")
        b = cluster_create(fields=fields, actor=None, render=render)
    a.refresh_from_db()
    b.refresh_from_db()
    pool_a = PoolFactory(slug="infer-a", scheduler=Scheduler.KUBERNETES, cluster=a)
    pool_b = PoolFactory(slug="infer-b", scheduler=Scheduler.KUBERNETES, cluster=b)
    before = [len(server.requests) for server in apiservers]

    adapters.pool_adapter(pool_a).list_nodes()
    after_a = [len(server.requests) for server in apiservers]
    adapters.pool_adapter(pool_b).list_nodes()
    after_b = [len(server.requests) for server in apiservers]

    assert (a.status, b.status) == (ClusterStatus.REACHABLE, ClusterStatus.REACHABLE)
    assert after_a[0] > before[0] and after_a[1] == before[1]
    assert after_b[1] > after_a[1] and after_b[0] == after_a[0]
    assert adapters.pool_adapter(pool_a) is not adapters.pool_adapter(pool_b)


# ----------------------------------------------------------------- saved as unreachable


def test_unreadable_credentials_save_the_cluster_unreachable_with_the_reason(
    tmp_path, django_capture_on_commit_callbacks
):
    missing = tmp_path / "absent.key"
    cluster = ClusterFactory(slug="old")
    pool = PoolFactory(slug="old-train", cluster=cluster)

    with django_capture_on_commit_callbacks(execute=True):
        cluster = cluster_update(
            cluster=cluster,
            changes={"credential_path": str(missing)},
            actor=None,
            before={},
            render=render,
        )
        assert (cluster.status, cluster.check_pending) == (ClusterStatus.UNKNOWN, True)

    cluster.refresh_from_db()
    assert (cluster.status, cluster.check_pending) == (ClusterStatus.UNREACHABLE, False)
    assert cluster.status_reason.startswith("credentials cannot be read: ")
    assert str(missing) in cluster.status_reason
    assert Pool.objects.get(pk=pool.pk).cluster_id == cluster.pk


def test_a_url_nobody_answers_is_unreachable(tmp_path, django_capture_on_commit_callbacks):
    key = tmp_path / "jwt.key"
    key.write_bytes(b"k" * 32)
    port = fake_apiserver().free_port()

    with django_capture_on_commit_callbacks(execute=True):
        cluster = cluster_create(
            fields={
                "slug": "gone",
                "name": "Gone",
                "kind": Scheduler.SLURM,
                "api_url": f"http://127.0.0.1:{port}",
                "slurm_cluster_name": "gone",
                "slurm_user": "portal",
                "credential_kind": "jwt-key",
                "credential_path": str(key),
            },
            actor=None,
            render=render,
        )

    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.UNREACHABLE
    assert cluster.status_reason.startswith("scheduler_unavailable: ")
    assert Cluster.objects.get(slug="gone").checked_at is not None


def test_a_url_answering_another_api_is_unreachable(
    apiservers, tmp_path, django_capture_on_commit_callbacks
):
    """A Slurm cluster pointed at a Kubernetes API server: no slurmrestd version is served."""
    token = tmp_path / "t"
    token.write_text("x", encoding="utf-8")

    with django_capture_on_commit_callbacks(execute=True):
        cluster = cluster_create(
            fields={
                "slug": "wrong",
                "name": "Wrong",
                "kind": Scheduler.SLURM,
                "api_url": apiservers[0].url,
                "slurm_cluster_name": "wrong",
                "slurm_user": "portal",
                "credential_kind": "token-file",
                "credential_path": str(token),
            },
            actor=None,
            render=render,
        )

    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.UNREACHABLE
    assert cluster.status_reason.startswith("scheduler_")


def test_a_stored_pin_the_adapter_does_not_speak_is_marked_unreachable(tmp_path):
    """The page and the API refuse such a pin (test_api, test_edit_pages); a row stored with
    one before is kept, and its check says why it cannot connect."""
    key = tmp_path / "jwt.key"
    key.write_bytes(b"k" * 32)
    cluster = ClusterFactory(slug="pinned", credential_path=str(key), api_version="v0.0.36")

    cluster_check(cluster=cluster)

    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.UNREACHABLE
    assert cluster.status_reason.startswith("scheduler_unsupported_api_version: ")


# ----------------------------------------------------------------- refusals change nothing


def test_a_second_slurm_cluster_with_the_same_cluster_name_is_refused():
    ClusterFactory(slug="first", slurm_cluster_name="modern")
    with pytest.raises(ClusterTaken) as refused:
        cluster_create(
            fields={
                "slug": "second",
                "name": "Second",
                "kind": Scheduler.SLURM,
                "api_url": "http://other:6820",
                "slurm_cluster_name": "modern",
                "slurm_user": "portal",
                "credential_kind": "jwt-key",
                "credential_path": "/k",
            },
            actor=None,
            render=render,
        )

    assert refused.value.data == {"field": "slurm_cluster_name", "cluster": "first"}
    assert list(Cluster.objects.values_list("slug", flat=True)) == ["first"]
    assert not AuditEvent.objects.exists()


def test_a_second_kubernetes_cluster_with_the_same_api_url_is_refused(tmp_path):
    ClusterFactory(
        slug="k1",
        kind=Scheduler.KUBERNETES,
        api_url="https://k8s.example.com:6443",
        credential_kind="token-file",
        credential_path="/t",
    )
    with pytest.raises(ClusterTaken) as refused:
        cluster_create(
            fields={
                "slug": "k2",
                "name": "K2",
                "kind": Scheduler.KUBERNETES,
                "api_url": "https://k8s.example.com:6443",
                "credential_kind": "kubeconfig",
                "credential_path": "/kc",
            },
            actor=None,
            render=render,
        )

    assert refused.value.data == {"field": "api_url", "cluster": "k1"}
    assert Cluster.objects.count() == 1


def test_deleting_a_cluster_that_holds_pools_is_refused_listing_them():
    cluster = ClusterFactory(slug="busy")
    PoolFactory(slug="b-pool", cluster=cluster)
    PoolFactory(slug="a-pool", cluster=cluster)

    with pytest.raises(ClusterInUse) as refused:
        cluster_delete(cluster=cluster, actor=None, before={})

    assert refused.value.status == 409
    assert refused.value.data == {"pools": ["a-pool", "b-pool"]}
    assert Cluster.objects.filter(pk=cluster.pk).exists()


def test_deleting_a_cluster_whose_nodes_are_outside_any_pool_is_refused_counting_them():
    from factories import NodeFactory

    cluster = ClusterFactory(slug="left")
    NodeFactory(hostname="gpu-01", pool=None, cluster=cluster)
    NodeFactory(hostname="gpu-02", pool=None, cluster=cluster)

    with pytest.raises(ClusterInUse) as refused:
        cluster_delete(cluster=cluster, actor=None, before={})

    assert refused.value.data == {"pools": [], "nodes": 2}
    assert str(refused.value).startswith("Cluster left still has 2 node(s)")
    assert Cluster.objects.filter(pk=cluster.pk).exists()


def test_deleting_an_empty_cluster_is_audited():
    cluster = ClusterFactory(slug="empty")

    cluster_delete(cluster=cluster, actor=None, before={"slug": "empty"})

    assert not Cluster.objects.exists()
    event = AuditEvent.objects.get()
    assert (event.action, event.before) == ("cluster.deleted", {"slug": "empty"})


def test_the_kind_of_a_cluster_holding_pools_cannot_change():
    cluster = ClusterFactory(slug="held")
    PoolFactory(slug="held-pool", cluster=cluster)

    with pytest.raises(ClusterInUse):
        cluster_update(
            cluster=cluster,
            changes={"kind": Scheduler.KUBERNETES, "credential_kind": "kubeconfig"},
            actor=None,
            before={},
            render=render,
        )

    assert Cluster.objects.get(pk=cluster.pk).kind == Scheduler.SLURM


def test_an_environment_cluster_keeps_its_connection_but_takes_labels():
    env = Cluster.objects.create(
        slug="env-slurm", name="Env", kind=Scheduler.SLURM, credential_kind="environment"
    )
    with pytest.raises(InvalidInput) as refused:
        cluster_update(
            cluster=env, changes={"api_url": "http://x:1"}, actor=None, before={}, render=render
        )
    assert refused.value.data == {"field": "api_url"}

    cluster_update(
        cluster=env,
        changes={"site": "Garching", "retiring": True},
        actor=None,
        before={},
        render=render,
    )
    env.refresh_from_db()
    assert (env.site, env.retiring, env.status) == ("Garching", True, ClusterStatus.UNKNOWN)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"time_zone": "Mars/Olympus"}, "time_zone"),
        ({"slurm_cluster_name": ""}, "slurm_cluster_name"),
        ({"credential_kind": "kubeconfig"}, "credential_kind"),
        ({"credential_path": ""}, "credential_path"),
        ({"api_version": "0.0.42"}, "api_version"),
        # control characters and bidirectional marks: the API refused them in the name only,
        # the page not even there (its form leaves name to the service)
        ({"name": "Evil\u202eName"}, "name"),
        ({"slurm_cluster_name": "bad\nname"}, "slurm_cluster_name"),
        ({"slurm_user": "portal\u202e"}, "slurm_user"),
    ],
)
def test_inconsistent_fields_are_refused_and_change_nothing(change, field):
    fields = {
        "slug": "bad",
        "name": "Bad",
        "kind": Scheduler.SLURM,
        "api_url": "http://h:6820",
        "slurm_cluster_name": "bad",
        "slurm_user": "portal",
        "credential_kind": "jwt-key",
        "credential_path": "/k",
        **change,
    }
    with pytest.raises(InvalidInput) as refused:
        cluster_create(fields=fields, actor=None, render=render)

    assert refused.value.data == {"field": field}
    assert not Cluster.objects.exists()
