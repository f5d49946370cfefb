"""An elastic allocation in a Kueue pool, applied through the real Kubernetes adapter over HTTP
to the fake API server (which checks every object against the Kueue schemas): the team's
ClusterQueue is written once per change and never rewritten by the quota sync; the pool's
lender holds its free cards; repeated applies, later decisions inside [floor, ceiling] and a
reconcile write nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from factories import AllocationFactory, PoolFactory, TeamFactory, node_with_gpus
from kubernetes_support import portal_on_fake_apiserver

from pools.capacity.services.reconcile import reconcile_kubernetes
from pools.capacity.services.scheduler_binding import k8s_product_label
from pools.common.choices import AllocationStatus, QuotaBackend, Scheduler
from pools.elastic.models import ScaleEvent
from pools.elastic.services import elastic_apply, elastic_policy_create, elastic_scan
from pools.inventory.models import GpuModel
from scheduler_adapters.kubernetes_manifests import flavor_name
from scheduler_adapters.prometheus import InferenceSignals, Sample
from scheduler_adapters.prometheus_fake import FakePrometheus

pytestmark = pytest.mark.django_db

NOW = timezone.now().replace(second=0, microsecond=0)


@pytest.fixture(params=[False, True], ids=["kueue-off", "kueue-on"])
def apiserver(request):
    """The adapter with Kueue off (the pool's cohort turns it on for the team) and on (every
    team's quota through Kueue: where the quota sync used to write the ClusterQueue without
    the cohort and the elastic writer then wrote it back, twice per apply)."""
    with portal_on_fake_apiserver(KUEUE=request.param) as server:
        yield server


@pytest.fixture
def policy(pool_admin):
    pool = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="",
                       quota_backend=QuotaBackend.KUEUE, quota_cohort="inference")  # fmt: skip
    for host in range(2):  # 8 L40S
        node_with_gpus(4, gpu_model="l40s", hostname=f"inf-{host}", pool=pool,
                       scheduler=Scheduler.KUBERNETES)  # fmt: skip
    allocation = AllocationFactory(pool=pool, team=TeamFactory(slug="chat"), card_count=2,
                                   status=AllocationStatus.ACTIVE,
                                   starts_at=NOW - timedelta(hours=1),
                                   ends_at=NOW + timedelta(days=7))  # fmt: skip
    return elastic_policy_create(allocation=allocation, actor=pool_admin, ceiling_cards=6,
                                 step_cards=2)  # fmt: skip


def _busy(end):
    stamps = [end.timestamp() - 60 * m for m in range(40, -1, -1)]
    return FakePrometheus(inference=[InferenceSignals(
        "team-chat", util_pct=tuple(Sample(t, 90.0) for t in stamps),
        cards_reporting=tuple(Sample(t, 8.0) for t in stamps),
        latency_s=tuple(Sample(t, 1.2) for t in stamps))])  # fmt: skip


def _writes(server, since=0, plural=None):
    return [r for r in server.writes()[since:] if plural is None or f"/{plural}" in r.path]


def test_kueue_pool_writes_each_object_once(apiserver, policy, django_capture_on_commit_callbacks):
    flavor = flavor_name(k8s_product_label(GpuModel.objects.get(slug="l40s")))
    with django_capture_on_commit_callbacks(execute=True):
        report = elastic_scan(now=NOW, metrics=_busy(NOW))
    assert report.ups == 1  # 2 -> 4, applied on commit
    queue = apiserver.get("kueue.x-k8s.io", "clusterqueues", None, "team-chat")
    assert queue["spec"]["cohortName"] == "inference"
    assert queue["spec"]["resourceGroups"][0]["flavors"] == [
        {
            "name": flavor,
            "resources": [
                {
                    "name": "nvidia.com/gpu",
                    "nominalQuota": "2",
                    "borrowingLimit": "4",
                    "lendingLimit": "0",
                }  # fmt: skip
            ],
        }
    ]
    # the team's ClusterQueue: created once (by apply), not created by the quota sync and then
    # patched by the elastic writer (the two used to render it differently and undo each other)
    team_queue = _writes(apiserver, plural="clusterqueues/team-chat")
    assert [(r.method, r.status) for r in team_queue] == [("PATCH", 201)]
    # the lender: the pool's 8 cards less the floor of 2 are free to borrow
    lender = apiserver.get("kueue.x-k8s.io", "clusterqueues", None, "inference-free")
    assert lender["spec"]["cohortName"] == "inference"
    assert "namespaceSelector" not in lender["spec"]
    resources = lender["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert resources == [{"name": "nvidia.com/gpu", "nominalQuota": "6"}]
    # the namespace quota is the ceiling: it never blocks what Kueue admits
    quota = apiserver.get("", "resourcequotas", "team-chat", "gpu-quota")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "6"
    event = ScaleEvent.objects.get(policy=policy, action="up")
    assert event.applied is True
    assert event.apply_note == (
        "ClusterQueue team-chat in cohort inference: nominalQuota 2, borrowingLimit 4; "
        "Kueue admits within them"
    )

    before = len(apiserver.writes())
    elastic_apply(policy_id=policy.pk, now=NOW)  # the same decision again
    reconcile_kubernetes()  # the quota sync and the lender agree with what is there
    assert _writes(apiserver, before) == []
    later = NOW + timedelta(minutes=16)  # after the cooldown: 4 -> 6, inside the ceiling
    with django_capture_on_commit_callbacks(execute=True):
        assert elastic_scan(now=later, metrics=_busy(later)).ups == 1
    assert _writes(apiserver, before) == []  # Kueue borrows; the bounds did not move


def test_the_lender_follows_the_pools_free_cards(apiserver, policy):
    """Applying a guaranteed allocation of 3 cards in the pool (the provisioning path) and
    later unbinding it moves the lender: 8 - 2 (the elastic floor) = 6 free, then 3, then 6."""
    from pools.capacity.services.allocations import allocation_unbind
    from pools.capacity.services.scheduler_binding import binding_apply

    def lent():
        lender = apiserver.get("kueue.x-k8s.io", "clusterqueues", None, "inference-free")
        return lender["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]

    elastic_apply(policy_id=policy.pk, now=NOW)
    assert lent() == "6"
    other = AllocationFactory(pool=policy.allocation.pool, team=TeamFactory(slug="search"),
                              card_count=3, status=AllocationStatus.ACTIVE,
                              gpu_model=policy.allocation.gpu_model,
                              starts_at=NOW - timedelta(minutes=5),
                              ends_at=NOW + timedelta(days=2))  # fmt: skip
    binding = binding_apply(other)
    assert binding["kueue_lender"]["free"] == {k8s_product_label(other.gpu_model): 3}
    assert lent() == "3"
    other.status = AllocationStatus.ENDED
    other.save()
    allocation_unbind(allocation_id=other.pk)
    assert lent() == "6"
