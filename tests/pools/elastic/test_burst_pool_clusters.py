"""Burst pools on two HTTP-fake Kubernetes clusters (issue 35): the home pool is full, the
elastic loop places the rest in the burst pool of the other cluster the team opted into, each
cluster's namespace quota holds its own cards, and the burst cards go back first."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from factories import AllocationFactory, GpuFactory, NodeFactory, PoolFactory, TeamFactory
from kubernetes_support import kubernetes_cluster

from pools.clusters.models import Cluster
from pools.common.choices import AllocationStatus, Scheduler
from pools.elastic.models import BurstOptIn, ElasticPolicy, ScaleEvent
from pools.elastic.services import elastic_scan
from pools.inventory.models import GpuModel
from scheduler_adapters.prometheus import InferenceSignals, Sample
from scheduler_adapters.prometheus_fake import FakePrometheus

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_adapters")]

NOW = timezone.now().replace(second=0, microsecond=0)


def l40s_pool(slug: str, cluster: Cluster, l40s: GpuModel, *, burst: bool = False):
    """A Kubernetes pool of ``cluster`` with one node of 4 L40S."""
    pool = PoolFactory(slug=slug, scheduler=Scheduler.KUBERNETES, slurm_partition="",
                       cluster=cluster, burst=burst)  # fmt: skip
    node = NodeFactory(pool=pool, scheduler=Scheduler.KUBERNETES, hostname=f"{slug}-node")
    for index in range(4):
        GpuFactory(node=node, index=index, gpu_model=l40s, raw_model_name="NVIDIA L40S")
    return pool


def signals(util: float, latency_s: float, end) -> FakePrometheus:
    stamps = [end.timestamp() - 60 * m for m in range(40, -1, -1)]
    found = InferenceSignals(
        "team-nlp",
        util_pct=tuple(Sample(t, util) for t in stamps),
        cards_reporting=tuple(Sample(t, 8.0) for t in stamps),
        latency_s=tuple(Sample(t, latency_s) for t in stamps),
    )
    return FakePrometheus(inference=[found])


def gpu_quota(server, team_slug: str) -> dict:
    return server.get("", "resourcequotas", f"team-{team_slug}", "gpu-quota")["spec"]["hard"]


def test_home_full_bursts_into_the_other_cluster_and_hands_burst_cards_back_first(
    apiservers, tmp_path, django_capture_on_commit_callbacks
):
    """Home pool (cluster one): 4 L40S; team other holds 1, team nlp's elastic floor 2 ->
    4 - 1 - 2 = 1 card left to lend. nlp asks for +4 (step 4, ceiling 8): 1 from home, 3 from
    the burst pool (cluster two, opted in): 6 held, 3 in the burst pool. Quotas: cluster one
    team-nlp 2 + 1 = 3, cluster two team-nlp 3.
    40 minutes later load is low: down by 4 to 2 -> the 3 burst cards go first, then 1 home
    card: cluster one 2, cluster two 0."""
    l40s = GpuModel.objects.get(slug="l40s")
    one = kubernetes_cluster(apiservers[0], tmp_path, "home-site")
    two = kubernetes_cluster(apiservers[1], tmp_path, "rented")
    home = l40s_pool("infer", one, l40s)
    rented = l40s_pool("rented-infer", two, l40s, burst=True)
    nlp = TeamFactory(slug="nlp")
    window = {"status": AllocationStatus.ACTIVE, "starts_at": NOW - timedelta(hours=1),
              "ends_at": NOW + timedelta(days=1), "pool": home, "gpu_model": l40s}  # fmt: skip
    AllocationFactory(team=TeamFactory(slug="other"), card_count=1, **window)
    floor = AllocationFactory(team=nlp, card_count=2, **window)
    policy = ElasticPolicy.objects.create(allocation=floor, ceiling_cards=8, cards_held=2,
                                          step_cards=4)  # fmt: skip
    BurstOptIn.objects.create(team=nlp, pool=rented)

    with django_capture_on_commit_callbacks(execute=True):
        report = elastic_scan(now=NOW, metrics=signals(90.0, 1.2, NOW))
    assert report.ups == 1
    policy.refresh_from_db()
    assert (policy.cards_held, policy.burst_cards, policy.burst_pool) == (6, 3, rented)
    up = ScaleEvent.objects.get(policy=policy)
    assert (up.cards_from, up.cards_to, up.burst_cards_to, up.burst_pool) == (2, 6, 3, rented)
    assert "3 in burst pool" in up.message
    assert gpu_quota(apiservers[0], "nlp") == {"requests.nvidia.com/gpu": "3"}
    assert gpu_quota(apiservers[1], "nlp") == {"requests.nvidia.com/gpu": "3"}
    assert up.applied and "burst pool" in up.apply_note

    later = NOW + timedelta(minutes=40)
    with django_capture_on_commit_callbacks(execute=True):
        report = elastic_scan(now=later, metrics=signals(10.0, 0.1, later))
    assert report.downs == 1
    policy.refresh_from_db()
    assert (policy.cards_held, policy.burst_cards) == (2, 0)
    down = ScaleEvent.objects.filter(policy=policy).first()
    assert (down.cards_from, down.cards_to, down.burst_cards_to) == (6, 2, 0)
    assert gpu_quota(apiservers[0], "nlp") == {"requests.nvidia.com/gpu": "2"}
    assert gpu_quota(apiservers[1], "nlp").get("requests.nvidia.com/gpu", "0") == "0"


def test_no_opt_in_no_burst(apiservers, tmp_path):
    """The same full home pool without the team's opt-in: 1 card from home, then held there
    (3 held, none in the burst pool)."""
    l40s = GpuModel.objects.get(slug="l40s")
    home = l40s_pool("infer", kubernetes_cluster(apiservers[0], tmp_path, "home-site"), l40s)
    l40s_pool("rented-infer", kubernetes_cluster(apiservers[1], tmp_path, "rented"), l40s,
              burst=True)  # fmt: skip
    window = {"status": AllocationStatus.ACTIVE, "starts_at": NOW - timedelta(hours=1),
              "ends_at": NOW + timedelta(days=1), "pool": home, "gpu_model": l40s}  # fmt: skip
    AllocationFactory(team=TeamFactory(slug="other"), card_count=1, **window)
    floor = AllocationFactory(team=TeamFactory(slug="nlp"), card_count=2, **window)
    policy = ElasticPolicy.objects.create(allocation=floor, ceiling_cards=8, cards_held=2,
                                          step_cards=4)  # fmt: skip
    elastic_scan(now=NOW, metrics=signals(90.0, 1.2, NOW))
    policy.refresh_from_db()
    assert (policy.cards_held, policy.burst_cards) == (3, 0)


def test_opt_in_is_for_managers_and_burst_pools_only(member, pool_admin):
    from pools.audit.models import AuditEvent
    from pools.common.errors import InvalidInput, PermissionDenied
    from pools.elastic.services import burst_opt_in_set

    team = TeamFactory(slug="nlp")
    rented = PoolFactory(slug="rented", scheduler=Scheduler.KUBERNETES, slurm_partition="",
                         burst=True)  # fmt: skip
    home = PoolFactory(slug="home", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    with pytest.raises(PermissionDenied):
        burst_opt_in_set(team=team, pool=rented, actor=member, opted=True)
    with pytest.raises(InvalidInput):
        burst_opt_in_set(team=team, pool=home, actor=pool_admin, opted=True)
    assert not BurstOptIn.objects.exists()
    assert burst_opt_in_set(team=team, pool=rented, actor=pool_admin, opted=True) is True
    assert burst_opt_in_set(team=team, pool=rented, actor=pool_admin, opted=True) is False
    assert burst_opt_in_set(team=team, pool=rented, actor=pool_admin, opted=False) is True
    assert list(
        AuditEvent.objects.filter(action__startswith="elastic.burst_opt")
        .values_list("action", flat=True)
        .order_by("id")
    ) == ["elastic.burst_opt_in", "elastic.burst_opt_out"]


def test_pool_admins_mark_kubernetes_pools_burst_and_nothing_else(admin_api):
    """``burst`` on /api/v1/pools/: a Kubernetes pool may be one; a Slurm pool is refused with
    a field error and nothing is written."""
    from pools.inventory.models import Pool

    made = admin_api.post("/api/v1/pools/", {"slug": "rented", "name": "Rented",
                                             "scheduler": "kubernetes", "burst": True},
                          format="json")  # fmt: skip
    assert made.status_code == 201, made.content
    assert made.json()["burst"] is True
    refused = admin_api.post("/api/v1/pools/", {"slug": "hpc", "name": "HPC",
                                                "scheduler": "slurm", "slurm_partition": "hpc",
                                                "burst": True}, format="json")  # fmt: skip
    assert refused.status_code == 400
    assert list(refused.json()["errors"]) == ["burst"]
    assert list(Pool.objects.values_list("slug", flat=True)) == ["rented"]
