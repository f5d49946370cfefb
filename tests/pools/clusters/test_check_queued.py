"""The connection check is a task, never a request's work: with a broker, the API's create,
update and ``check/`` and the pages' create, edit and *Check now* write the cluster and an outbox
row for :data:`pools.jobs.CLUSTER_CHECK` and call no scheduler; the page shows *checking…* and
polls until the task has recorded the result, then shows that result."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest
import urllib3
from broker_support import celery_broker
from cluster_support import offline_slurm_fields
from factories import ClusterFactory
from kubernetes_support import kubernetes_cluster_fields

from pools.clusters import services
from pools.clusters.models import Cluster
from pools.clusters.tasks import cluster_check_task
from pools.common.choices import ClusterStatus
from pools.jobs import CLUSTER_CHECK
from pools.jobs.models import QueuedJob

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_adapters")]


@pytest.fixture
def no_scheduler(monkeypatch):
    """Every way a check reaches a scheduler, recorded and refused: the adapter a check builds
    (:func:`pools.clusters.services.cluster_adapter_unshared`), httpx (slurmrestd) and urllib3
    (the Kubernetes client). Yields the list of what was attempted."""
    attempts: list[str] = []

    def refuse(what):
        def call(*args, **kwargs):
            attempts.append(what)
            raise AssertionError(f"{what} called in a request")

        return call

    monkeypatch.setattr(services, "cluster_adapter_unshared", refuse("adapter"))
    monkeypatch.setattr(httpx.Client, "send", refuse("httpx"))
    monkeypatch.setattr(urllib3.connectionpool.HTTPConnectionPool, "urlopen", refuse("urllib3"))
    yield attempts


@pytest.fixture
def broker():
    """A broker configured (kombu's in-memory transport): jobs go through the outbox, never run
    in this process. The test's transaction never commits, so nothing is sent either."""
    with celery_broker("memory://"):
        yield


def queued_checks() -> list[list]:
    return list(
        QueuedJob.objects.filter(task_name=CLUSTER_CHECK)
        .order_by("pk")
        .values_list("args", flat=True)
    )


def test_no_view_calls_the_scheduler_when_a_broker_is_configured(
    admin_api, admin_page, apiservers, tmp_path, broker, no_scheduler
):
    """Six requests, six checks queued (one per request, in order), none made: a Kubernetes
    cluster whose token and API server are real (its check would list nodes there) and a Slurm
    cluster with a readable key (its check would ask slurmrestd)."""
    key = tmp_path / "jwt.key"
    key.write_bytes(b"k" * 32)
    kube = kubernetes_cluster_fields(apiservers[0], tmp_path, "site-a")

    created = admin_api.post("/api/v1/clusters/", kube, format="json")
    k = Cluster.objects.get(slug="site-a")
    moved = admin_api.patch(
        "/api/v1/clusters/site-a/", {"api_url": apiservers[1].url}, format="json"
    )
    checked = admin_api.post("/api/v1/clusters/site-a/check/")
    page_new = admin_page.post(
        "/clusters/new/",
        offline_slurm_fields(credential_path=str(key), api_url="http://127.0.0.1:9"),
    )
    s = Cluster.objects.get(slug="legacy")
    page_edit = admin_page.post(
        "/clusters/legacy/edit/",
        offline_slurm_fields(credential_path=str(key), api_url="http://127.0.0.1:10"),
    )
    page_check = admin_page.post("/clusters/legacy/check/")

    assert no_scheduler == []
    assert [r.status_code for r in (created, moved, checked, page_new, page_edit, page_check)] == [
        201, 200, 202, 302, 302, 302,
    ]  # fmt: skip
    assert [created.json()["check_pending"], moved.json()["check_pending"]] == [True, True]
    assert checked.json()["check_pending"] is True
    assert queued_checks() == [[k.pk], [k.pk], [k.pk], [s.pk], [s.pk], [s.pk]]
    for cluster in Cluster.objects.all():
        assert (cluster.status, cluster.checked_at, cluster.check_pending) == (
            ClusterStatus.UNKNOWN, None, True,
        )  # fmt: skip


def test_field_errors_are_still_answered_at_once_and_queue_nothing(
    admin_api, admin_page, broker, no_scheduler
):
    """A bad time zone needs no scheduler: 400 (API) or the field's error (page), nothing
    saved, nothing queued."""
    api = admin_api.post(
        "/api/v1/clusters/", offline_slurm_fields(time_zone="Nowhere/Else"), format="json"
    )
    page = admin_page.post("/clusters/new/", offline_slurm_fields(time_zone="Nowhere/Else"))

    assert (api.status_code, api.json()["code"]) == (400, "invalid_input")
    assert list(page.context["form"].errors) == ["time_zone"]
    assert not Cluster.objects.exists() and queued_checks() == [] and no_scheduler == []


def test_a_site_edit_queues_no_check(admin_page, broker, no_scheduler):
    """Only a connection field needs a check: a new site saves and queues nothing."""
    ClusterFactory(slug="legacy", name="Legacy", slurm_cluster_name="legacy",
                   credential_path="/nonexistent/jwt.key")  # fmt: skip

    response = admin_page.post(
        "/clusters/legacy/edit/",
        offline_slurm_fields(site="fra-1", api_url=Cluster.objects.get().api_url),
    )

    assert response.status_code == 302 and queued_checks() == []
    assert Cluster.objects.get().check_pending is False


def test_the_page_polls_while_pending_then_shows_what_the_task_recorded(
    admin_page, broker, no_scheduler, monkeypatch
):
    """Check now on a cluster last seen reachable: the list says *checking…* (the last result
    below it) and asks for its table again; the task then finds the key file missing, and the
    table it answers shows *unreachable* with that reason, no *checking…*, no poll."""
    cluster = ClusterFactory(slug="c", name="Legacy", status=ClusterStatus.REACHABLE,
                             checked_at=datetime(2026, 12, 5, 1, 0, tzinfo=UTC),
                             credential_path="/nonexistent/c.key")  # fmt: skip

    admin_page.post("/clusters/c/check/")
    pending = admin_page.get("/clusters/").content.decode()
    assert "checking…" in pending
    assert 'last check:</span> <span class="badge up">reachable</span>' in pending
    assert 'hx-get="/clusters/"' in pending and 'hx-trigger="load delay:3s"' in pending
    assert "Checking Legacy&#x27;s connection; the list shows the result." in pending

    monkeypatch.undo()  # the worker may reach the scheduler
    assert cluster_check_task(cluster.pk) == ClusterStatus.UNREACHABLE
    table = admin_page.get("/clusters/", headers={"HX-Request": "true"})

    body = table.content.decode()
    reason = "credentials cannot be read: [Errno 2] No such file or directory: '/nonexistent/c.key'"
    assert '<span class="badge down">unreachable</span>' in body
    assert reason.replace("'", "&#x27;") in body
    assert "checking…" not in body and "hx-trigger" not in body
    assert "<html" not in body  # the table alone, for the swap
    assert Cluster.objects.get(pk=cluster.pk).check_requested_at is None


def test_a_request_made_while_a_check_runs_stays_pending_for_its_own(broker):
    """The check clears the request it was read with only: one asked for while the scheduler
    was being asked (here: between reading the row and recording) keeps the cluster pending."""
    cluster = ClusterFactory(slug="c", credential_path="/nonexistent/c.key")
    services.cluster_check_request(cluster=cluster)
    read = Cluster.objects.get(pk=cluster.pk)
    later = services.cluster_check_request(cluster=cluster)  # a second click, a new instant
    assert later.check_requested_at > read.check_requested_at

    services.cluster_check(cluster=read)

    after = Cluster.objects.get(pk=cluster.pk)
    assert (after.status, after.check_requested_at) == (
        ClusterStatus.UNREACHABLE, later.check_requested_at,
    )  # fmt: skip
    services.cluster_check(cluster=after)
    assert Cluster.objects.get(pk=cluster.pk).check_requested_at is None
