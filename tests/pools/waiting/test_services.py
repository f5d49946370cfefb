"""Reading and storing waiting work: the watch, the refresh (skipped while nobody looks, a
failed scheduler keeps its rows), Slurm rows with the cap's figures, Kueue rows by namespace."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from factories import PendingWorkFactory, TeamFactory, WaitingWatchFactory

from pools.waiting import services
from pools.waiting.models import PendingWork, PendingWorkRead, WaitingWatch
from scheduler_adapters.errors import SchedulerUnavailable
from scheduler_adapters.kueue_workloads import pending_workloads
from scheduler_adapters.records import GpuLimit, JobQueue, PendingJob, RunningJob

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 4, 11, 30, tzinfo=UTC)
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def pending(job_id, account, reason, gpus, **changes):
    values = dict(
        job_id=job_id, name="train", account=account, user="alice", partition="gpu",
        reason=reason, reason_detail=None, gpus_requested=gpus, nodes_requested=1,
        submit=NOW - timedelta(minutes=5), expected_start=None, time_limit_min=60, priority=1,
        qos="normal", dependency=None, reservation=None,
    )  # fmt: skip
    values.update(changes)
    return PendingJob(**values)


def running(job_id, account, gpus, ends):
    return RunningJob(job_id, account, "bob", "gpu", gpus, NOW - timedelta(hours=1), ends)


class SlurmStub:
    """Answers like SlurmRestAdapter (already parsed); counts the calls."""

    def __init__(self, queue=None, limits=None, error=None):
        self.queue, self.limits, self.error, self.calls = queue, limits or {}, error, []

    def job_queue(self, accounts=None):
        self.calls.append(("job_queue", tuple(accounts or ())))
        if self.error:
            raise self.error
        return self.queue

    def get_gpu_limits(self, account):
        self.calls.append(("get_gpu_limits", account))
        return tuple(GpuLimit(account, None, t, n) for t, n in self.limits.get(account, {}).items())


@pytest.fixture
def slurm(monkeypatch):
    stub = SlurmStub()
    monkeypatch.setattr(
        services, "scheduler_adapter", lambda name: stub if name == "slurm" else None
    )
    return stub


def test_nobody_watching_means_no_read(slurm):
    TeamFactory(slug="nlp")
    WaitingWatchFactory(team__slug="nlp", viewed_at=NOW - timedelta(minutes=11))
    report = services.pending_work_refresh(now=NOW)
    assert report.skipped is True
    assert slurm.calls == []


def test_a_watched_team_gets_its_cap_explained_with_figures(slurm):
    """nlp: cap 4 a100 (GrpTRES), held by jobs 10 (3 cards, ends 12:00) and 11 (1 card, ends
    13:00): 3 + 1 = 4 = the cap. Job 12 asks 2 and pends on AssocGrpGRES. Job 20 of account
    ``other`` (no team) is not stored."""
    nlp = TeamFactory(slug="nlp")
    WaitingWatchFactory(team=nlp, viewed_at=NOW - timedelta(minutes=2))
    slurm.queue = JobQueue(
        pending=(
            pending(12, "nlp", "AssocGrpGRES", {"a100": 2}),
            pending(20, "other", "Priority", {"a100": 1}),
        ),
        running=(
            running(10, "nlp", {"a100": 3}, datetime(2026, 12, 4, 12, 0, tzinfo=UTC)),
            running(11, "nlp", {"a100": 1}, datetime(2026, 12, 4, 13, 0, tzinfo=UTC)),
        ),
    )
    slurm.limits = {"nlp": {"a100": 4}}

    report = services.pending_work_refresh(now=NOW)

    assert report.rows == {"slurm": 1}
    row = PendingWork.objects.get()
    assert (row.team, row.ref, row.gres_type, row.cards_requested) == (nlp, "12", "a100", 2)
    assert (row.kind, row.translated, row.reason_code) == ("cap_full", True, "AssocGrpGRES")
    assert row.explanation == (
        "Your team's cap of 4 cards is full — 4 cards held by jobs 10 and 11; "
        "the first ends at 12:00 UTC"
    )
    assert ("get_gpu_limits", "nlp") in slurm.calls
    read = PendingWorkRead.objects.get(scheduler="slurm")
    assert (read.ok, read.rows, read.read_at) == (True, 1, NOW)


def test_a_failed_read_keeps_the_previous_rows_and_says_why(slurm):
    nlp = TeamFactory(slug="nlp")
    WaitingWatchFactory(team=nlp, viewed_at=NOW)
    kept = PendingWorkFactory(team=nlp, scheduler="slurm", ref="7")
    slurm.error = SchedulerUnavailable("slurmrestd unreachable", operation="job_queue")

    report = services.pending_work_refresh(now=NOW)

    assert report.errors == {"slurm": "job_queue: slurmrestd unreachable"}
    assert list(PendingWork.objects.values_list("pk", flat=True)) == [kept.pk]
    read = PendingWorkRead.objects.get(scheduler="slurm")
    assert (read.ok, read.error) == (False, "job_queue: slurmrestd unreachable")


def test_a_second_read_replaces_the_rows(slurm):
    nlp = TeamFactory(slug="nlp")
    slurm.queue = JobQueue((pending(1, "nlp", "Priority", {"a100": 1}),), ())
    services.pending_work_refresh(now=NOW, force=True)
    slurm.queue = JobQueue((pending(2, "nlp", "Resources", {"a100": 1}),), ())
    services.pending_work_refresh(now=NOW + timedelta(minutes=1), force=True)
    assert list(PendingWork.objects.values_list("ref", "kind")) == [("2", "resources")]
    assert nlp.pending_work.count() == 1


def test_kueue_rows_map_namespaces_to_teams():
    """Recorded workloads: team-alpha has 3 waiting, team-beta 5; only alpha is a team here."""
    TeamFactory(slug="alpha")
    items = json.loads((FIXTURES / "kubernetes" / "kueue_workloads.json").read_text())["items"]
    stored = services.pending_work_store(
        scheduler="kubernetes", workloads=pending_workloads(items), now=NOW
    )
    assert stored == 3
    rows = {w.name: w for w in PendingWork.objects.all()}
    assert rows["job-train-llama-5c1f2"].explanation == (
        "Your team's quota of nvidia-a100-sxm4-80gb cards is in use: 4 cards more needed"
    )
    assert rows["job-train-llama-5c1f2"].ref == "team-alpha/job-train-llama-5c1f2"
    assert rows["job-eval-3d9e1"].kind == "queue_problem"
    assert rows["job-sweep-huge-77aa0"].kind == "quota_exceeded"


def test_the_watch_is_written_at_most_every_half_minute():
    nlp = TeamFactory(slug="nlp")
    services.waiting_watch_touch(team=nlp, now=NOW)
    services.waiting_watch_touch(team=nlp, now=NOW + timedelta(seconds=20))
    assert WaitingWatch.objects.get(team=nlp).viewed_at == NOW
    services.waiting_watch_touch(team=nlp, now=NOW + timedelta(seconds=31))
    assert WaitingWatch.objects.get(team=nlp).viewed_at == NOW + timedelta(seconds=31)


def test_a_dry_run_without_a_cluster_is_skipped_and_the_fake_reads_nothing(monkeypatch):
    """A dry run has no transport: not read, no error recorded. The in-memory Kubernetes fake
    (the adapter over a dict) serves no Workloads: read, 0 rows."""
    from scheduler_adapters.kubernetes_fake import FakeKubernetes

    class DryRun:
        transport = None

        def pending_workloads(self):  # pragma: no cover - must not be called
            raise AssertionError("read without a cluster")

    def use(adapter):
        monkeypatch.setattr(
            services, "scheduler_adapter", lambda name: adapter if name == "kubernetes" else None
        )
        return services.pending_work_refresh(now=NOW, force=True)

    dry = use(DryRun())
    assert (dry.rows, dry.errors) == ({}, {})
    assert not PendingWorkRead.objects.exists()
    fake = use(FakeKubernetes())
    assert (fake.rows, fake.errors) == ({"kubernetes": 0}, {})
