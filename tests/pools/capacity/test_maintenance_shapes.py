"""Maintenance windows in shaped approvals, extensions, MIG slices and the explainer (issue 32,
noticed defects): a window names its nodes, so a node away at any time in the asked window has
no card free for a shape (never "any N cards" laid wherever best fit puts them), a refusal says
"node X away for maintenance <window> until <end>", and the slices of its cards in MIG mode are
away too. Pure / database tier: no Slurm.

Pool ``infer`` (conftest): inf-01 and inf-02, 4 L40S each (GPUs 0–3), over-commit 1.0; some
tests add inf-03 alike. ``t`` is next week's Monday 09:00 UTC; windows are half-open.
"""

from __future__ import annotations

from datetime import UTC, timedelta

import pytest
from factories import (
    AllocationFactory,
    CapacityRequestFactory,
    MembershipFactory,
    TeamFactory,
    next_week_9am,
    node_with_gpus,
)
from mig_nodes import mig_fleet

from pools.audit.models import AuditEvent
from pools.capacity.availability import pool_free_slices
from pools.capacity.models import Allocation
from pools.capacity.placement import Shape
from pools.capacity.services.maintenance import maintenance_window_create
from pools.capacity.services.requests import capacity_request_approve
from pools.capacity.shapes import shape_fit
from pools.capacity.views import slice_options
from pools.capacity.window import window_holds
from pools.common.choices import Scheduler
from pools.common.errors import InsufficientCapacity
from pools.explain.views import queue_verdicts
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db
H = timedelta(hours=1)
EXPLAIN = "/api/v1/requests/explain/"


def away(actor, start, end, hosts, title="R570 upgrade"):
    return maintenance_window_create(actor=actor, title=title, scope="nodes", hostnames=hosts,
                                     starts_at=start, ends_at=end)  # fmt: skip


def shaped(team, pool, model, per_node, nodes, start, end, **fields):
    return CapacityRequestFactory(team=team, pool=pool, gpu_model=model,
                                  card_count=per_node * nodes, cards_per_node=per_node,
                                  node_count=nodes, starts_at=start, ends_at=end,
                                  **fields)  # fmt: skip


def until(at) -> str:
    """How a refusal writes an instant (``5 Dec 2026 14:00 UTC``), from the datetime."""
    utc = at.astimezone(UTC)
    return f"{utc.day} {utc:%b %Y %H:%M} UTC"


@pytest.fixture
def inf03(infer_pool):
    """A third node like the other two: 12 L40S in the pool."""
    return node_with_gpus(4, gpu_model="l40s", hostname="inf-03", pool=infer_pool,
                          scheduler=Scheduler.KUBERNETES, driver_version="550.54.15")  # fmt: skip


def test_four_on_one_node_is_refused_while_the_other_node_is_away(
    pool_admin, team, infer_pool, l40s
):
    """The brief's example. nlp holds GPU 0 of inf-01 09:00-17:00; inf-02 is away 12:00-14:00.
    "1 node × 4 cards" 12:00-13:00: inf-01 has 4 − 1 = 3 free, inf-02 none (away) → refused,
    free 8 − 1 − 4 = 3, the largest shape 1 node × 3 cards, the reason naming inf-02 and the
    window's end, 14:00; nothing written. 11:00-12:00 (before the window): inf-02's 4 are free
    → placed there, GPUs 0-3."""
    t = next_week_9am()
    AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=1, starts_at=t,
                      ends_at=t + 8 * H, placement=[{"node": "inf-01", "gpus": [0]}])  # fmt: skip
    window = away(pool_admin, t + 3 * H, t + 5 * H, ["inf-02"])
    inside = shaped(team, infer_pool, l40s, 4, 1, t + 3 * H, t + 4 * H)
    allocations, events = Allocation.objects.count(), AuditEvent.objects.count()
    with pytest.raises(InsufficientCapacity) as refused:
        capacity_request_approve(request=inside, actor=pool_admin)
    said = refused.value.message
    assert (
        f"node inf-02 away for maintenance R570 upgrade (#{window.pk}) until "
        f"{until(t + 5 * H)}" in said
    ), said
    assert "most free on one node: 3" in said
    assert refused.value.data["free"] == 3
    assert refused.value.data["largest_shape"]["cards_per_node"] == 3
    assert (Allocation.objects.count(), AuditEvent.objects.count()) == (allocations, events)
    before = shaped(team, infer_pool, l40s, 4, 1, t + 2 * H, t + 3 * H)
    granted = capacity_request_approve(request=before, actor=pool_admin)
    assert granted.placement == [{"node": "inf-02", "gpus": [0, 1, 2, 3]}]


def test_a_shape_is_never_placed_on_a_node_away(pool_admin, team, infer_pool, l40s, inf03):
    """inf-03 away 12:00-14:00; nlp holds 4 cards without a placement 09:00-17:00.
    "1 node × 4 cards" 12:00-13:00: the count 12 − 4 − 4 = 4 passes; the unplaced 4 are laid
    by best fit on inf-01 (inf-01 and inf-02 both leave 0, name order), so inf-02 is the node
    free: placed on inf-02 GPUs 0-3, not on inf-03 (free only if the window's 4 cards were
    "any 4" laid on inf-01 with nlp's on inf-02)."""
    t = next_week_9am()
    AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=4, starts_at=t,
                      ends_at=t + 8 * H)  # fmt: skip
    away(pool_admin, t + 3 * H, t + 5 * H, ["inf-03"])
    request = shaped(team, infer_pool, l40s, 4, 1, t + 3 * H, t + 4 * H)
    granted = capacity_request_approve(request=request, actor=pool_admin)
    assert granted.placement == [{"node": "inf-02", "gpus": [0, 1, 2, 3]}]


@pytest.fixture
def fragmented(pool_admin, team, infer_pool, l40s, inf03):
    """inf-02 has GPUs 0-1 held (vision, placed) and nlp holds 2 cards unplaced, both 09:00-17:00;
    inf-03 is away 12:00-14:00. For 12:00-13:00 the count is 12 − 2 − 2 − 4 = 4; nlp's 2 go by
    best fit to inf-02's 2 free cards (leaves 0), so inf-01's 4 are free. Were the window "any
    4 cards" laid with nlp's as any 6, they would take inf-01's 4 and 2 of inf-03's, leaving
    2 + 2: no node with 4."""
    t = next_week_9am()
    vision = TeamFactory(slug="vision", name="Vision")
    AllocationFactory(team=vision, pool=infer_pool, gpu_model=l40s, card_count=2,
                      starts_at=t, ends_at=t + 8 * H,
                      placement=[{"node": "inf-02", "gpus": [0, 1]}])  # fmt: skip
    AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=2, starts_at=t,
                      ends_at=t + 8 * H)  # fmt: skip
    window = away(pool_admin, t + 3 * H, t + 5 * H, ["inf-03"])
    return {"t": t, "window": window}


def test_the_nodes_left_are_used_whole(pool_admin, team, infer_pool, l40s, fragmented):
    """1 node × 4 cards 12:00-13:00 in the fragmented pool fits on inf-01, GPUs 0-3, and is
    approved there."""
    t = fragmented["t"]
    fit = shape_fit(pool=infer_pool, gpu_model=l40s, shape=Shape(cards_per_node=4, nodes=1),
                    start=t + 3 * H, end=t + 4 * H)  # fmt: skip
    assert fit.fits and [(p.node, p.gpus) for p in fit.placements] == [("inf-01", (0, 1, 2, 3))]
    request = shaped(team, infer_pool, l40s, 4, 1, t + 3 * H, t + 4 * H)
    granted = capacity_request_approve(request=request, actor=pool_admin)
    assert granted.placement == [{"node": "inf-01", "gpus": [0, 1, 2, 3]}]


def test_the_holds_per_node_take_the_away_node_whole(pool_admin, infer_pool, l40s, fragmented):
    """What the shape check reads for 12:00-13:00: the peak 2 + 2 + 4 = 8 (the card count),
    inf-02's GPUs 0-1 held, inf-03 holding all its cards, and only nlp's 2 unplaced."""
    t, window = fragmented["t"], fragmented["window"]
    holds = window_holds(pool=infer_pool, gpu_model=l40s, start=t + 3 * H, end=t + 4 * H,
                         per_node=True)  # fmt: skip
    assert (holds.peak, holds.unplaced_peak) == (8, 2)
    assert holds.held["inf-02"] == 0b11
    assert holds.held["inf-03"] & 0b1111 == 0b1111
    assert [(a.node, a.window_id, a.until) for a in holds.away] == [
        ("inf-03", window.pk, t + 5 * H)
    ]
    # outside the window nothing is away: inf-03 is a node like the others
    later = window_holds(pool=infer_pool, gpu_model=l40s, start=t + 5 * H, end=t + 6 * H,
                         per_node=True)  # fmt: skip
    assert (later.peak, later.unplaced_peak, later.away) == (4, 2, ())
    assert "inf-03" not in later.held


def test_an_extension_cannot_keep_cards_on_a_node_away(pool_admin, team, infer_pool, l40s):
    """nlp's allocation holds inf-02 GPUs 0-1 10:00-12:00; inf-02 is away 12:00-14:00. Its
    extension 12:00-13:00 keeps those cards, which are not free: refused with ``taken`` =
    inf-02 GPUs 0, 1 and the node named; nothing written."""
    t = next_week_9am()
    running = AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=2,
                                starts_at=t + H, ends_at=t + 3 * H,
                                placement=[{"node": "inf-02", "gpus": [0, 1]}])  # fmt: skip
    window = away(pool_admin, t + 3 * H, t + 5 * H, ["inf-02"])
    extension = CapacityRequestFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=2,
                                       starts_at=t + 3 * H, ends_at=t + 4 * H,
                                       extends=running)  # fmt: skip
    allocations = Allocation.objects.count()
    with pytest.raises(InsufficientCapacity) as refused:
        capacity_request_approve(request=extension, actor=pool_admin)
    assert refused.value.data["taken"] == [{"node": "inf-02", "gpus": [0, 1]}]
    assert f"node inf-02 away for maintenance R570 upgrade (#{window.pk})" in refused.value.message
    assert Allocation.objects.count() == allocations


# -- MIG slices --------------------------------------------------------------------------------


@pytest.fixture
def mig(pool_admin):
    """``tests/mig_nodes.py``'s pool ``infer``: a100-mixed holds 1g.10gb × 9 and 2g.20gb × 2 on
    its two cards in MIG mode; h100nvl-single 1g.12gb × 14. a100-mixed away 12:00-14:00."""
    pool = mig_fleet()
    t = next_week_9am()
    window = away(pool_admin, t + 3 * H, t + 5 * H, ["a100-mixed"])
    return {"pool": pool, "t": t, "window": window, "a100": GpuModel.objects.get(
        slug="a100_80g_sxm"), "nvl": GpuModel.objects.get(slug="h100_nvl")}  # fmt: skip


def slices(mig, profile, start, end, model="a100"):
    return pool_free_slices(pool=mig["pool"], gpu_model=mig[model], profile=profile,
                            start=start, end=end)  # fmt: skip


def test_slices_on_a_node_away_are_not_free(mig, team):
    """1g.10gb: 9 before the window (10-11), 0 in it (12-13: 9 − 9), 9 after (14-15). With
    nlp holding 3 slices 09:00-17:00: 6 at 10-11, and over 10:00-15:00 the peak is 3 + 9 = 12
    > 9 → 0. 2g.20gb: 2 → 0 in the window. h100nvl-single is not away: 14 1g.12gb free."""
    t = mig["t"]
    assert [slices(mig, "1g.10gb", t + a * H, t + b * H) for a, b in ((1, 2), (3, 4), (5, 6))] == [
        9, 0, 9,
    ]  # fmt: skip
    assert slices(mig, "2g.20gb", t + 3 * H, t + 4 * H) == 0
    assert slices(mig, "1g.12gb", t + 3 * H, t + 4 * H, model="nvl") == 14
    AllocationFactory(team=team, pool=mig["pool"], gpu_model=mig["a100"], mig_profile="1g.10gb",
                      card_count=3, starts_at=t, ends_at=t + 8 * H)  # fmt: skip
    assert slices(mig, "1g.10gb", t + H, t + 2 * H) == 6
    assert slices(mig, "1g.10gb", t + H, t + 6 * H) == 0
    (option,) = slice_options(pool=mig["pool"], gpu_model=mig["a100"], profile="1g.10gb",
                              start=t + 3 * H, end=t + 4 * H, wanted=1)  # fmt: skip
    assert (option.total, option.free, option.eligible) == (9, 0, False)


def test_a_slice_approval_into_the_window_is_refused_with_the_node(mig, team, pool_admin):
    """1 × 1g.10gb 12:00-13:00: 0 free → refused, naming a100-mixed and the window's end;
    14:00-15:00 → granted."""
    t = mig["t"]
    common = {"team": team, "pool": mig["pool"], "gpu_model": mig["a100"],
              "mig_profile": "1g.10gb", "card_count": 1}  # fmt: skip
    inside = CapacityRequestFactory(starts_at=t + 3 * H, ends_at=t + 4 * H, **common)
    with pytest.raises(InsufficientCapacity) as refused:
        capacity_request_approve(request=inside, actor=pool_admin)
    assert refused.value.data["free"] == 0
    assert (
        f"node a100-mixed away for maintenance R570 upgrade (#{mig['window'].pk}) until "
        f"{until(t + 5 * H)}" in refused.value.message
    ), refused.value.message
    after = CapacityRequestFactory(starts_at=t + 5 * H, ends_at=t + 6 * H, **common)
    assert capacity_request_approve(request=after, actor=pool_admin).card_count == 1


# -- the explainer: the request form's panel and the approval queue's verdicts -----------------


@pytest.fixture
def alice(team):
    return MembershipFactory(team=team, user__username="alice").user


def ask(t, start_h, end_h, **fields):
    return {"team": "nlp", "workload_kind": "inference", "pool": "infer", "gpu_model": "l40s",
            "card_count": 4, "cards_per_node": 4, "node_count": 1,
            "starts_at": (t + start_h * H).isoformat(), "ends_at": (t + end_h * H).isoformat(),
            **fields}  # fmt: skip


def test_the_explainer_uses_the_nodes_left_whole(api_as, alice, fragmented):
    """The fragmented pool, 1 node × 4 cards 12:00-13:00: approvable now (inf-01 whole), as
    the approval found; the earliest start is the asked one."""
    t = fragmented["t"]
    data = api_as(alice).post(EXPLAIN, ask(t, 3, 4), format="json").json()
    assert data["approvable_now"] is True, data["why_not"]
    (when,) = data["when"]
    assert when["earliest_start"] == (t + 3 * H).isoformat().replace("+00:00", "Z")


def test_the_explainer_names_the_node_away_and_when_it_fits(
    api_as, alice, pool_admin, team, infer_pool, l40s
):
    """inf-02 away 12:00-14:00, nothing held. 2 nodes × 2 cards each (one task per node)
    12:00-13:00: the count 8 − 4 = 4 passes, but only inf-01 can hold a group → not
    approvable, the shape reason naming inf-02 until 14:00; earliest start 14:00 (both nodes
    back). The approval queue's verdict for the same request says the same."""
    t = next_week_9am()
    window = away(pool_admin, t + 3 * H, t + 5 * H, ["inf-02"])
    named = f"node inf-02 away for maintenance R570 upgrade (#{window.pk}) until {until(t + 5 * H)}"
    data = api_as(alice).post(EXPLAIN, ask(t, 3, 4, cards_per_node=2, node_count=2),
                              format="json").json()  # fmt: skip
    assert data["approvable_now"] is False
    (reason,) = data["why_not"]
    assert reason["code"] == "shape"
    assert "only 1 node of the 2 asked can each hold 2" in reason["text"], reason["text"]
    assert named in reason["text"], reason["text"]
    (when,) = data["when"]
    assert when["earliest_start"] == (t + 5 * H).isoformat().replace("+00:00", "Z")
    request = shaped(team, infer_pool, l40s, 2, 2, t + 3 * H, t + 4 * H)
    verdict = queue_verdicts(user=pool_admin, requests=[request])[request.pk]
    assert verdict["approvable"] is False and named in verdict["reason"], verdict
    assert verdict["when"] == until(t + 5 * H)
    with pytest.raises(InsufficientCapacity) as refused:
        capacity_request_approve(request=request, actor=pool_admin)
    assert named in refused.value.message


def test_the_explainer_count_reason_names_the_node_away(
    api_as, alice, pool_admin, team, infer_pool, l40s
):
    """The brief's example in the explainer: GPU 0 of inf-01 held 09:00-17:00, inf-02 away
    12:00-14:00; 1 node × 4 cards 12:00-13:00: 8 − 1 − 4 = 3 free, the count reason saying the
    4 away are inf-02's until 14:00; earliest start 14:00 (inf-02's 4 free again)."""
    t = next_week_9am()
    AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=1, starts_at=t,
                      ends_at=t + 8 * H, placement=[{"node": "inf-01", "gpus": [0]}])  # fmt: skip
    window = away(pool_admin, t + 3 * H, t + 5 * H, ["inf-02"])
    data = api_as(alice).post(EXPLAIN, ask(t, 3, 4), format="json").json()
    (reason,) = data["why_not"]
    assert (reason["code"], reason["data"]["free"]) == ("free_cards", 3)
    assert (
        f"(4 cards away for maintenance: node inf-02 away for maintenance R570 upgrade "
        f"(#{window.pk}) until {until(t + 5 * H)})" in reason["text"]
    ), reason["text"]
    (when,) = data["when"]
    assert when["earliest_start"] == (t + 5 * H).isoformat().replace("+00:00", "Z")


def test_away_reason_counts_past_five_names_and_groups_by_window():
    """Seven nodes in one window: five named in host-name order, "and 2 more"; a second window
    ending earlier comes first; a fit that fits is left as it is."""
    from datetime import datetime

    from pools.capacity.placement import AwayNode, FitResult, away_reason, with_away

    end = datetime(2026, 12, 14, 14, 0, tzinfo=UTC)
    nodes = [AwayNode(f"n{i}", 7, "R570", end) for i in (7, 1, 6, 2, 5, 3, 4)]
    early = AwayNode("m1", 9, "Firmware", end - H)
    assert away_reason([*nodes, early]) == (
        "node m1 away for maintenance Firmware (#9) until 14 Dec 2026 13:00 UTC; "
        "nodes n1, n2, n3, n4, n5 and 2 more away for maintenance R570 (#7) until "
        "14 Dec 2026 14:00 UTC"
    )
    assert away_reason([]) == ""
    fits = FitResult(Shape.any(1), True)
    assert with_away(fits, nodes) is fits
    refused = FitResult(Shape.any(9), False, reason="8 cards are free for the whole window")
    assert with_away(refused, [early]).reason == (
        "8 cards are free for the whole window; node m1 away for maintenance Firmware (#9) "
        "until 14 Dec 2026 13:00 UTC"
    )
