"""A hand-built fleet of two Slurm and two Kubernetes clusters: each cluster's node import,
usage import and idle-scan read go through that cluster's own adapter and touch only that
cluster's pools; each reports in its own cluster's health (issue 35)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from factories import (
    AllocationFactory,
    ClusterFactory,
    GpuFactory,
    NodeFactory,
    PoolFactory,
    TeamFactory,
)

from billing.models import UsageRecord
from billing.services.cluster_usage import usage_import_cluster, usage_import_clusters_queue
from pools.capacity.models import SchedulerDrift
from pools.capacity.services.reconcile import reconcile_cluster
from pools.clusters.selectors import cluster_list
from pools.common.choices import AllocationStatus, Scheduler
from pools.inventory.models import GpuModel, Node
from scheduler_adapters.errors import NotFound, SchedulerUnavailable
from scheduler_adapters.fake import FakeScheduler
from scheduler_adapters.records import GpuLimit, JobRecord, JobState
from scheduler_adapters.types import InventorySource, NodeSnapshot, NodeState, ParseResult

pytestmark = pytest.mark.django_db


class KubeNodes:
    """What Kubernetes reconcile asks of a cluster with no team namespaces: its nodes."""

    def __init__(self, *hostnames: str, site: str) -> None:
        self.hostnames = hostnames
        self.site = site

    def list_nodes(self) -> ParseResult:
        return ParseResult(
            nodes=tuple(
                NodeSnapshot(
                    hostname=name,
                    source=InventorySource.KUBERNETES,
                    gpus=(),
                    state=NodeState.UP,
                    labels={"site": self.site},
                )
                for name in self.hostnames
            )
        )

    def get_gpu_quota(self, namespace: str):
        raise NotFound("no namespace", operation="get_gpu_quota")

    def close(self) -> None:
        pass


@pytest.fixture
def fleet(monkeypatch):
    """Slurm ``train`` (partition gpu) and ``old`` (partitions gpu and big), Kubernetes
    ``k-east`` and ``k-west``; one pool per cluster and partition / site, and an adapter per
    cluster handed out by slug."""
    train = ClusterFactory(slug="train", slurm_cluster_name="train")
    old = ClusterFactory(slug="old", slurm_cluster_name="old", retiring=True)
    east = ClusterFactory(
        slug="k-east", kind=Scheduler.KUBERNETES, credential_kind="kubeconfig", api_url=""
    )
    west = ClusterFactory(
        slug="k-west", kind=Scheduler.KUBERNETES, credential_kind="kubeconfig", api_url=""
    )
    pools = {
        "train-gpu": PoolFactory(slug="train-gpu", slurm_partition="gpu", cluster=train),
        "old-gpu": PoolFactory(slug="old-gpu", slurm_partition="gpu", cluster=old),
        "old-big": PoolFactory(slug="old-big", slurm_partition="big", cluster=old),
        "east": PoolFactory(
            slug="east",
            scheduler=Scheduler.KUBERNETES,
            slurm_partition="",
            k8s_node_selector={"site": "east"},
            cluster=east,
        ),
        "west": PoolFactory(
            slug="west",
            scheduler=Scheduler.KUBERNETES,
            slurm_partition="",
            k8s_node_selector={"site": "west"},
            cluster=west,
        ),
    }
    adapters = {
        "train": FakeScheduler({"gpu": {"a100": 4}}),
        # the same node name as train's (two clusters name nodes alike), and one of its own
        "old": FakeScheduler({"gpu": {"a100": 2}, "big": {"h100": 8}}),
        "k-east": KubeNodes("east-1", "east-2", site="east"),
        "k-west": KubeNodes("west-1", site="west"),
    }
    monkeypatch.setattr(
        "pools.capacity.services.reconcile.cluster_adapter", lambda c: adapters[c.slug]
    )
    monkeypatch.setattr(
        "billing.services.cluster_usage.cluster_adapter_unshared", lambda c: adapters[c.slug]
    )
    return {"train": train, "old": old, "k-east": east, "k-west": west}, pools, adapters


def test_each_cluster_imports_its_nodes_into_its_own_pools(fleet):
    clusters, pools, adapters = fleet

    for slug in ("train", "old", "k-east", "k-west"):
        reconcile_cluster(clusters[slug].pk)

    placed = sorted(Node.objects.values_list("cluster__slug", "hostname", "pool__slug"))
    # host names are unique per cluster: train's and old's fake-gpu-a100 are two nodes
    assert placed == [
        ("k-east", "east-1", "east"),
        ("k-east", "east-2", "east"),
        ("k-west", "west-1", "west"),
        ("old", "fake-big-h100", "old-big"),
        ("old", "fake-gpu-a100", "old-gpu"),
        ("train", "fake-gpu-a100", "train-gpu"),
    ]
    # each cluster was asked through its own adapter, once
    assert [a.calls.count("list_nodes") for a in (adapters["train"], adapters["old"])] == [1, 1]
    rows = {c.slug: c for c in cluster_list()}
    assert all(rows[s].inventory_imported_at is not None for s in clusters)
    assert {s: rows[s].errors_last_hour for s in clusters} == dict.fromkeys(clusters, 0)

    # a second reconcile of old updates old's node, never train's of the same name
    train_node = Node.objects.get(cluster=clusters["train"], hostname="fake-gpu-a100")
    reconcile_cluster(clusters["old"].pk)
    assert Node.objects.filter(hostname="fake-gpu-a100").count() == 2
    assert Node.objects.get(pk=train_node.pk).pool == pools["train-gpu"]


def test_a_cluster_that_is_down_reports_in_its_own_health_and_touches_nothing(fleet):
    clusters, pools, adapters = fleet
    reconcile_cluster(clusters["train"].pk)
    adapters["old"].down = True

    report = reconcile_cluster(clusters["old"].pk)

    assert report.errors and report.errors[0].startswith("nodes: ")
    assert not Node.objects.filter(pool__cluster=clusters["old"]).exists()
    rows = {c.slug: c for c in cluster_list()}
    assert rows["old"].inventory_imported_at is None
    assert rows["old"].errors_last_hour == 1
    assert rows["old"].last_error.startswith("nodes: list_nodes: connection refused")
    assert rows["train"].errors_last_hour == 0
    assert rows["train"].inventory_imported_at is not None


class Accounting:
    """A cluster's accounting: the jobs it reports for any window."""

    def __init__(self, *jobs: JobRecord) -> None:
        self.jobs = jobs

    def jobs_from_accounting(self, start, end, *, accounts=None):
        return self.jobs

    def close(self) -> None:
        pass


def job(job_id: int, account: str, cards: int, start: datetime, minutes: int) -> JobRecord:
    return JobRecord(
        job_id=job_id,
        name="train",
        account=account,
        user="alice",
        partition="gpu",
        state=JobState.COMPLETED,
        state_reason=None,
        gpus_requested={None: cards},
        gpus_allocated={None: cards},
        submit=start,
        start=start,
        end=start + timedelta(minutes=minutes),
        elapsed_s=minutes * 60,
    )


def test_usage_is_imported_per_cluster_with_keys_that_name_it(
    fleet, django_capture_on_commit_callbacks
):
    """Job 7 ran in both Slurm clusters (each numbers its own jobs), in partition ``gpu`` with
    untyped GRES, which each cluster resolves to the GPU model of its own ``gpu`` pool.

    train: 2 cards × 60 min = 2 × 3600 = 7200 card-seconds of A100;
    old:   3 cards × 20 min = 3 × 1200 = 3600 card-seconds of H100.
    """
    clusters, pools, adapters = fleet
    team = TeamFactory(slug="vision")
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    h100 = GpuModel.objects.get(slug="h100_sxm")
    GpuFactory(node=NodeFactory(hostname="t-1", pool=pools["train-gpu"]), gpu_model=a100)
    GpuFactory(node=NodeFactory(hostname="o-1", pool=pools["old-gpu"]), gpu_model=h100)
    start = datetime(2026, 11, 10, 9, 0, tzinfo=UTC)
    adapters["train"] = Accounting(job(7, "vision", 2, start, 60))
    adapters["old"] = Accounting(job(7, "vision", 3, start, 20))
    window = {"start": start - timedelta(hours=1), "end": start + timedelta(hours=3)}

    with django_capture_on_commit_callbacks(execute=False) as queued:
        assert usage_import_clusters_queue(hours=48) == 2  # one task per Slurm cluster
    assert len(queued) == 2
    for slug in ("train", "old"):
        usage_import_cluster(cluster_id=clusters[slug].pk, **window)

    records = {
        r.source_id.split(":")[1]: (r.gpu_model_id, r.quantity, r.team_id)
        for r in UsageRecord.objects.all()
    }
    assert records == {
        "train/7": (a100.pk, Decimal("7200"), team.pk),
        "old/7": (h100.pk, Decimal("3600"), team.pk),
    }
    rows = {c.slug: c for c in cluster_list()}
    assert rows["train"].usage_imported_at is not None
    assert rows["old"].usage_imported_at is not None
    assert rows["k-east"].usage_imported_at is None


def test_an_unreachable_accounting_is_an_error_of_that_cluster(fleet):
    clusters, pools, adapters = fleet
    adapters["old"].down = True
    now = datetime.now(UTC)

    with pytest.raises(SchedulerUnavailable):  # the task retries it
        usage_import_cluster(cluster_id=clusters["old"].pk, start=now - timedelta(hours=1), end=now)

    rows = {c.slug: c for c in cluster_list()}
    assert rows["old"].usage_imported_at is None
    assert rows["old"].errors_last_hour == 1
    assert rows["train"].errors_last_hour == 0
    assert not UsageRecord.objects.exists()


def test_a_drift_is_kept_against_the_cluster_reconcile_found_it_in(fleet):
    """train's account ``vision`` holds a cap of 3 a100 set by hand, and the team's only
    allocation there has ended: reconcile in train finds the cap (expected 0, found 3),
    repairs it, and keeps the drift against train; old has nothing to repair."""
    clusters, pools, adapters = fleet
    team = TeamFactory(slug="vision")
    adapters["train"].ensure_account("vision", description="", organization="")
    adapters["train"].set_gpu_limit(
        GpuLimit(account="vision", gres_type="a100", cards=3, partition=None)
    )
    AllocationFactory(
        team=team,
        pool=pools["train-gpu"],
        gpu_model=GpuModel.objects.get(slug="a100_80g_sxm"),
        status=AllocationStatus.ENDED,
    )

    reconcile_cluster(clusters["train"].pk)
    reconcile_cluster(clusters["old"].pk)

    drift = SchedulerDrift.objects.get()
    assert (drift.cluster.slug, drift.expected, drift.found, drift.repaired) == (
        "train",
        "0",
        "3",
        True,
    )
    rows = {c.slug: c for c in cluster_list()}
    assert rows["train"].drift_count == 0  # repaired: not counted
    assert rows["train"].reconciled_at is not None
    assert rows["old"].reconciled_at is not None
