"""QA (tester branch): shaped approvals that the shape-aware invariant gets wrong. Each test
states what a user would expect; they fail on main as of f6caa4e."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from factories import (
    AllocationFactory,
    CapacityRequestFactory,
    PoolFactory,
    UserFactory,
    next_week_9am,
    node_with_gpus,
)

from pools.audit.models import AuditEvent
from pools.capacity.models import Allocation
from pools.capacity.placement import Shape
from pools.capacity.services.allocations import allocation_extend
from pools.capacity.services.requests import capacity_request_approve
from pools.capacity.shapes import shape_fit
from pools.common.choices import AllocationStatus, IdleFindingState, RequestStatus, Scheduler
from pools.common.errors import InsufficientCapacity
from pools.inventory.models import GpuModel
from pools.reclamation.models import IdleFinding
from pools.reclamation.services.scan import allocation_reclaim, reclamation_undo

pytestmark = pytest.mark.django_db

DGX = [list(range(8))]


@pytest.fixture
def admin():
    return UserFactory(username="pool-admin", is_staff=True)


@pytest.fixture
def a100():
    return GpuModel.objects.get(slug="a100_80g_sxm")


def _placed(pool, model, node, gpus, start, end, status=AllocationStatus.APPROVED):
    return AllocationFactory(
        pool=pool,
        gpu_model=model,
        card_count=len(gpus),
        starts_at=start,
        ends_at=end,
        status=status,
        placement=[{"node": node, "gpus": gpus}],
    )


def test_open_request_with_a_shape_is_placed_where_the_shape_fits(admin, a100):
    """A request for "any model with >= 80 GiB" shaped 1 node x 8 cards, one NVLink domain:
    A100 has more free cards (fragmented 2 per node), H800 fewer but one whole node. The
    approval picks the option with most free cards and refuses, though H800 fits."""
    h800 = GpuModel.objects.get(slug="h800_sxm")
    pool = PoolFactory(slug="dgx", scheduler=Scheduler.SLURM)
    start = next_week_9am()
    end = start + timedelta(days=3)
    for i in range(4):
        node_with_gpus(8, hostname=f"a-{i}", pool=pool, nvlink_domains=DGX)
        _placed(pool, a100, f"a-{i}", [0, 1, 2, 3, 4, 5], start, end)  # 2 free per node
    node_with_gpus(8, gpu_model="h800_sxm", hostname="h-0", pool=pool, nvlink_domains=DGX)
    request = CapacityRequestFactory(
        pool=None,
        gpu_model=None,
        min_memory_gib=80,
        card_count=8,
        cards_per_node=8,
        node_count=1,
        one_nvlink_domain=True,
        starts_at=start,
        ends_at=end,
        workload_kind="training",
    )
    allocation = capacity_request_approve(request=request, actor=admin)
    assert (allocation.gpu_model, allocation.placement) == (
        h800,
        [{"node": "h-0", "gpus": list(range(8))}],
    )


def test_an_open_request_whose_shape_fits_nowhere_is_refused_with_the_shape(admin, a100):
    """As above, but 6 of the H800 node's 8 cards are held: H800 (2 free) has too few cards,
    A100 (8 free, 2 per node) has the cards but not the shape. The refusal is the shape's, for
    the option with most free cards (A100): largest 4 nodes x 2 (8 cards), on one node 1 x 2."""
    h800 = GpuModel.objects.get(slug="h800_sxm")
    pool = PoolFactory(slug="dgx", scheduler=Scheduler.SLURM)
    start = next_week_9am()
    end = start + timedelta(days=3)
    for i in range(4):
        node_with_gpus(8, hostname=f"a-{i}", pool=pool, nvlink_domains=DGX)
        _placed(pool, a100, f"a-{i}", [0, 1, 2, 3, 4, 5], start, end)
    node_with_gpus(8, gpu_model="h800_sxm", hostname="h-0", pool=pool, nvlink_domains=DGX)
    _placed(pool, h800, "h-0", [0, 1, 2, 3, 4, 5], start, end)
    request = CapacityRequestFactory(
        pool=None,
        gpu_model=None,
        min_memory_gib=80,
        card_count=8,
        cards_per_node=8,
        node_count=1,
        one_nvlink_domain=True,
        starts_at=start,
        ends_at=end,
        workload_kind="training",
    )
    with pytest.raises(InsufficientCapacity) as refused:
        capacity_request_approve(request=request, actor=admin)
    data = refused.value.data
    assert (data["pool"], data["gpu_model"], data["free"], data["requested"]) == (
        "dgx",
        "a100_80g_sxm",
        8,
        8,
    )
    assert (data["largest_shape"]["cards_per_node"], data["largest_shape"]["node_count"]) == (2, 4)
    assert "1 node × 8 cards, one NVLink domain does not fit" in str(refused.value)
    request.refresh_from_db()
    assert request.status == RequestStatus.SUBMITTED
    assert not Allocation.objects.filter(request=request).exists()


def test_an_extension_of_a_shaped_allocation_keeps_its_shape(admin, a100):
    """Extending a 1 node x 8 allocation asks for "any 8 cards": the extension is granted
    without a placement (no reservation of the node), so the next week's 1 x 8 of another
    team may take the node the running job is on."""
    pool = PoolFactory(slug="dgx", scheduler=Scheduler.SLURM)
    node_with_gpus(8, hostname="dgx-1", pool=pool, nvlink_domains=DGX)
    start = next_week_9am()
    first = _placed(pool, a100, "dgx-1", list(range(8)), start, start + timedelta(days=2))
    first.request.cards_per_node, first.request.node_count = 8, 1
    first.request.one_nvlink_domain = True
    first.request.save()
    extension = allocation_extend(
        allocation=first,
        actor=admin,
        ends_at=start + timedelta(days=4),
        justification="longer run",
    )
    assert (extension.cards_per_node, extension.node_count, extension.one_nvlink_domain) == (
        8,
        1,
        True,
    )
    extended = capacity_request_approve(request=extension, actor=admin)
    assert extended.placement == [{"node": "dgx-1", "gpus": list(range(8))}]
    assert list(extended.placed_cards.values_list("hostname", "gpu_mask")) == [("dgx-1", 0xFF)]
    # the running job's node is held for the extra days: another team's 1 x 8 does not fit
    other = CapacityRequestFactory(
        pool=pool,
        gpu_model=a100,
        card_count=8,
        cards_per_node=8,
        node_count=1,
        one_nvlink_domain=True,
        starts_at=start + timedelta(days=2),
        ends_at=start + timedelta(days=4),
        workload_kind="training",
    )
    with pytest.raises(InsufficientCapacity):
        capacity_request_approve(request=other, actor=admin)


def test_an_extension_is_refused_when_its_cards_are_taken_for_the_extra_window(admin, a100):
    """The job of a 1 x 8 on dgx-1 needs dgx-1 after its end too; another team holds GPUs
    6-7 of dgx-1 from then on, dgx-2 is wholly free. The extension is refused (saying which
    cards are taken), not placed on dgx-2, and nothing is written."""
    pool = PoolFactory(slug="dgx", scheduler=Scheduler.SLURM)
    node_with_gpus(8, hostname="dgx-1", pool=pool, nvlink_domains=DGX)
    node_with_gpus(8, hostname="dgx-2", pool=pool, nvlink_domains=DGX)
    start = next_week_9am()
    first = _placed(pool, a100, "dgx-1", list(range(8)), start, start + timedelta(days=2))
    first.request.cards_per_node, first.request.node_count = 8, 1
    first.request.one_nvlink_domain = True
    first.request.save()
    _placed(pool, a100, "dgx-1", [6, 7], start + timedelta(days=3), start + timedelta(days=5))
    extension = allocation_extend(
        allocation=first,
        actor=admin,
        ends_at=start + timedelta(days=4),
        justification="longer run",
    )
    with pytest.raises(InsufficientCapacity) as refused:
        capacity_request_approve(request=extension, actor=admin)
    assert refused.value.data["taken"] == [{"node": "dgx-1", "gpus": [6, 7]}]
    assert "dgx-1 GPU 6, 7" in str(refused.value)
    extension.refresh_from_db()
    assert extension.status == RequestStatus.SUBMITTED
    assert not Allocation.objects.filter(request=extension).exists()


def test_an_extension_of_an_unshaped_allocation_stays_unshaped(admin, a100):
    """Unchanged: "any 8 cards" extended is "any 8 cards", granted without a placement."""
    pool = PoolFactory(slug="dgx", scheduler=Scheduler.SLURM)
    node_with_gpus(8, hostname="dgx-1", pool=pool, nvlink_domains=DGX)
    start = next_week_9am()
    first = AllocationFactory(
        pool=pool,
        gpu_model=a100,
        card_count=8,
        starts_at=start,
        ends_at=start + timedelta(days=2),
    )
    extension = allocation_extend(
        allocation=first,
        actor=admin,
        ends_at=start + timedelta(days=4),
        justification="longer run",
    )
    assert (extension.cards_per_node, extension.node_count) == (None, None)
    extended = capacity_request_approve(request=extension, actor=admin)
    assert (extended.card_count, extended.placement) == (8, [])


def _finding(allocation):
    now = timezone.now()
    return IdleFinding.objects.create(
        allocation=allocation,
        first_seen_at=now,
        last_seen_at=now,
        dry_run=False,
        card_count=allocation.card_count,
        cards_in_use=0,
    )


def test_undoing_a_reclamation_does_not_place_two_allocations_on_the_same_cards(admin, a100):
    """A placed 1 x 8 is reclaimed (ended); another team's 1 x 8 is approved on the same node;
    the undo checks the card count only (pool-wide), so the first allocation comes back
    holding the node the second one now holds."""
    pool = PoolFactory(slug="dgx", scheduler=Scheduler.SLURM)
    node_with_gpus(8, hostname="dgx-1", pool=pool, nvlink_domains=DGX)
    node_with_gpus(8, hostname="dgx-2", pool=pool, nvlink_domains=DGX)
    now = timezone.now()
    end = now + timedelta(days=5)
    running = _placed(
        pool, a100, "dgx-1", list(range(8)), now - timedelta(hours=2), end, AllocationStatus.ACTIVE
    )
    finding = allocation_reclaim(
        _finding(running), running, keep=0, why="idle", now=now, actor=admin
    )
    assert finding is not None and finding.state == IdleFindingState.RECLAIMED
    second = CapacityRequestFactory(
        pool=pool,
        gpu_model=a100,
        card_count=8,
        cards_per_node=8,
        node_count=1,
        one_nvlink_domain=True,
        starts_at=now + timedelta(minutes=5),
        ends_at=end,
        workload_kind="training",
    )
    taken = capacity_request_approve(request=second, actor=admin)
    assert taken.placement == [{"node": "dgx-1", "gpus": list(range(8))}]  # best fit, by name
    with pytest.raises(InsufficientCapacity) as refused:
        reclamation_undo(finding=finding, actor=admin)
    assert refused.value.data["taken"] == [{"node": "dgx-1", "gpus": list(range(8))}]
    assert (refused.value.data["free"], refused.value.data["requested"]) == (8, 8)
    assert "dgx-1 GPU 0, 1, 2, 3, 4, 5, 6, 7" in str(refused.value)
    running.refresh_from_db()
    finding.refresh_from_db()
    assert (running.status, finding.state) == (
        AllocationStatus.RECLAIMED,
        IdleFindingState.RECLAIMED,
    )


def test_undoing_a_reclamation_gives_the_placed_cards_back_when_they_are_free(admin, a100):
    """The same, with the other team's 1 x 8 on dgx-2 instead: dgx-1 is free again, the undo
    restores the allocation on it."""
    pool = PoolFactory(slug="dgx", scheduler=Scheduler.SLURM)
    node_with_gpus(8, hostname="dgx-1", pool=pool, nvlink_domains=DGX)
    node_with_gpus(8, hostname="dgx-2", pool=pool, nvlink_domains=DGX)
    now = timezone.now()
    end = now + timedelta(days=5)
    running = _placed(
        pool, a100, "dgx-1", list(range(8)), now - timedelta(hours=2), end, AllocationStatus.ACTIVE
    )
    finding = allocation_reclaim(
        _finding(running), running, keep=0, why="idle", now=now, actor=admin
    )
    _placed(pool, a100, "dgx-2", list(range(8)), now + timedelta(minutes=5), end)
    reclamation_undo(finding=finding, actor=admin)
    running.refresh_from_db()
    assert (running.status, running.card_count, running.ends_at, running.placement) == (
        AllocationStatus.ACTIVE,
        8,
        end,
        [{"node": "dgx-1", "gpus": list(range(8))}],
    )


def test_cards_reclaimed_from_a_shaped_allocation_are_free_for_shapes(admin, a100):
    """A placed 1 x 8 shrunk by reclamation to 2 cards: the card count frees 6 cards, but the
    placement (and its PlacedCards) still hold all 8, so no shape can use the 6."""
    pool = PoolFactory(slug="dgx", scheduler=Scheduler.SLURM)
    node_with_gpus(8, hostname="dgx-1", pool=pool, nvlink_domains=DGX)
    now = timezone.now()
    end = now + timedelta(days=5)
    running = _placed(
        pool, a100, "dgx-1", list(range(8)), now - timedelta(hours=2), end, AllocationStatus.ACTIVE
    )
    allocation_reclaim(_finding(running), running, keep=2, why="idle", now=now, actor=admin)
    running.refresh_from_db()
    assert running.card_count == 2
    fit = shape_fit(
        pool=pool,
        gpu_model=a100,
        shape=Shape(cards_per_node=4, nodes=1, one_nvlink_domain=True),
        start=now + timedelta(minutes=5),
        end=end,
    )
    assert fit.fits, fit.message()
    # the first 2 cards in placement order are kept, in the JSON and the PlacedCards rows
    assert running.placement == [{"node": "dgx-1", "gpus": [0, 1]}]
    assert list(running.placed_cards.values_list("hostname", "gpu_mask")) == [("dgx-1", 0b11)]
    assert set(fit.placements[0].gpus) <= {2, 3, 4, 5, 6, 7}  # on the cards given back
    shrunk = AuditEvent.objects.get(action="allocation.shrunk", object_id=str(running.pk))
    assert (shrunk.before["placement"], shrunk.after["placement"]) == (
        [{"node": "dgx-1", "gpus": list(range(8))}],
        [{"node": "dgx-1", "gpus": [0, 1]}],
    )


def test_a_shrunk_shaped_allocation_keeps_whole_groups_and_an_undo_gives_all_back(admin, a100):
    """A 2 nodes x 4 cards placed as dgx-1 GPUs 4-7 then dgx-2 GPUs 0-3, shrunk to 6 cards,
    keeps the first group whole and the first 2 cards of the second (placement order); the
    undo restores both groups and their PlacedCards rows."""
    pool = PoolFactory(slug="dgx", scheduler=Scheduler.SLURM)
    node_with_gpus(8, hostname="dgx-1", pool=pool, nvlink_domains=DGX)
    node_with_gpus(8, hostname="dgx-2", pool=pool, nvlink_domains=DGX)
    now = timezone.now()
    end = now + timedelta(days=5)
    whole = [{"node": "dgx-1", "gpus": [4, 5, 6, 7]}, {"node": "dgx-2", "gpus": [0, 1, 2, 3]}]
    running = AllocationFactory(
        pool=pool,
        gpu_model=a100,
        card_count=8,
        starts_at=now - timedelta(hours=2),
        ends_at=end,
        status=AllocationStatus.ACTIVE,
        placement=whole,
    )
    finding = allocation_reclaim(
        _finding(running), running, keep=6, why="idle", now=now, actor=admin
    )
    running.refresh_from_db()
    assert (running.card_count, running.placement) == (
        6,
        [{"node": "dgx-1", "gpus": [4, 5, 6, 7]}, {"node": "dgx-2", "gpus": [0, 1]}],
    )
    assert sorted(running.placed_cards.values_list("hostname", "gpu_mask")) == [
        ("dgx-1", 0xF0),
        ("dgx-2", 0b11),
    ]
    reclamation_undo(finding=finding, actor=admin)
    running.refresh_from_db()
    assert (running.card_count, running.placement) == (8, whole)
    assert sorted(running.placed_cards.values_list("hostname", "gpu_mask")) == [
        ("dgx-1", 0xF0),
        ("dgx-2", 0x0F),
    ]


def test_groups_sharing_a_node_that_fill_it_are_reserved_as_the_whole_node(admin, a100):
    """2 groups x 4 cards, groups may share a node, on one free 8-card node: the placement is
    two entries for the same node (GPUs 0-3, 4-7) which together take all of it, but the
    reservation check keeps one entry per node (a dict) and calls it "part of" the node."""
    from pools.capacity.services.scheduler_binding import slurm_reservation_apply

    pool = PoolFactory(slug="dgx", scheduler=Scheduler.SLURM)
    node_with_gpus(8, hostname="dgx-1", pool=pool, nvlink_domains=DGX)
    start = next_week_9am()
    request = CapacityRequestFactory(
        pool=pool,
        gpu_model=a100,
        card_count=8,
        cards_per_node=4,
        node_count=2,
        one_nvlink_domain=True,
        shared_nodes=True,
        starts_at=start,
        ends_at=start + timedelta(days=1),
        workload_kind="training",
    )
    allocation = capacity_request_approve(request=request, actor=admin)
    assert sorted(g for spot in allocation.placement for g in spot["gpus"]) == list(range(8))

    made = []

    class Adapter:
        def create_reservation(self, spec):
            made.append(spec)

    binding = slurm_reservation_apply(adapter=Adapter(), allocation=allocation)
    assert binding.get("reservation") == f"portal-alloc-{allocation.pk}", binding


def test_imported_nvlink_domains_count_at_approval(admin, a100):
    """A node whose imported topology splits its 8 A100 SXM into two NVSwitch-less halves of 4
    ([[0-3], [4-7]]): 1 node x 8 cards, one NVLink domain, must not fit. On PostgreSQL the
    kinds statement hands ``nvlink_domains`` over as JSON text, node_domains reads the string
    as malformed and falls back to the catalogue (SXM on an 8-card board: one domain of 8), so
    the shape is approved on a node whose cards are not joined. (SQLite reads a list: right.)"""
    pool = PoolFactory(slug="split", scheduler=Scheduler.SLURM)
    node_with_gpus(8, hostname="split-1", pool=pool, nvlink_domains=[[0, 1, 2, 3], [4, 5, 6, 7]])
    start = next_week_9am()
    fit = shape_fit(
        pool=pool,
        gpu_model=a100,
        shape=Shape(cards_per_node=8, nodes=1, one_nvlink_domain=True),
        start=start,
        end=start + timedelta(days=1),
    )
    assert not fit.fits, fit.message()
    assert fit.largest == Shape(cards_per_node=4, nodes=1, one_nvlink_domain=True)


def test_one_card_in_error_does_not_make_an_hgx_board_unknown(admin, a100):
    """An 8-card A100 SXM node without an imported topology is one NVSwitch domain by the
    catalogue (HGX board). With GPU 7 in error the catalogue is asked about the 7 schedulable
    cards, 7 is not an HGX board size, so the node's domains become unknown and not even
    1 node x 4 cards, one NVLink domain, fits on its 7 joined cards."""
    from pools.inventory.models import Gpu

    pool = PoolFactory(slug="hgx", scheduler=Scheduler.SLURM)
    node_with_gpus(8, hostname="hgx-1", pool=pool)
    Gpu.objects.filter(node__hostname="hgx-1", index=7).update(health="error")
    start = next_week_9am()
    fit = shape_fit(
        pool=pool,
        gpu_model=a100,
        shape=Shape(cards_per_node=4, nodes=1, one_nvlink_domain=True),
        start=start,
        end=start + timedelta(days=1),
    )
    assert fit.fits, fit.message()


def test_the_largest_shape_offered_never_has_more_cards_than_asked():
    """README: "Largest = most cards per node first, then most nodes, never more cards than
    asked". Four NVSwitch nodes with 7 free cards each refuse 1 node x 8 and offer
    "2 nodes x 7 cards each" (14 cards for an 8-card request)."""
    from pools.capacity.placement import NodeFree, fit_shape

    nodes = [NodeFree(f"n{i}", frozenset(range(7)), (frozenset(range(8)),)) for i in range(4)]
    result = fit_shape(nodes, Shape(cards_per_node=8, nodes=1, one_nvlink_domain=True))
    assert not result.fits
    assert result.largest.total_cards <= 8, result.message()


def test_an_extension_of_a_shrunk_shaped_allocation_keeps_the_cards_it_kept(admin, a100):
    """2 nodes x 4 cards shrunk by reclamation to 4 cards keeps dgx-1 GPUs 4-7 (its first
    group); its extension asks 1 node x 4 cards and is placed on those 4 cards."""
    pool = PoolFactory(slug="dgx", scheduler=Scheduler.SLURM)
    node_with_gpus(8, hostname="dgx-1", pool=pool, nvlink_domains=DGX)
    node_with_gpus(8, hostname="dgx-2", pool=pool, nvlink_domains=DGX)
    now = timezone.now()
    end = now + timedelta(days=2)
    running = AllocationFactory(
        pool=pool,
        gpu_model=a100,
        card_count=8,
        starts_at=now - timedelta(hours=2),
        ends_at=end,
        status=AllocationStatus.ACTIVE,
        placement=[
            {"node": "dgx-1", "gpus": [4, 5, 6, 7]},
            {"node": "dgx-2", "gpus": [0, 1, 2, 3]},
        ],
    )
    running.request.cards_per_node, running.request.node_count = 4, 2
    running.request.one_nvlink_domain = True
    running.request.save()
    allocation_reclaim(_finding(running), running, keep=4, why="idle", now=now, actor=admin)
    running.refresh_from_db()
    extension = allocation_extend(
        allocation=running, actor=admin, ends_at=end + timedelta(days=1), justification="more"
    )
    assert (extension.card_count, extension.cards_per_node, extension.node_count) == (4, 4, 1)
    extended = capacity_request_approve(request=extension, actor=admin)
    assert extended.placement == [{"node": "dgx-1", "gpus": [4, 5, 6, 7]}]
