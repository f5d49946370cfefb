"""Waiting work per cluster (issue 35): one read per cluster kept as data, queued by the
minute's refresh; each cluster's rows replaced whole by its own read; a cluster whose read
fails keeps its rows and shows the error on its read and in its health; page, CSV and API
name the cluster."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

import pytest
from factories import ClusterFactory, WaitingWatchFactory

from pools.clusters.models import ClusterError
from pools.clusters.selectors import cluster_list
from pools.common.choices import ClusterOperation, Scheduler
from pools.waiting import services
from pools.waiting.models import PendingWork, PendingWorkRead
from scheduler_adapters.errors import SchedulerUnavailable
from scheduler_adapters.records import JobQueue, PendingJob

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 4, 11, 30, tzinfo=UTC)


def pending(job_id: int, account: str, reason: str = "Priority") -> PendingJob:
    return PendingJob(
        job_id=job_id, name="train", account=account, user="alice", partition="gpu",
        reason=reason, reason_detail=None, gpus_requested={"a100": 2}, nodes_requested=1,
        submit=NOW - timedelta(minutes=5), expected_start=None, time_limit_min=60, priority=1,
        qos="normal", dependency=None, reservation=None,
    )  # fmt: skip


class Queue:
    """One cluster's slurmrestd as the reader sees it: its pending jobs, or an error."""

    def __init__(self, *jobs: PendingJob) -> None:
        self.jobs, self.error = jobs, None

    def job_queue(self, accounts=None):
        if self.error is not None:
            raise self.error
        return JobQueue(pending=self.jobs, running=())

    def get_gpu_limits(self, account):
        return ()


@pytest.fixture
def two(monkeypatch, team):
    """Slurm clusters ``train`` and ``old`` kept as data; both number their jobs from 1, so
    job 7 is in each. Team ``nlp`` waits in both."""
    clusters = {slug: ClusterFactory(slug=slug, name=slug.title()) for slug in ("train", "old")}
    queues = {"train": Queue(pending(7, "nlp"), pending(8, "nlp")), "old": Queue(pending(7, "nlp"))}
    monkeypatch.setattr(services, "cluster_adapter", lambda cluster: queues[cluster.slug])
    monkeypatch.setattr(services, "scheduler_adapter", lambda name: None)  # no environment's
    return clusters, queues


def rows() -> list[tuple[str, str]]:
    return sorted(PendingWork.objects.values_list("cluster__slug", "ref"))


def test_the_refresh_queues_one_read_per_cluster(two, django_capture_on_commit_callbacks):
    clusters, _ = two
    WaitingWatchFactory(team__slug="nlp", viewed_at=NOW)
    with django_capture_on_commit_callbacks(execute=False) as queued:
        report = services.pending_work_refresh(now=NOW)
    assert (report.skipped, report.queued, report.rows) == (False, 2, {})
    assert len(queued) == 2
    # nobody looking: nothing read, nothing queued
    with django_capture_on_commit_callbacks(execute=False) as queued:
        idle = services.pending_work_refresh(now=NOW + timedelta(minutes=11))
    assert (idle.skipped, idle.queued, queued) == (True, 0, [])


def test_each_cluster_is_read_and_replaced_on_its_own(two):
    clusters, queues = two
    assert services.pending_work_refresh_cluster(cluster_id=clusters["train"].pk, now=NOW) == 2
    assert services.pending_work_refresh_cluster(cluster_id=clusters["old"].pk, now=NOW) == 1
    # job 7 of each cluster is its own row
    assert rows() == [("old", "7"), ("train", "7"), ("train", "8")]

    # train's next read has job 8 only: train's rows replaced whole, old's untouched
    queues["train"].jobs = (pending(8, "nlp"),)
    later = NOW + timedelta(minutes=1)
    assert services.pending_work_refresh_cluster(cluster_id=clusters["train"].pk, now=later) == 1
    assert rows() == [("old", "7"), ("train", "8")]
    reads = {r.cluster.slug: (r.ok, r.rows, r.read_at) for r in PendingWorkRead.objects.all()}
    assert reads == {"train": (True, 1, later), "old": (True, 1, NOW)}


def test_a_failed_read_keeps_that_clusters_rows_and_shows_in_its_health(two):
    clusters, queues = two
    for slug in ("train", "old"):
        services.pending_work_refresh_cluster(cluster_id=clusters[slug].pk, now=NOW)
    queues["old"].error = SchedulerUnavailable("connection refused", operation="job_queue")
    queues["old"].jobs = ()
    failed_at = datetime.now(UTC)

    assert services.pending_work_refresh_cluster(cluster_id=clusters["old"].pk) is None

    assert rows() == [("old", "7"), ("train", "7"), ("train", "8")]  # old's rows kept
    read = PendingWorkRead.objects.get(cluster=clusters["old"])
    assert (read.ok, read.rows, read.error) == (False, 1, "job_queue: connection refused")
    error = ClusterError.objects.get()
    assert (error.cluster, error.operation) == (clusters["old"], ClusterOperation.WAITING)
    assert error.message == "job_queue: connection refused"
    assert error.at >= failed_at
    health = {c.slug: c for c in cluster_list()}
    assert (health["old"].errors_last_hour, health["train"].errors_last_hour) == (1, 0)


def test_unreadable_credentials_are_an_error_of_that_cluster(two, monkeypatch):
    clusters, _ = two

    def unreadable(cluster):
        raise OSError(f"[Errno 2] No such file: '/etc/portal/{cluster.slug}.key'")

    monkeypatch.setattr(services, "cluster_adapter", unreadable)
    assert services.pending_work_refresh_cluster(cluster_id=clusters["old"].pk, now=NOW) is None
    read = PendingWorkRead.objects.get(cluster=clusters["old"])
    assert read.error == "credentials: [Errno 2] No such file: '/etc/portal/old.key'"
    assert ClusterError.objects.get().operation == ClusterOperation.WAITING


def test_page_csv_and_api_name_the_cluster(two, team_member, client):
    clusters, _ = two
    for slug in ("train", "old"):
        services.pending_work_refresh_cluster(cluster_id=clusters[slug].pk, now=NOW)
    client.force_login(team_member)
    team = team_member.memberships.get().team

    html = client.get(f"/teams/{team.slug}/waiting/").content.decode()
    assert '<span class="badge">Slurm · Old</span> <code class="ident">7</code>' in html
    assert '<span class="badge">Slurm · Train</span> <code class="ident">8</code>' in html
    assert "Slurm (Old): read" in html and "Slurm (Train): read" in html

    exported = client.get(f"/teams/{team.slug}/waiting/?export=csv&cluster=train")
    body = b"".join(exported.streaming_content).decode().lstrip("\ufeff")
    table = list(csv.DictReader(io.StringIO(body)))
    assert sorted((r["cluster"], r["ref"]) for r in table) == [("train", "7"), ("train", "8")]

    api = client.get("/api/v1/pending-work/", {"cluster": "old"}).json()
    assert [(w["cluster"], w["scheduler"], w["ref"]) for w in api["results"]] == [
        ("old", Scheduler.SLURM, "7")
    ]
    unknown = client.get("/api/v1/pending-work/", {"cluster": "nowhere"})
    assert unknown.status_code == 400 and "cluster" in unknown.json()["errors"]
