"""An ended allocation in a Kueue pool whose namespace quota Kubernetes refuses to lower (the
HTTP fake of kube-apiserver): the pool's lender ClusterQueue gets its cards back anyway, the
refusal is an unrepaired drift with the API server's words, and the unbind still fails.

The refusal is RBAC's 403 for a service account without ``patch`` on ``resourcequotas`` in the
team's namespace; its message is the authorizer's ``<resource> "<name>" is forbidden: User
"<user>" cannot <verb> resource "<resource>" in API group "" in the namespace "<ns>"``
(https://kubernetes.io/docs/reference/access-authn-authz/rbac/), which the adapter reads as
:class:`SchedulerAuthError` — not transient, so the unbind task does not retry it.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from factories import AllocationFactory, PoolFactory, TeamFactory, node_with_gpus
from kubernetes_support import portal_on_fake_apiserver

from pools.capacity.models import SchedulerDrift
from pools.capacity.scheduler_panel import scheduler_panel
from pools.capacity.services.allocations import allocation_unbind
from pools.capacity.services.scheduler_binding import binding_apply
from pools.common.choices import AllocationStatus, QuotaBackend, Scheduler
from scheduler_adapters.errors import SchedulerAuthError, SchedulerError

pytestmark = pytest.mark.django_db

NOW = timezone.now().replace(second=0, microsecond=0)
FORBIDDEN = (
    'resourcequotas "gpu-quota" is forbidden: User "system:serviceaccount:portal:portal" '
    'cannot patch resource "resourcequotas" in API group "" in the namespace "team-search"'
)


@pytest.fixture
def applied():
    """A Kueue pool (cohort ``inference``) of 8 L40S on two nodes; team ``search`` holds 3 of
    them, applied: its quota is 3 and the lender lends the other 5. Then the allocation ends."""
    with portal_on_fake_apiserver(KUEUE=True) as server:
        pool = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="",
                           quota_backend=QuotaBackend.KUEUE, quota_cohort="inference")  # fmt: skip
        for host in range(2):
            node_with_gpus(4, gpu_model="l40s", hostname=f"inf-{host}", pool=pool,
                           scheduler=Scheduler.KUBERNETES)  # fmt: skip
        allocation = AllocationFactory(pool=pool, team=TeamFactory(slug="search"), card_count=3,
                                       status=AllocationStatus.ACTIVE,
                                       starts_at=NOW - timedelta(hours=1),
                                       ends_at=NOW + timedelta(days=2))  # fmt: skip
        binding_apply(allocation)
        assert (_quota(server), _lent(server)) == ("3", "5")
        allocation.status = AllocationStatus.ENDED
        allocation.save()
        yield server, allocation


def _quota(server) -> str:
    return server.get("", "resourcequotas", "team-search", "gpu-quota")["spec"]["hard"][
        "requests.nvidia.com/gpu"
    ]


def _lent(server) -> str:
    lender = server.get("kueue.x-k8s.io", "clusterqueues", None, "inference-free")
    return lender["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]


def _refuse_quota(server, *, status: int = 403, reason: str = "Forbidden", message=FORBIDDEN):
    server.fail("PATCH", "/namespaces/team-search/resourcequotas/", status=status,
                reason=reason, message=message)  # fmt: skip


def test_a_refused_quota_update_still_gives_the_lender_its_cards(applied):
    server, allocation = applied
    _refuse_quota(server)

    with pytest.raises(SchedulerAuthError):
        allocation_unbind(allocation_id=allocation.pk)

    assert _lent(server) == "8"  # nothing held in the pool any more: all 8 lent
    assert _quota(server) == "3"  # the refusal left it


def test_the_refusal_is_an_unrepaired_drift_with_the_api_servers_message(applied):
    server, allocation = applied
    _refuse_quota(server)

    with pytest.raises(SchedulerAuthError):
        allocation_unbind(allocation_id=allocation.pk)

    drift = SchedulerDrift.objects.get()
    assert (drift.scheduler, drift.team.slug, drift.subject, drift.expected, drift.repaired) == (
        "kubernetes",
        "search",
        "namespace team-search ResourceQuota requests.nvidia.com/gpu",
        "0",  # search holds nothing else
        False,
    )
    assert (
        drift.found
        == f"kept: Kubernetes refused the update after allocation #{allocation.pk} ended"
    )
    assert FORBIDDEN in drift.detail
    allocation.refresh_from_db()
    assert scheduler_panel(allocation).unrepaired == [drift]  # on the allocation's own panel


def test_a_transient_refusal_is_left_to_the_retries_not_recorded(applied):
    server, allocation = applied
    _refuse_quota(
        server, status=503, reason="ServiceUnavailable", message="etcdserver: leader changed"
    )

    with pytest.raises(SchedulerError) as raised:
        allocation_unbind(allocation_id=allocation.pk)

    assert raised.value.transient
    assert SchedulerDrift.objects.count() == 0
    assert _lent(server) == "8"


def test_an_unbind_kubernetes_accepts_lowers_both_and_records_nothing(applied):
    server, allocation = applied

    binding = allocation_unbind(allocation_id=allocation.pk)

    assert binding["total"] == 0
    assert (_quota(server), _lent(server)) == ("0", "8")
    assert SchedulerDrift.objects.count() == 0
