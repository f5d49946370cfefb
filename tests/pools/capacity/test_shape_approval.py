"""The shape-aware invariant at approval (issue #20): a shaped request is approved only where its
shape fits on cards free for the whole window, the cards counted on are recorded on the
allocation, and a refusal names the largest shape that does fit and changes nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from factories import (
    AllocationFactory,
    CapacityRequestFactory,
    PoolFactory,
    TeamFactory,
    UserFactory,
    next_week_9am,
    node_with_gpus,
)

from pools.audit.models import AuditEvent
from pools.capacity.models import Allocation, CapacityRequest
from pools.capacity.placement import Placement, Shape
from pools.capacity.request_fields import RequestFields
from pools.capacity.services.requests import capacity_request_approve, capacity_request_create
from pools.capacity.shapes import pool_free_groups, shape_fit
from pools.common.choices import AllocationStatus, RequestStatus, Scheduler
from pools.common.errors import InsufficientCapacity, InvalidInput
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db


def pool_free_nodes(*, pool, gpu_model, start, end) -> list:
    """Per node, sorted by hostname, ``(name, free cards)`` for the whole window: the groups of
    :func:`pool_free_groups` one node at a time."""
    groups = pool_free_groups(pool=pool, gpu_model=gpu_model, start=start, end=end)
    return sorted((name, g.free) for g in groups for name in g.names)


DGX = [list(range(8))]  # what the DGX A100 capture reads: one NVSwitch domain of eight


@pytest.fixture
def a100():
    return GpuModel.objects.get(slug="a100_80g_sxm")


@pytest.fixture
def dgx_pool(a100):
    """Slurm pool ``dgx`` of four 8-card A100 SXM nodes, their domains imported."""
    pool = PoolFactory(slug="dgx", scheduler=Scheduler.SLURM)
    for i in range(1, 5):
        node_with_gpus(8, hostname=f"dgx-{i}", pool=pool, nvlink_domains=DGX)
    return pool


@pytest.fixture
def admin():
    return UserFactory(username="pool-admin", is_staff=True)


def _hold(pool, a100, node: str, gpus: list[int], start, end):
    """A holding allocation placed on ``gpus`` of ``node``."""
    return AllocationFactory(
        pool=pool,
        gpu_model=a100,
        card_count=len(gpus),
        starts_at=start,
        ends_at=end,
        placement=[{"node": node, "gpus": gpus}],
    )


def _shaped(pool, a100, cards_per_node, node_count, start, end, *, domain=True):
    return CapacityRequestFactory(
        pool=pool,
        gpu_model=a100,
        card_count=cards_per_node * node_count,
        cards_per_node=cards_per_node,
        node_count=node_count,
        one_nvlink_domain=domain,
        starts_at=start,
        ends_at=end,
    )


def test_the_issue_scenario_is_refused_with_the_largest_shape_that_fits(dgx_pool, a100, admin):
    start = next_week_9am()
    end = start + timedelta(days=7)
    for i in range(1, 5):  # 6 of each node's 8 cards held: 8 free, spread 2 per node
        _hold(dgx_pool, a100, f"dgx-{i}", [0, 1, 2, 3, 4, 5], start, end)
    request = _shaped(dgx_pool, a100, 8, 1, start, end)  # TP=8: 1 node x 8 cards
    allocations = Allocation.objects.count()
    events = AuditEvent.objects.count()

    with pytest.raises(InsufficientCapacity) as refused:
        capacity_request_approve(request=request, actor=admin)

    error = refused.value
    assert error.data["free"] == 8  # the card count alone would have said yes
    assert error.data["largest_shape"] == {
        "cards_per_node": 2,
        "node_count": 4,
        "one_nvlink_domain": True,
        "shared_nodes": False,
        "text": "4 nodes × 2 cards each, one NVLink domain",
    }
    assert error.data["largest_single_node"]["text"] == "1 node × 2 cards, one NVLink domain"
    assert error.message == (
        "Insufficient capacity in Dgx: 1 node × 8 cards, one NVLink domain does not fit: no node "
        "has 8 free cards in one NVLink domain for the whole window (most free on one node: 2; "
        "8 free in all). The largest shape that does is 4 nodes × 2 cards each, one NVLink "
        "domain (on one node: 1 node × 2 cards, one NVLink domain)."
    )
    request.refresh_from_db()
    assert request.status == RequestStatus.SUBMITTED
    assert (Allocation.objects.count(), AuditEvent.objects.count()) == (allocations, events)


def test_a_fitting_shape_is_approved_on_the_tightest_node_and_recorded(dgx_pool, a100, admin):
    start = next_week_9am()
    end = start + timedelta(days=7)
    _hold(dgx_pool, a100, "dgx-1", [0, 1, 2, 3], start, end)  # dgx-1 has 4 free
    _hold(dgx_pool, a100, "dgx-2", [0, 1, 2, 3, 4, 5], start, end)  # dgx-2 has 2 free
    four = capacity_request_approve(request=_shaped(dgx_pool, a100, 4, 1, start, end), actor=admin)
    assert four.placement == [{"node": "dgx-1", "gpus": [4, 5, 6, 7]}]  # best fit, not dgx-3
    eight = capacity_request_approve(request=_shaped(dgx_pool, a100, 8, 1, start, end), actor=admin)
    assert eight.placement == [{"node": "dgx-3", "gpus": list(range(8))}]
    event = AuditEvent.objects.get(action="allocation.approved", object_id=str(eight.pk))
    assert event.after["placement"] == [{"node": "dgx-3", "gpus": list(range(8))}]
    # the next 1 x 8 finds dgx-4 only, then nothing whole is left
    capacity_request_approve(request=_shaped(dgx_pool, a100, 8, 1, start, end), actor=admin)
    with pytest.raises(InsufficientCapacity):
        capacity_request_approve(request=_shaped(dgx_pool, a100, 8, 1, start, end), actor=admin)


def test_half_open_windows_and_unplaced_allocations(dgx_pool, a100, admin):
    start = next_week_9am()
    end = start + timedelta(days=7)
    for i in range(1, 5):
        _hold(dgx_pool, a100, f"dgx-{i}", list(range(8)), start - timedelta(days=7), start)
    # ended when ours starts: does not compete (half-open)
    nodes = pool_free_nodes(pool=dgx_pool, gpu_model=a100, start=start, end=end)
    assert [len(free) for _, free in nodes] == [8, 8, 8, 8]
    # a grant without a shape (placed nowhere) is laid on the tightest nodes by best fit
    AllocationFactory(pool=dgx_pool, gpu_model=a100, card_count=12, starts_at=start, ends_at=end)
    nodes = pool_free_nodes(pool=dgx_pool, gpu_model=a100, start=start, end=end)
    assert sorted(len(free) for _, free in nodes) == [0, 4, 8, 8]
    two = capacity_request_approve(request=_shaped(dgx_pool, a100, 8, 2, start, end), actor=admin)
    whole = list(range(8))
    assert two.placement == [{"node": "dgx-3", "gpus": whole}, {"node": "dgx-4", "gpus": whole}]


def test_unknown_domains_refuse_one_domain_shapes_but_not_plain_ones(a100, admin):
    pool = PoolFactory(slug="blind", scheduler=Scheduler.SLURM)
    node_with_gpus(2, hostname="odd-1", pool=pool)  # 2 SXM cards: not an HGX board, unknown
    start = next_week_9am()
    end = start + timedelta(days=7)
    with pytest.raises(InsufficientCapacity) as refused:
        capacity_request_approve(request=_shaped(pool, a100, 2, 1, start, end), actor=admin)
    assert "unknown NVLink domains" in refused.value.message
    plain = capacity_request_approve(
        request=_shaped(pool, a100, 2, 1, start, end, domain=False), actor=admin
    )
    assert plain.placement == [{"node": "odd-1", "gpus": [0, 1]}]


def test_catalogue_fallback_makes_an_hgx_board_one_domain(a100, admin):
    pool = PoolFactory(slug="hgx", scheduler=Scheduler.SLURM)
    node_with_gpus(8, hostname="hgx-1", pool=pool)  # nothing imported: SXM x 8 -> one domain
    start = next_week_9am()
    allocation = capacity_request_approve(
        request=_shaped(pool, a100, 8, 1, start, start + timedelta(days=1)), actor=admin
    )
    assert allocation.status == AllocationStatus.APPROVED
    assert allocation.placement == [{"node": "hgx-1", "gpus": list(range(8))}]


def test_shaped_requests_are_granted_whole_and_validated_on_create(dgx_pool, a100, admin):
    start = next_week_9am()
    request = _shaped(dgx_pool, a100, 4, 2, start, start + timedelta(days=1))
    with pytest.raises(InvalidInput) as fewer:
        capacity_request_approve(request=request, actor=admin, card_count=4)
    assert "granted whole (8 cards)" in fewer.value.data["errors"]["card_count"]

    team = TeamFactory(slug="nlp")
    alice = UserFactory(username="alice-shape")
    team.memberships.create(user=alice, role="member")
    fields = dict(
        team=team,
        workload_kind="training",
        pool=dgx_pool,
        gpu_model=a100,
        starts_at=start,
        ends_at=start + timedelta(days=1),
        justification="TP=8 pretraining",
    )
    with pytest.raises(InvalidInput) as mismatch:
        capacity_request_create(
            actor=alice,
            fields=RequestFields(card_count=8, cards_per_node=4, node_count=3, **fields),
        )
    assert mismatch.value.data["errors"] == {"card_count": "3 × 4 is 12 cards, not 8."}
    with pytest.raises(InvalidInput) as half:
        capacity_request_create(
            actor=alice, fields=RequestFields(card_count=8, cards_per_node=8, **fields)
        )
    assert half.value.data["errors"] == {"node_count": "Give a whole number from 1 to 1024."}
    assert not CapacityRequest.objects.filter(team=team).exists()
    made = capacity_request_create(
        actor=alice,
        fields=RequestFields(
            card_count=8, cards_per_node=8, node_count=1, one_nvlink_domain=True, **fields
        ),
        submit=False,
    )
    assert (made.cards_per_node, made.node_count, made.one_nvlink_domain) == (8, 1, True)


def test_the_api_takes_a_shape_and_answers_409_with_the_largest_one(
    dgx_pool, a100, admin_api, api_as
):
    start = next_week_9am()
    end = start + timedelta(days=7)
    for i in range(1, 5):
        _hold(dgx_pool, a100, f"dgx-{i}", [0, 1, 2, 3, 4, 5], start, end)
    team = TeamFactory(slug="nlp-api")
    bob = UserFactory(username="bob-api")
    team.memberships.create(user=bob, role="member")
    created = api_as(bob).post(
        "/api/v1/requests/",
        {
            "team": "nlp-api",
            "workload_kind": "training",
            "pool": "dgx",
            "gpu_model": "a100_80g_sxm",
            "card_count": 8,
            "cards_per_node": 8,
            "node_count": 1,
            "one_nvlink_domain": True,
            "starts_at": start.isoformat(),
            "ends_at": end.isoformat(),
            "justification": "TP=8",
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    body = created.json()
    assert (body["cards_per_node"], body["node_count"], body["one_nvlink_domain"]) == (8, 1, True)
    refused = admin_api.post(f"/api/v1/requests/{body['id']}/approve/", {}, format="json")
    assert refused.status_code == 409
    answer = refused.json()
    assert answer["code"] == "insufficient_capacity"
    assert answer["data"]["largest_shape"]["text"] == "4 nodes × 2 cards each, one NVLink domain"
    assert "The largest shape that does is 4 nodes × 2 cards each" in answer["detail"]
    mismatch = api_as(bob).post(
        "/api/v1/requests/",
        {
            "team": "nlp-api",
            "workload_kind": "training",
            "pool": "dgx",
            "gpu_model": "a100_80g_sxm",
            "card_count": 8,
            "cards_per_node": 3,
            "node_count": 2,
            "starts_at": start.isoformat(),
            "ends_at": end.isoformat(),
            "justification": "odd",
        },
        format="json",
    )
    assert mismatch.status_code == 400
    assert mismatch.json()["code"] == "invalid_input"
    assert mismatch.json()["errors"]["card_count"] == ["2 × 3 is 6 cards, not 8."]


def test_the_live_panel_says_whether_the_shape_fits_and_the_largest_that_does(dgx_pool, a100):
    from django.test import Client

    start = next_week_9am()
    end = start + timedelta(days=7)
    for i in range(1, 5):
        _hold(dgx_pool, a100, f"dgx-{i}", [0, 1, 2, 3, 4, 5], start, end)
    team = TeamFactory(slug="nlp-panel")
    carol = UserFactory(username="carol-panel")
    team.memberships.create(user=carol, role="member")
    client = Client()
    client.force_login(carol)
    query = {
        "team": "nlp-panel",
        "workload_kind": "training",
        "pool": "dgx",
        "gpu_model": "a100_80g_sxm",
        "card_count": 8,
        "starts_at": start.strftime("%Y-%m-%dT%H:%M"),
        "ends_at": end.strftime("%Y-%m-%dT%H:%M"),
        "justification": "TP=8",
    }
    shaped = query | {"cards_per_node": 8, "node_count": 1, "one_nvlink_domain": "on"}
    panel = client.get("/requests/new/", shaped, headers={"HX-Request": "true"}).content.decode()
    assert "Shape does not fit" in panel
    assert "Largest that does: 4 nodes × 2 cards each, one NVLink domain." in panel
    any_cards = client.get("/requests/new/", query, headers={"HX-Request": "true"})
    assert "Shape" not in any_cards.content.decode()  # no shape asked: the card count alone
    two = query | {"card_count": 2, "cards_per_node": 2, "node_count": 1}
    fits = client.get("/requests/new/", two, headers={"HX-Request": "true"}).content.decode()
    assert "Shape fits: dgx-1" in fits


def _approval_queries(pool, a100, admin, start, end) -> int:
    request = _shaped(pool, a100, 8, 1, start, end)
    with CaptureQueriesContext(connection) as captured:
        capacity_request_approve(request=request, actor=admin)
    return len(captured)


def test_shaped_approval_query_count_does_not_grow_with_the_pool(
    dgx_pool, a100, admin, django_assert_num_queries
):
    start = next_week_9am()
    end = start + timedelta(days=7)
    # 4 nodes: takes dgx-1; the first read of this inventory reads the nodes too
    small = _approval_queries(dgx_pool, a100, admin, start, end)
    for i in range(5, 41):  # 40 nodes, the odd new ones half held, and an unplaced grant
        node_with_gpus(8, hostname=f"dgx-{i}", pool=dgx_pool, nvlink_domains=DGX)
        if i % 2:
            _hold(dgx_pool, a100, f"dgx-{i}", [0, 1, 2, 3], start, end)
    AllocationFactory(pool=dgx_pool, gpu_model=a100, card_count=3, starts_at=start, ends_at=end)
    eight = Shape(cards_per_node=8, nodes=1, one_nvlink_domain=True)
    with django_assert_num_queries(2):  # what the window holds; the changed inventory's nodes
        fit = shape_fit(pool=dgx_pool, gpu_model=a100, shape=eight, start=start, end=end)
    # names sort as text (dgx-10 < dgx-2); the unplaced 3 go by best fit to the first node with
    # 4 free (dgx-11); the 1 x 8 to the first whole free node: dgx-10
    assert fit.placements == (Placement("dgx-10", tuple(range(8))),)
    free = {name: len(cards) for name, cards in pool_free_nodes(pool=dgx_pool, gpu_model=a100,
                                                                start=start, end=end)}  # fmt: skip
    assert (free["dgx-1"], free["dgx-11"], free["dgx-13"], free["dgx-10"]) == (0, 1, 4, 8)
    # the inventory read is kept until it changes: one statement fewer than the first
    assert _approval_queries(dgx_pool, a100, admin, start, end) == small - 1
    node_with_gpus(8, hostname="dgx-41", pool=dgx_pool, nvlink_domains=DGX)  # changes it
    assert _approval_queries(dgx_pool, a100, admin, start, end) == small


def test_the_queue_and_the_request_page_show_the_shape_and_whether_it_fits(
    dgx_pool, a100, admin, client
):
    """The issue's scenario (8 free A100 spread 2 per node over 4 nodes, 1 x 8 asked): the
    queue shows the shape under the cards; the request page says the cards are free but the
    shape does not fit, with the largest shape that does, as approval would answer."""
    start = next_week_9am()
    end = start + timedelta(days=7)
    for i in range(1, 5):
        _hold(dgx_pool, a100, f"dgx-{i}", [0, 1, 2, 3, 4, 5], start, end)
    request = _shaped(dgx_pool, a100, 8, 1, start, end)
    CapacityRequest.objects.filter(pk=request.pk).update(status=RequestStatus.SUBMITTED)
    client.force_login(admin)
    queue = client.get("/requests/queue/").content.decode()
    assert "1 node × 8 cards, one NVLink domain" in queue
    page = client.get(f"/requests/{request.pk}/").content.decode()
    assert "as 1 node × 8 cards, one NVLink domain" in page
    assert "cards free, shape does not fit" in page
    assert "Largest that does: 4 nodes × 2 cards each, one NVLink domain." in page
