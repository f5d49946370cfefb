"""Burst-pool cards leave the home ceiling (issue 35): with Kueue, Volcano or Koordinator the
home cluster's objects hold the team's elastic ceiling, and cards the loop placed in a burst
pool of another cluster are that cluster's — so they come off the home ClusterQueue's borrowing,
the Volcano Queue's capability and deserved, the ElasticQuota's max and the namespace quota.
Two HTTP-fake API servers (each checks every object against its kind's schema); numbers by
hand in each test."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from factories import AllocationFactory, GpuFactory, NodeFactory, PoolFactory, TeamFactory
from kubernetes_support import kubernetes_cluster

from pools.capacity.scheduler_panel import scheduler_panel
from pools.clusters.models import Cluster
from pools.common.choices import AllocationStatus, QuotaBackend, Scheduler
from pools.elastic.models import ElasticPolicy
from pools.elastic.services import elastic_apply
from pools.inventory.models import GpuModel

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_adapters")]

NOW = timezone.now().replace(second=0, microsecond=0)
GPU = "nvidia.com/gpu"


def l40s_pool(slug: str, cluster: Cluster, cards: int, **fields):
    l40s = GpuModel.objects.get(slug="l40s")
    pool = PoolFactory(slug=slug, scheduler=Scheduler.KUBERNETES, slurm_partition="",
                       cluster=cluster, **fields)  # fmt: skip
    node = NodeFactory(pool=pool, scheduler=Scheduler.KUBERNETES, hostname=f"{slug}-node")
    for index in range(cards):
        GpuFactory(node=node, index=index, gpu_model=l40s, raw_model_name="NVIDIA L40S")
    return pool


def burst_placed(apiservers, tmp_path, backend: str) -> ElasticPolicy:
    """Team nlp: floor 2, ceiling 6, 6 cards held of which 2 placed in the burst pool
    ``rented-infer`` of the second cluster; the home pool (8 L40S) uses ``backend``."""
    home = l40s_pool("infer", kubernetes_cluster(apiservers[0], tmp_path, "home-site"), 8,
                     quota_backend=backend, quota_cohort="inference")  # fmt: skip
    rented = l40s_pool("rented-infer", kubernetes_cluster(apiservers[1], tmp_path, "rented"), 4,
                       burst=True)  # fmt: skip
    floor = AllocationFactory(team=TeamFactory(slug="nlp"), card_count=2, pool=home,
                              gpu_model=GpuModel.objects.get(slug="l40s"),
                              status=AllocationStatus.ACTIVE, starts_at=NOW - timedelta(hours=1),
                              ends_at=NOW + timedelta(days=1))  # fmt: skip
    return ElasticPolicy.objects.create(allocation=floor, ceiling_cards=6, cards_held=6,
                                        burst_pool=rented, burst_cards=2)  # fmt: skip


def namespace_quota(server) -> str:
    return server.get("", "resourcequotas", "team-nlp", "gpu-quota")["spec"]["hard"][
        f"requests.{GPU}"
    ]


def test_kueue_home_queue_borrows_the_ceiling_less_the_burst_pool_cards(apiservers, tmp_path):
    """Ceiling 6 - 2 placed in the burst pool = 4 at home: nominalQuota 2 (the floor),
    borrowingLimit 4 - 2 = 2 (was 6 - 2 = 4), namespace quota 4 (was 6); the burst cluster's
    namespace quota is the 2 placed there."""
    policy = burst_placed(apiservers, tmp_path, QuotaBackend.KUEUE)
    binding = elastic_apply(policy_id=policy.pk, now=NOW)
    home, rented = apiservers
    queue = home.get("kueue.x-k8s.io", "clusterqueues", None, "team-nlp")
    resources = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert resources == [
        {"name": GPU, "nominalQuota": "2", "borrowingLimit": "2", "lendingLimit": "0"}
    ]
    assert namespace_quota(home) == "4"
    assert namespace_quota(rented) == "2"
    assert binding["burst_pool"]["total"] == 2


def test_volcano_home_queue_caps_at_the_ceiling_less_the_burst_pool_cards(apiservers, tmp_path):
    """Volcano Queue: guarantee 2 (floor), deserved 6 held - 2 placed = 4, capability 6 - 2 = 4
    (was 6 and 6); namespace quota 4; burst cluster 2."""
    policy = burst_placed(apiservers, tmp_path, QuotaBackend.VOLCANO)
    elastic_apply(policy_id=policy.pk, now=NOW)
    home, rented = apiservers
    spec = home.get("scheduling.volcano.sh", "queues", None, "team-nlp")["spec"]
    assert (spec["guarantee"], spec["deserved"], spec["capability"]) == (
        {"resource": {GPU: "2"}},
        {GPU: "4"},
        {GPU: "4"},
    )
    assert namespace_quota(home) == "4"
    assert namespace_quota(rented) == "2"


def test_koordinator_home_quota_max_is_the_ceiling_less_the_burst_pool_cards(apiservers, tmp_path):
    """ElasticQuota min 2 (floor), max 6 - 2 = 4 (was 6); namespace quota 4; burst cluster 2.
    The allocation's scheduler panel (the objects the portal would write) says the same."""
    policy = burst_placed(apiservers, tmp_path, QuotaBackend.KOORDINATOR)
    elastic_apply(policy_id=policy.pk, now=NOW)
    home, rented = apiservers
    quota = home.get("scheduling.sigs.k8s.io", "elasticquotas", "team-nlp", "team-nlp")
    assert (quota["spec"]["min"], quota["spec"]["max"]) == ({GPU: "2"}, {GPU: "4"})
    assert namespace_quota(home) == "4"
    assert namespace_quota(rented) == "2"
    shown = {o.kind: o.detail for o in scheduler_panel(policy.allocation).objects}
    assert shown["ElasticQuota"] == f"max: {{'{GPU}': '4'}}, min: {{'{GPU}': '2'}}"


def test_no_burst_pool_cards_the_home_ceiling_is_whole(apiservers, tmp_path):
    """The same policy with nothing placed in the burst pool: the whole ceiling of 6 at home
    (Koordinator max 6, namespace quota 6), nothing in the burst cluster's namespace."""
    policy = burst_placed(apiservers, tmp_path, QuotaBackend.KOORDINATOR)
    ElasticPolicy.objects.filter(pk=policy.pk).update(burst_cards=0, burst_pool=None)
    elastic_apply(policy_id=policy.pk, now=NOW)
    home, rented = apiservers
    quota = home.get("scheduling.sigs.k8s.io", "elasticquotas", "team-nlp", "team-nlp")
    assert quota["spec"]["max"] == {GPU: "6"}
    assert namespace_quota(home) == "6"
    assert rented.get("", "resourcequotas", "team-nlp", "gpu-quota") is None
