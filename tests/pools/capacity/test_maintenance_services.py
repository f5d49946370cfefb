"""Maintenance windows through the services: the cards of the window's nodes count as away in
the free-card count every reader shares, a window's collisions with approved allocations are
listed (team, cards lost) before it is saved, an approval into a window is refused with the
reason, and cancelling gives the cards back. Refusals write nothing.

Pool ``infer`` (conftest): inf-01 and inf-02, 4 L40S each, over-commit 1.0, so 8 usable.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from factories import AllocationFactory, CapacityRequestFactory, TeamFactory, next_week_9am

from pools.audit.models import AuditEvent
from pools.capacity.availability import earliest_free_start, pool_free_cards
from pools.capacity.maintenance import maintenance_collisions, scope_nodes, team_losses
from pools.capacity.models import MaintenanceStatus, MaintenanceWindow, PlacedCards
from pools.capacity.services.maintenance import (
    MaintenanceCollides,
    maintenance_window_cancel,
    maintenance_window_create,
)
from pools.capacity.services.requests import capacity_request_approve
from pools.capacity.window import window_holds
from pools.common.errors import (
    InsufficientCapacity,
    InvalidInput,
    InvalidTransition,
    PermissionDenied,
)
from pools.inventory.models import Node

pytestmark = pytest.mark.django_db
H = timedelta(hours=1)


def window(actor, start, end, hosts=("inf-01",), **fields):
    return maintenance_window_create(
        actor=actor, title="R570 upgrade", scope="nodes", hostnames=hosts,
        starts_at=start, ends_at=end, **fields,
    )  # fmt: skip


def free(pool, model, start, end):
    return pool_free_cards(pool=pool, gpu_model=model, start=start, end=end)


def test_free_cards_subtract_the_window_by_hand(pool_admin, team, infer_pool, l40s):
    """nlp holds 3 cards 09:00-17:00; inf-01 (4 cards) is away 12:00-14:00.
    10-11: 8 − 3 = 5. 12-13: 8 − 3 − 4 = 1. 10-15: the peak is 3 + 4 = 7 → 1.
    14-15 (half-open: the window has ended): 5. At over-commit 1.5: usable floor(8 × 1.5) =
    12, away ceil(4 × 1.5) = 6, 12-13: 12 − 3 − 6 = 3 (= floor((8 − 4) × 1.5) − 3)."""
    t = next_week_9am()  # 09:00 UTC
    AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=3,
                      starts_at=t, ends_at=t + 8 * H)  # fmt: skip
    window(pool_admin, t + 3 * H, t + 5 * H)
    assert free(infer_pool, l40s, t + H, t + 2 * H) == 5
    assert free(infer_pool, l40s, t + 3 * H, t + 4 * H) == 1
    assert free(infer_pool, l40s, t + H, t + 6 * H) == 1
    assert free(infer_pool, l40s, t + 5 * H, t + 6 * H) == 5
    assert window_holds(pool=infer_pool, gpu_model=l40s, start=t + 3 * H, end=t + 4 * H).peak == 7
    # the earliest 2-hour window for 4 cards from 10:00: 10-12 leaves 5 → fits at once;
    # for 5 cards from 11:00 it must wait for the window's end, 14:00
    assert earliest_free_start(pool=infer_pool, gpu_model=l40s, cards=5, start=t + 2 * H,
                               length=2 * H) == t + 5 * H  # fmt: skip
    infer_pool.overcommit_ratio = Decimal("1.50")
    infer_pool.save()
    assert free(infer_pool, l40s, t + 3 * H, t + 4 * H) == 3


def test_a_down_node_in_the_window_is_not_subtracted_twice(pool_admin, infer_pool, l40s):
    """inf-01 down: 4 schedulable; the window over inf-01 takes nothing more: 4 free."""
    t = next_week_9am()
    window(pool_admin, t, t + 2 * H)
    Node.objects.filter(hostname="inf-01").update(state="down")
    assert free(infer_pool, l40s, t, t + H) == 4


def test_collision_preview_lists_each_team_and_the_cards_it_loses(
    pool_admin, team, infer_pool, l40s, table_counts
):
    """nlp: 6 cards without placement 10:00-14:00; vision: 2 cards placed on inf-01 GPUs 0
    and 1, 11:00-13:00. Taking inf-01 (4) 12:00-13:00 leaves 4 while 6 + 2 = 8 are held:
    8 − 4 = 4 short. vision loses its 2 placed cards exactly; nlp up to min(6, 4) = 4.
    Without acknowledging both, nothing is written; with both ids, the window is saved and
    its audit event lists the collisions."""
    t = next_week_9am()
    nlp = AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=6,
                            starts_at=t + H, ends_at=t + 5 * H)  # fmt: skip
    vision = AllocationFactory(team=TeamFactory(slug="vision", name="Vision"), pool=infer_pool,
                               gpu_model=l40s, card_count=2, starts_at=t + 2 * H,
                               ends_at=t + 4 * H)  # fmt: skip
    PlacedCards.objects.create(allocation=vision, hostname="inf-01", gpu_mask=0b11)
    nodes, errors = scope_nodes(scope="nodes", hostnames=["inf-01"])
    assert errors == {}
    found = maintenance_collisions(nodes=nodes, start=t + 3 * H, end=t + 4 * H)
    assert [(c.allocation_id, c.team_slug, c.lost, c.exact) for c in found] == [
        (nlp.pk, "nlp", 4, False),
        (vision.pk, "vision", 2, True),
    ]
    assert team_losses(found) == [
        {"team": "nlp", "team_name": "NLP", "cards_lost": 4, "slices_lost": []},
        {"team": "vision", "team_name": "Vision", "cards_lost": 2, "slices_lost": []},
    ]
    before = table_counts()
    with pytest.raises(MaintenanceCollides) as refused:
        window(pool_admin, t + 3 * H, t + 4 * H, acknowledged=[nlp.pk])
    assert [c["cards_lost"] for c in refused.value.data["collisions"]] == [4, 2]
    assert refused.value.data["teams"][0] == {
        "team": "nlp", "team_name": "NLP", "cards_lost": 4, "slices_lost": []
    }  # fmt: skip
    assert table_counts() == before and not MaintenanceWindow.objects.exists()
    saved = window(pool_admin, t + 3 * H, t + 4 * H, acknowledged=[nlp.pk, vision.pk])
    event = AuditEvent.objects.get(action="maintenance_window.created")
    assert event.after["nodes"] == ["inf-01"]
    assert [c["allocation"] for c in event.after["collisions"]] == [nlp.pk, vision.pk]
    assert saved.status == MaintenanceStatus.PLANNED


def test_an_approval_into_the_window_is_refused_with_the_reason(pool_admin, team, infer_pool, l40s):
    """The whole pool (8 cards) is away 09:00-12:00: a request for 1 card 10:00-11:00 is
    refused, free 0, the message naming the window; one for 12:00-13:00 is granted."""
    t = next_week_9am()
    saved = maintenance_window_create(actor=pool_admin, title="Firmware", scope="pool",
                                      pool=infer_pool, starts_at=t, ends_at=t + 3 * H)  # fmt: skip
    assert sorted(saved.nodes.values_list("hostname", flat=True)) == ["inf-01", "inf-02"]
    inside = CapacityRequestFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=1,
                                    starts_at=t + H, ends_at=t + 2 * H)  # fmt: skip
    with pytest.raises(InsufficientCapacity) as refused:
        capacity_request_approve(request=inside, actor=pool_admin)
    assert refused.value.data["free"] == 0
    assert refused.value.data["maintenance"] == [saved.pk]
    assert f"Firmware (#{saved.pk})" in refused.value.message
    after = CapacityRequestFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=1,
                                   starts_at=t + 3 * H, ends_at=t + 4 * H)  # fmt: skip
    assert capacity_request_approve(request=after, actor=pool_admin).card_count == 1


def test_cancelling_gives_the_cards_back_once(pool_admin, member, infer_pool, l40s):
    t = next_week_9am()
    saved = window(pool_admin, t, t + H, hosts=("inf-01", "inf-02"))
    assert free(infer_pool, l40s, t, t + H) == 0
    with pytest.raises(PermissionDenied):
        maintenance_window_cancel(window=saved, actor=member)
    maintenance_window_cancel(window=saved, actor=pool_admin, reason="vendor late")
    assert free(infer_pool, l40s, t, t + H) == 8
    with pytest.raises(InvalidTransition):
        maintenance_window_cancel(window=saved, actor=pool_admin)
    assert AuditEvent.objects.get(action="maintenance_window.cancelled").reason == "vendor late"


def test_bad_input_is_refused_by_field_and_writes_nothing(pool_admin, member, infer_pool):
    t = next_week_9am()
    with pytest.raises(PermissionDenied):
        window(member, t, t + H)
    with pytest.raises(InvalidInput) as refused:
        window(pool_admin, t + H, t, hosts=("inf-01", "nope-9"))
    assert set(refused.value.data["errors"]) == {"ends_at", "hostnames"}
    assert "nope-9" in refused.value.data["errors"]["hostnames"]
    with pytest.raises(InvalidInput) as refused:
        maintenance_window_create(actor=pool_admin, title=" ", scope="driver_group",
                                  starts_at=t, ends_at=t + H)  # fmt: skip
    assert set(refused.value.data["errors"]) == {"title", "driver_group"}
    assert not MaintenanceWindow.objects.exists()


def test_the_week_calendar_shows_the_cards_away(pool_admin, infer_pool, l40s):
    """inf-01 (4 of 8 L40S) away 10:00-11:00 on Tuesday 2027-01-19 (UTC): that day has
    8 − 4 = 4 free over the whole day, the other days 8."""
    from datetime import UTC, datetime

    from pools.capacity.calendar_week import free_per_day, local_midnight

    tuesday = datetime(2027, 1, 19, 10, tzinfo=UTC)
    window(pool_admin, tuesday, tuesday + H)
    monday = tuesday.date() - timedelta(days=1)
    bounds = [local_midnight(monday + timedelta(days=i)) for i in range(8)]
    assert free_per_day(pool=infer_pool, gpu_model=l40s, bounds=bounds) == [8, 4, 8, 8, 8, 8, 8]


def test_a_node_name_two_clusters_share_needs_the_pool(pool_admin):
    """Host names are unique per cluster only (issue 35): ``gpu-01`` of cluster east and of
    cluster west are two nodes; naming it without a pool is a field error, with its pool it is
    that cluster's node alone."""
    from factories import ClusterFactory, NodeFactory, PoolFactory

    from pools.capacity.maintenance import scope_nodes

    pools = {}
    for slug in ("east", "west"):
        pools[slug] = PoolFactory(slug=f"{slug}-gpu", cluster=ClusterFactory(slug=slug))
        NodeFactory(hostname="gpu-01", pool=pools[slug])

    nodes, errors = scope_nodes(scope="nodes", hostnames=["gpu-01"])
    assert errors == {"hostnames": "Several clusters have a node named gpu-01: choose the pool."}
    nodes, errors = scope_nodes(scope="nodes", pool=pools["west"], hostnames=["gpu-01"])
    assert (errors, [n.cluster.slug for n in nodes]) == ({}, ["west"])
