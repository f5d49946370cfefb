"""Issue 38, item 1: a card in MIG mode is not a whole card, in every count of the capacity
invariant (approval, request panel, dashboard, stranded report, placement).

The two nodes are Kubernetes Node objects of both MIG strategies imported through the real
Kubernetes importer (``tests/mig_nodes.py`` says where their shape comes from):
* ``a100-mixed``: 8 × A100 SXM4 80GB, GPUs 6–7 in MIG mode with 6 + 5 slices: 6 whole A100;
* ``h100nvl-single``: 2 × H100 NVL, every card 7 × 1g.12gb: 0 whole H100 NVL.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from factories import (
    CapacityRequestFactory,
    PoolFactory,
    TeamFactory,
    UserFactory,
    next_week_9am,
)
from mig_nodes import import_nodes, mig_fleet, mixed_a100_node

from pools.capacity.availability import (
    CapacitySnapshot,
    pool_free_cards,
    request_options,
    schedulable_cards,
    schedulable_cards_by_pool_model,
)
from pools.capacity.models import Allocation, CapacityRequest
from pools.capacity.node_kinds import pool_nodes
from pools.capacity.request_fields import RequestFields
from pools.capacity.services.requests import capacity_request_approve, capacity_request_create
from pools.common.choices import RequestStatus, Scheduler, WorkloadKind
from pools.common.errors import InsufficientCapacity, InvalidInput
from pools.dashboards.capacity import DashboardFilters, capacity_rows
from pools.dashboards.stranded import stranded_capacity
from pools.inventory.models import Gpu, GpuModel, MigDevice
from pools.tenancy.models import Membership

pytestmark = pytest.mark.django_db


@pytest.fixture
def mig_pool():
    return mig_fleet()


@pytest.fixture
def a100():
    return GpuModel.objects.get(slug="a100_80g_sxm")


@pytest.fixture
def h100_nvl():
    return GpuModel.objects.get(slug="h100_nvl")


def test_the_inventory_reads_both_strategies_right(mig_pool, a100, h100_nvl):
    """The import side was already right (issue 38 says so): 8 A100 of which 6 and 7 hold 6 + 5
    slices, 2 H100 NVL holding 7 each."""
    a100_cards = Gpu.objects.filter(node__hostname="a100-mixed").order_by("index")
    assert [(g.gpu_model_id, g.mig_mode) for g in a100_cards] == [(a100.pk, False)] * 6 + [
        (a100.pk, True)
    ] * 2
    per_card = [g.mig_devices.count() for g in a100_cards]
    assert per_card == [0, 0, 0, 0, 0, 0, 6, 5]
    nvl = Gpu.objects.filter(node__hostname="h100nvl-single")
    assert [(g.gpu_model_id, g.mig_mode) for g in nvl] == [(h100_nvl.pk, True)] * 2
    assert MigDevice.objects.filter(gpu__node__hostname="h100nvl-single").count() == 14


def test_cards_in_mig_mode_are_not_schedulable_whole_cards(mig_pool, a100, h100_nvl):
    assert schedulable_cards(pool=mig_pool, gpu_model=a100) == 6
    assert schedulable_cards(pool=mig_pool, gpu_model=h100_nvl) == 0
    by_pool_model = schedulable_cards_by_pool_model()
    assert by_pool_model[(mig_pool.pk, a100.pk)] == 6
    assert (mig_pool.pk, h100_nvl.pk) not in by_pool_model
    start = next_week_9am()
    end = start + timedelta(days=7)
    assert pool_free_cards(pool=mig_pool, gpu_model=a100, start=start, end=end) == 6
    assert pool_free_cards(pool=mig_pool, gpu_model=h100_nvl, start=start, end=end) == 0


def test_the_request_panel_offers_six_a100_and_no_whole_h100_nvl(mig_pool, a100, h100_nvl):
    start = next_week_9am()
    options = request_options(
        workload_kind=WorkloadKind.INFERENCE,
        card_count=8,
        start=start,
        end=start + timedelta(days=7),
        pool=mig_pool,
    )
    by_model = {o.gpu_model.slug: o for o in options}
    assert set(by_model) == {"a100_80g_sxm"}  # no whole H100 NVL: the pool offers none
    a100_option = by_model["a100_80g_sxm"]
    assert (a100_option.total, a100_option.usable, a100_option.free) == (6, 6, 6)
    # nothing held: all 6 are free, and still fewer than the 8 asked (was "only 6 of 6")
    assert a100_option.reasons == ["all 6 usable cards free in that window, fewer than the 8 asked"]
    end = start + timedelta(days=7)
    # read now, and from the snapshot the approval queue loads once for many requests
    for snapshot in (None, CapacitySnapshot.load(start=start, end=end)):
        [nvl] = request_options(
            workload_kind=WorkloadKind.INFERENCE,
            card_count=2,
            start=start,
            end=end,
            pool=mig_pool,
            gpu_model=h100_nvl,
            snapshot=snapshot,
        )
        assert (nvl.total, nvl.free) == (0, 0)
        assert nvl.reasons == [
            "Inference's 2 H100 NVL cards are in MIG mode: cut into MIG slices, "
            "none is a whole card"
        ]


@pytest.mark.parametrize(("model", "cards"), [("a100_80g_sxm", 8), ("h100_nvl", 2)])
def test_the_two_over_grants_of_the_issue_are_refused_and_change_nothing(mig_pool, model, cards):
    """8 × A100 (6 whole) and 2 × H100 NVL (0 whole) were both approved before."""
    admin = UserFactory(username="pool-admin", is_staff=True)
    request = CapacityRequestFactory(
        pool=mig_pool, gpu_model=GpuModel.objects.get(slug=model), card_count=cards
    )
    with pytest.raises(InsufficientCapacity) as refused:
        capacity_request_approve(request=request, actor=admin)
    assert refused.value.data["free"] == (6 if model == "a100_80g_sxm" else 0)
    assert refused.value.data["requested"] == cards
    request.refresh_from_db()
    assert request.status == RequestStatus.SUBMITTED
    assert not Allocation.objects.exists()


def test_the_six_whole_a100_are_approved(mig_pool, a100):
    admin = UserFactory(username="pool-admin", is_staff=True)
    request = CapacityRequestFactory(pool=mig_pool, gpu_model=a100, card_count=6)
    allocation = capacity_request_approve(request=request, actor=admin)
    assert allocation.card_count == 6
    then = CapacityRequestFactory(pool=mig_pool, gpu_model=a100, card_count=1)
    with pytest.raises(InsufficientCapacity):
        capacity_request_approve(request=then, actor=admin)
    assert CapacityRequest.objects.get(pk=then.pk).status == RequestStatus.SUBMITTED


def test_placement_sees_gpus_0_to_5_as_one_nvlink_domain(mig_pool, a100, h100_nvl):
    """The shape check's nodes: only GPUs 0-5 of a100-mixed; their NVLink domain comes from the
    catalogue's facts about the 8-card SXM board (the MIG cards are still on it), so a 1 × 6
    one-domain shape fits and a 1 × 8 does not; the single node offers no whole card at all."""
    nodes = pool_nodes(pool=mig_pool, gpu_model=a100, generation=None)
    [kind] = nodes.kinds
    assert kind.hostnames == ("a100-mixed",)
    assert kind.gpus == frozenset(range(6))
    assert kind.domains == (frozenset(range(6)),)
    assert pool_nodes(pool=mig_pool, gpu_model=h100_nvl, generation=None).kinds == ()
    admin = UserFactory(username="pool-admin", is_staff=True)
    start = next_week_9am()
    whole_node = CapacityRequestFactory(
        pool=mig_pool,
        gpu_model=a100,
        card_count=8,
        cards_per_node=8,
        node_count=1,
        one_nvlink_domain=True,
        starts_at=start,
    )
    with pytest.raises(InsufficientCapacity):
        capacity_request_approve(request=whole_node, actor=admin)
    six = CapacityRequestFactory(
        pool=mig_pool,
        gpu_model=a100,
        card_count=6,
        cards_per_node=6,
        node_count=1,
        one_nvlink_domain=True,
        starts_at=start,
    )
    allocation = capacity_request_approve(request=six, actor=admin)
    assert allocation.placement == [{"node": "a100-mixed", "gpus": [0, 1, 2, 3, 4, 5]}]


def test_the_dashboard_counts_mig_cards_as_healthy_but_not_schedulable(mig_pool):
    rows = {
        r.gpu_model_slug: r for r in capacity_rows(filters=DashboardFilters(), now=timezone.now())
    }
    a100_row, nvl_row = rows["a100_80g_sxm"], rows["h100_nvl"]
    assert (a100_row.total, a100_row.healthy, a100_row.schedulable, a100_row.usable) == (
        8,
        8,
        6,
        6,
    )
    assert (nvl_row.total, nvl_row.healthy, nvl_row.schedulable, nvl_row.usable) == (2, 2, 0, 0)


def test_the_stranded_report_counts_the_six_whole_a100_only(mig_pool):
    """Over the 4-week horizon (672 h), nothing held: free = 6 cards × 672 h = 4 032 card-hours.
    The domain of 6 (catalogue facts about the 8-card SXM board) allows at most 1 × 4 of the
    common shapes, so 6 mod 4 = 2 cards are stranded for 1 × 4 (2 × 672 = 1 344), all 6 for
    1 × 8 (6 × 672 = 4 032), none for 1 × 2 and 1 × 1; stranded = the largest shape's, 1 344.
    The single node's H100 NVL has no whole card: no row."""
    now = timezone.now().replace(microsecond=0)
    (row,) = stranded_capacity(filters=DashboardFilters(), now=now)
    assert (row.gpu_model_slug, row.cards) == ("a100_80g_sxm", 6)
    assert row.free_card_hours == Decimal(4032)
    assert row.unknown_topology_card_hours == 0
    assert row.card_hours_for == {1: 0, 2: 0, 4: Decimal(1344), 8: Decimal(4032)}
    assert row.stranded_card_hours == Decimal(1344)


def test_a_card_sliced_under_a_holding_allocation_is_capacity_lost_as_a_node_down_would_be():
    """8 whole A100 imported, 8 approved (active now); then GFD reports GPUs 6-7 in MIG mode.
    The pool has 6 usable cards under 8 held, as if a node with 2 cards went down: the
    dashboard says free 0 and headroom *short* (peak 8 held against 6 usable: 6 < 85 % × 8 =
    6.8), and nothing more is approved."""
    whole = mixed_a100_node()  # before MIG was enabled: no MIG labels, 8 whole cards
    labels = whole["metadata"]["labels"]
    whole["metadata"]["labels"] = {k: v for k, v in labels.items() if "mig" not in k}
    whole["status"]["allocatable"] = {"cpu": "128", "nvidia.com/gpu": "8"}
    pool = PoolFactory(slug="infer", name="Inference", scheduler=Scheduler.KUBERNETES)
    import_nodes(pool, whole)
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    assert schedulable_cards(pool=pool, gpu_model=a100) == 8
    admin = UserFactory(username="pool-admin", is_staff=True)
    now = timezone.now()
    held = CapacityRequestFactory(
        pool=pool,
        gpu_model=a100,
        card_count=8,
        starts_at=now - timedelta(hours=1),
        ends_at=now + timedelta(days=7),
    )
    capacity_request_approve(request=held, actor=admin)

    import_nodes(pool, mixed_a100_node())  # the same node, GPUs 6 and 7 now sliced

    [row] = capacity_rows(filters=DashboardFilters(), now=now)
    assert (row.usable, row.allocated, row.free, row.mig_cards) == (6, 8, 0, 2)
    assert row.headroom.level == "short"
    # inside the held window (the factory's default start, 09:00 a week on, falls after it when
    # the test runs between 00:00 and 09:00 UTC)
    more = CapacityRequestFactory(pool=pool, gpu_model=a100, card_count=1,
                                  starts_at=now + timedelta(hours=1),
                                  ends_at=now + timedelta(days=1))  # fmt: skip
    with pytest.raises(InsufficientCapacity):
        capacity_request_approve(request=more, actor=admin)


def test_a_request_for_whole_h100_nvl_is_refused_at_creation_saying_why(mig_pool, h100_nvl):
    """The form and the API answer with the field error before anything is written."""
    team = TeamFactory(slug="nlp")
    user = UserFactory(username="alice")
    Membership.objects.create(team=team, user=user)
    start = next_week_9am()
    with pytest.raises(InvalidInput) as refused:
        capacity_request_create(
            actor=user,
            fields=RequestFields(
                team=team,
                workload_kind=WorkloadKind.INFERENCE,
                pool=mig_pool,
                gpu_model=h100_nvl,
                card_count=2,
                starts_at=start,
                ends_at=start + timedelta(days=7),
                justification="serve",
            ),
        )
    assert refused.value.data["errors"] == {
        "gpu_model": "Inference's 2 H100 NVL cards are in MIG mode: cut into MIG slices, "
        "none is a whole card."
    }
    assert not CapacityRequest.objects.exists()
