"""Kubernetes quota per cluster (issue 35): a team's namespace quota in a cluster counts its
allocations in that cluster's pools only, written through that cluster's adapter."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from factories import (
    AllocationFactory,
    CapacityRequestFactory,
    GpuFactory,
    NodeFactory,
    PoolFactory,
    TeamFactory,
)
from kubernetes_support import kubernetes_cluster

from pools.capacity.models import CapacityRequest, SchedulerDrift
from pools.capacity.services.reconcile import reconcile_all, reconcile_cluster
from pools.capacity.services.requests import capacity_request_approve
from pools.capacity.services.scheduler_binding import team_cards_applied
from pools.clusters.models import Cluster
from pools.common.choices import AllocationStatus, Scheduler, TeamRole
from pools.inventory.models import GpuModel
from pools.tenancy.models import Membership

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_adapters")]


def l40s_pool(slug: str, cluster: Cluster | None, gpu_model: GpuModel):
    """A Kubernetes pool of ``cluster`` with one node of 4 ``gpu_model`` cards."""
    pool = PoolFactory(
        slug=slug, scheduler=Scheduler.KUBERNETES, slurm_partition="", cluster=cluster
    )
    node = NodeFactory(pool=pool, scheduler=Scheduler.KUBERNETES, hostname=f"{slug}-node")
    for index in range(4):
        GpuFactory(node=node, index=index, gpu_model=gpu_model, raw_model_name="NVIDIA L40S")
    return pool


def ask(pool, gpu_model, team, user, cards) -> CapacityRequest:
    start = timezone.now()
    return CapacityRequestFactory(
        team=team, requested_by=user, workload_kind="inference", pool=pool, gpu_model=gpu_model,
        card_count=cards, starts_at=start, ends_at=start + timedelta(days=10), justification="x",
    )  # fmt: skip


def gpu_quota(server, team_slug: str) -> dict:
    return server.get("", "resourcequotas", f"team-{team_slug}", "gpu-quota")["spec"]["hard"]


def test_each_cluster_gets_the_teams_cards_in_its_own_pools(
    apiservers, tmp_path, django_user_model, django_capture_on_commit_callbacks
):
    """Team nlp: 2 L40S approved in pool A (cluster 1), 3 in pool B (cluster 2). By hand: the
    namespace team-nlp in cluster 1 holds 2 cards of the team's (A's), in cluster 2 the 3 of
    B's; before issue 35's fix cluster 2's quota said 2 + 3 = 5."""
    l40s = GpuModel.objects.get(slug="l40s")
    one = kubernetes_cluster(apiservers[0], tmp_path, "site-one")
    two = kubernetes_cluster(apiservers[1], tmp_path, "site-two")
    pool_a, pool_b = l40s_pool("infer-a", one, l40s), l40s_pool("infer-b", two, l40s)
    team = TeamFactory(slug="nlp")
    alice = django_user_model.objects.create_user("alice", password="x")
    Membership.objects.create(team=team, user=alice, role=TeamRole.MANAGER)
    admin = django_user_model.objects.create_user("admin", password="x", is_staff=True)

    with django_capture_on_commit_callbacks(execute=True):
        capacity_request_approve(request=ask(pool_a, l40s, team, alice, 2), actor=admin)
    with django_capture_on_commit_callbacks(execute=True):
        capacity_request_approve(request=ask(pool_b, l40s, team, alice, 3), actor=admin)

    assert gpu_quota(apiservers[0], "nlp") == {"requests.nvidia.com/gpu": "2"}
    assert gpu_quota(apiservers[1], "nlp") == {"requests.nvidia.com/gpu": "3"}


def test_no_cluster_and_the_environment_cluster_are_one_cluster():
    """A pool without a cluster and a pool in the environment's Kubernetes cluster are the same
    cluster (the one the variables define): 1 + 2 = 3 cards there; a third pool in another
    cluster (4 cards) counts there only."""
    l40s = GpuModel.objects.get(slug="l40s")
    env = Cluster.objects.create(
        slug="env-kubernetes", name="Env", kind=Scheduler.KUBERNETES, credential_kind="environment"
    )
    other = Cluster.objects.create(
        slug="other",
        name="Other",
        kind=Scheduler.KUBERNETES,
        api_url="https://other:6443",
        credential_kind="token-file",
        credential_path="/nonexistent",
    )
    team = TeamFactory(slug="nlp")
    now = timezone.now()
    for slug, cluster, cards in (("plain", None, 1), ("in-env", env, 2), ("far", other, 4)):
        AllocationFactory(
            team=team,
            pool=l40s_pool(slug, cluster, l40s),
            gpu_model=l40s,
            card_count=cards,
            status=AllocationStatus.ACTIVE,
            starts_at=now - timedelta(hours=1),
            ends_at=now + timedelta(days=1),
        )

    def applied(cluster):
        return team_cards_applied(
            team=team, gpu_model=l40s, scheduler=Scheduler.KUBERNETES, cluster=cluster
        )

    assert (applied(None), applied(env), applied(other)) == (3, 3, 4)


def test_reconcile_repairs_each_cluster_through_its_own_adapter(
    apiservers, tmp_path, django_user_model, django_capture_on_commit_callbacks
):
    """The same 2 + 3 cards; someone sets cluster 2's quota to 7 by hand. Reconcile queues one
    task per cluster (2); they find one drift, in cluster 2 (expected 3, found 7), repair it to
    3 there, and leave cluster 1's 2 alone; a second run finds nothing."""
    l40s = GpuModel.objects.get(slug="l40s")
    one = kubernetes_cluster(apiservers[0], tmp_path, "site-one")
    two = kubernetes_cluster(apiservers[1], tmp_path, "site-two")
    pool_a, pool_b = l40s_pool("infer-a", one, l40s), l40s_pool("infer-b", two, l40s)
    team = TeamFactory(slug="nlp")
    alice = django_user_model.objects.create_user("alice", password="x")
    Membership.objects.create(team=team, user=alice, role=TeamRole.MANAGER)
    admin = django_user_model.objects.create_user("admin", password="x", is_staff=True)
    with django_capture_on_commit_callbacks(execute=True):
        capacity_request_approve(request=ask(pool_a, l40s, team, alice, 2), actor=admin)
    with django_capture_on_commit_callbacks(execute=True):
        capacity_request_approve(request=ask(pool_b, l40s, team, alice, 3), actor=admin)
    apiservers[1].edit(
        "",
        "resourcequotas",
        "team-nlp",
        "gpu-quota",
        lambda rq: rq["spec"]["hard"].update({"requests.nvidia.com/gpu": "7"}),
    )

    with django_capture_on_commit_callbacks(execute=True):
        report = reconcile_all()

    assert (report.clusters_queued, report.drifts, report.errors) == (2, [], [])
    (drift,) = SchedulerDrift.objects.all()
    assert drift.subject == "namespace team-nlp in site-two ResourceQuota requests.nvidia.com/gpu"
    assert (drift.expected, drift.found, drift.repaired) == ("3", "7", True)
    assert gpu_quota(apiservers[0], "nlp") == {"requests.nvidia.com/gpu": "2"}
    assert gpu_quota(apiservers[1], "nlp") == {"requests.nvidia.com/gpu": "3"}
    assert [reconcile_cluster(c.pk).drifts for c in (one, two)] == [[], []]


def test_the_drift_page_says_the_clusters_it_queued(client, django_user_model):
    """Reconcile now, with one cluster kept as data (its credentials unreadable) and no
    environment scheduler: nothing checked here, and the page says 1 cluster is reconciled by
    its own task."""
    Cluster.objects.create(
        slug="far",
        name="Far",
        kind=Scheduler.KUBERNETES,
        api_url="https://far:6443",
        credential_kind="token-file",
        credential_path="/nonexistent",
    )
    admin = django_user_model.objects.create_user("admin", password="x", is_staff=True)
    client.force_login(admin)

    response = client.post("/scheduler/drift/", follow=True)

    shown = [str(message) for message in response.context["messages"]]
    assert response.status_code == 200
    assert (
        "1 more cluster(s) are reconciled by their own tasks: their differences appear here "
        "when they are done." in shown
    )
