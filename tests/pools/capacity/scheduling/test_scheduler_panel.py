"""The allocation's *In the scheduler* panel (issue #37): what the portal wrote, or will write,
in Slurm or Kubernetes, with the last read-back and drift; on the page and in the API.

Expected names are worked out here from the naming rules' documented formats: the Slurm account
is the team's slug, the cap ``gres/gpu:<GRES type>=<the team's cards of the type>``, the
reservation ``portal-alloc-<allocation id>``; the namespace ``team-<slug>`` (the adapter's
default prefix), its ResourceQuota ``gpu-quota`` on ``requests.nvidia.com/gpu``, the Kueue
ClusterQueue named as the namespace and its LocalQueue ``default`` pointing at it.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from factories import AllocationFactory, GpuFactory, NodeFactory, PoolFactory, TeamFactory

from pools.capacity.models import SchedulerDrift
from pools.capacity.scheduler_panel import scheduler_panel
from pools.capacity.services.reconcile import reconcile_slurm
from pools.capacity.services.requests import capacity_request_approve
from pools.clusters import adapters
from pools.clusters.models import Cluster
from pools.common.choices import AllocationStatus, QuotaBackend, Scheduler, TeamRole
from pools.inventory.models import GpuModel
from pools.tenancy.models import Membership
from scheduler_adapters.records import GpuLimit

pytestmark = pytest.mark.django_db


def rows(panel) -> dict[str, tuple[str, str]]:
    return {o.kind: (o.name, o.detail) for o in panel.objects}


def test_slurm_before_its_window_is_a_preview_of_what_will_be_written(
    fake_slurm, setup, submitted, django_capture_on_commit_callbacks
):
    """Approved for a window 2 days ahead: nothing in Slurm yet (the fake has no account), the
    panel previews account ``vision``, bob's association on partition ``gpu`` and the cap
    ``gres/gpu:a100=2`` (no other vision allocation: 0 + its own 2 cards)."""
    pool, a100, team, bob, admin = setup
    start = timezone.now() + timedelta(days=2)
    with django_capture_on_commit_callbacks(execute=True):
        allocation = capacity_request_approve(
            request=submitted(pool, a100, team, bob, 2, start), actor=admin
        )
    allocation.refresh_from_db()
    assert allocation.status == AllocationStatus.APPROVED
    assert "vision" not in fake_slurm.accounts

    panel = scheduler_panel(allocation)

    assert panel.state == "will write"
    got = rows(panel)
    assert got["Slurm account"][0] == "vision"
    assert got["Association"] == ("vision × 1 user(s) on gpu", "bob")
    assert got["GrpTRES"][0] == "gres/gpu:a100=2"
    assert got["QOS"][0] == "none"
    assert panel.read_back_at is None and panel.drift is None


def test_slurm_written_then_read_back_then_drift_on_page_and_api(
    fake_slurm, setup, submitted, django_capture_on_commit_callbacks, client, api_as
):
    """Active now with 3 cards: the binding says ``gres/gpu:a100=3``. Reconcile reads 3 back
    (stamped, no drift); someone sets the cap to 1 by hand: reconcile records the drift
    (expected 3, found 1), repairs it, and the panel shows both."""
    pool, a100, team, bob, admin = setup
    with django_capture_on_commit_callbacks(execute=True):
        allocation = capacity_request_approve(
            request=submitted(pool, a100, team, bob, 3, timezone.now()), actor=admin
        )
    allocation.refresh_from_db()
    assert allocation.status == AllocationStatus.ACTIVE

    reconcile_slurm()
    allocation.refresh_from_db()
    panel = scheduler_panel(allocation)
    assert panel.state == "written"
    assert rows(panel)["GrpTRES"][0] == "gres/gpu:a100=3"
    assert panel.read_back == "gres/gpu:a100=3" and panel.read_back_at is not None
    assert panel.drift is None

    fake_slurm.set_gpu_limit(GpuLimit("vision", "gpu", "a100", 1))
    reconcile_slurm()
    allocation.refresh_from_db()
    panel = scheduler_panel(allocation)
    assert panel.read_back == "gres/gpu:a100=1"
    assert (panel.drift.expected, panel.drift.found, panel.drift.repaired) == ("3", "1", True)
    assert SchedulerDrift.objects.count() == 1

    client.force_login(bob)
    page = client.get(f"/requests/{allocation.request_id}/").content.decode()
    assert "In the scheduler" in page
    assert '<code class="ident">gres/<wbr>gpu:<wbr>a100=<wbr>3</code>' in page
    assert '<code class="ident">vision</code>' in page
    assert "expected 3, found 1" in page

    body = api_as(bob).get(f"/api/v1/allocations/{allocation.pk}/").json()
    assert body["scheduler"]["state"] == "written"
    names = {o["kind"]: o["name"] for o in body["scheduler"]["objects"]}
    assert names["GrpTRES"] == "gres/gpu:a100=3" and names["Slurm account"] == "vision"
    assert body["scheduler"]["drift"]["found"] == "1"


def test_a_placed_slurm_allocation_names_its_reservation(fake_slurm, setup):
    """A placement on whole nodes is reserved as ``portal-alloc-<id>``; the preview says so."""
    pool, a100, team, bob, admin = setup
    node = pool.nodes.get()
    allocation = AllocationFactory(
        team=team,
        pool=pool,
        gpu_model=a100,
        card_count=4,
        status=AllocationStatus.APPROVED,
        starts_at=timezone.now() + timedelta(days=1),
        ends_at=timezone.now() + timedelta(days=2),
        placement=[{"node": node.hostname, "gpus": [0, 1, 2, 3]}],
    )
    got = rows(scheduler_panel(allocation))
    assert got["Reservation"] == (f"portal-alloc-{allocation.pk}", node.hostname)


@pytest.fixture
def k8s_world(django_user_model):
    l40s = GpuModel.objects.get(slug="l40s")
    pool = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    node = NodeFactory(pool=pool, scheduler=Scheduler.KUBERNETES)
    for index in range(4):
        GpuFactory(node=node, index=index, gpu_model=l40s, raw_model_name="NVIDIA L40S")
    team = TeamFactory(slug="nlp")
    alice = django_user_model.objects.create_user("alice", password="x")
    Membership.objects.create(team=team, user=alice, role=TeamRole.MANAGER)
    admin = django_user_model.objects.create_user("admin", password="x", is_staff=True)
    return pool, l40s, team, alice, admin


def test_kubernetes_written_namespace_and_quota(
    k8s_world, submitted, django_capture_on_commit_callbacks, client
):
    """3 L40S active in a Kubernetes pool with the fake adapter (no Kueue): namespace
    ``team-nlp``, ResourceQuota ``team-nlp/gpu-quota`` with ``requests.nvidia.com/gpu: 3``."""
    pool, l40s, team, alice, admin = k8s_world
    adapters.reset()
    with override_settings(SCHEDULERS={"kubernetes": {"BACKEND": "kubernetes-fake"}}):
        fake = adapters.scheduler_adapter("kubernetes")
        request = submitted(pool, l40s, team, alice, 3, timezone.now(), days=10)
        request.workload_kind = "inference"
        request.save()
        with django_capture_on_commit_callbacks(execute=True):
            allocation = capacity_request_approve(request=request, actor=admin)
        allocation.refresh_from_db()
        assert fake.get_gpu_quota("nlp").cards == 3
        panel = scheduler_panel(allocation)
        client.force_login(alice)
        page = client.get(f"/requests/{allocation.request_id}/").content.decode()
    adapters.reset()

    assert panel.state == "written"
    got = rows(panel)
    assert got["Namespace"][0] == "team-nlp"
    assert got["ResourceQuota"] == ("team-nlp/gpu-quota", "requests.nvidia.com/gpu: 3")
    assert "ClusterQueue" not in got
    assert '<code class="ident">team-<wbr>nlp/<wbr>gpu-<wbr>quota</code>' in page


def test_kubernetes_kueue_pool_preview_names_the_queues(k8s_world):
    """No connection (the demo), a Kueue pool, 2 cards approved for tomorrow: will write the
    namespace, the ResourceQuota at 2, ClusterQueue ``team-nlp`` with the L40S flavour's
    nominal quota 2 and LocalQueue ``team-nlp/default`` pointing at it."""
    pool, l40s, team, alice, admin = k8s_world
    pool.quota_backend, pool.quota_cohort = QuotaBackend.KUEUE, "infer"
    pool.save()
    allocation = AllocationFactory(
        team=team,
        pool=pool,
        gpu_model=l40s,
        card_count=2,
        status=AllocationStatus.APPROVED,
        starts_at=timezone.now() + timedelta(days=1),
        ends_at=timezone.now() + timedelta(days=2),
    )
    panel = scheduler_panel(allocation)

    assert panel.state == "will write"
    got = rows(panel)
    assert got["ResourceQuota"] == ("team-nlp/gpu-quota", "requests.nvidia.com/gpu: 2")
    assert got["ClusterQueue"] == ("team-nlp", "nvidia-l40s nvidia.com/gpu: 2")
    assert got["LocalQueue"] == ("team-nlp/default", "→ ClusterQueue team-nlp")


def test_a_pool_whose_cluster_credentials_cannot_be_read_still_shows_its_preview(k8s_world):
    """Issue 35: the panel asks the pool's cluster's adapter for its namespace prefix; with
    that cluster's token file missing it shows the defaults (``team-nlp``, 2 cards) instead of
    failing the page."""
    pool, l40s, team, alice, admin = k8s_world
    pool.cluster = Cluster.objects.create(
        slug="far",
        name="Far",
        kind=Scheduler.KUBERNETES,
        api_url="https://far:6443",
        credential_kind="token-file",
        credential_path="/nonexistent/token",
    )
    pool.save()
    allocation = AllocationFactory(
        team=team,
        pool=pool,
        gpu_model=l40s,
        card_count=2,
        status=AllocationStatus.APPROVED,
        starts_at=timezone.now() + timedelta(days=1),
        ends_at=timezone.now() + timedelta(days=2),
    )

    panel = scheduler_panel(allocation)

    assert panel.state == "will write"
    got = rows(panel)
    assert got["Namespace"][0] == "team-nlp"
    assert got["ResourceQuota"] == ("team-nlp/gpu-quota", "requests.nvidia.com/gpu: 2")


def test_another_teams_member_gets_404_not_the_panel(k8s_world, api_as, django_user_model):
    pool, l40s, team, alice, admin = k8s_world
    allocation = AllocationFactory(team=team, pool=pool, gpu_model=l40s)
    outsider = django_user_model.objects.create_user("victor", password="x")
    Membership.objects.create(team=TeamFactory(slug="vision"), user=outsider)

    assert api_as(outsider).get(f"/api/v1/allocations/{allocation.pk}/").status_code == 404
    assert "scheduler" in api_as(alice).get(f"/api/v1/allocations/{allocation.pk}/").json()
