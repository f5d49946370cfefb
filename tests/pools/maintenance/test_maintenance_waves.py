"""Upgrade waves: the greedy planner (pure) keeps every approved allocation's cards — no wave
takes a node with cards placed on it during the wave, and no wave leaves a pool × model fewer
cards than it holds then — and covers every node exactly once, or says why not.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from factories import AllocationFactory, PoolFactory, TeamFactory, next_week_9am, node_with_gpus
from hypothesis import given, settings
from hypothesis import strategies as st

from pools.capacity.arithmetic import peak_cards
from pools.capacity.models import PlacedCards
from pools.inventory.models import DriverGroup, GpuModel
from pools.maintenance.models import MaintenanceWindow
from pools.maintenance.selectors import WaveAsk, maintenance_wave_plan
from pools.maintenance.services.windows import NoWavePlan, maintenance_waves_create
from pools.maintenance.waves import KeyCapacity, WaveNode, node_blocked, plan_waves

T0 = datetime(2030, 1, 7, 6, tzinfo=UTC)
H = timedelta(hours=1)
KEY = "pool×a100"
SLICES = "pool×a100×1g.10gb"  # a MIG profile's slices: never placed, no over-commit


@st.composite
def fleets(draw):
    """2-8 nodes of 1-8 cards, some with 1g.10gb slices too (0-14: up to two cards in MIG
    mode), some allocations placed on nodes, some unplaced holds of cards and of slices."""
    n = draw(st.integers(2, 8))
    nodes = []
    for i in range(n):
        cards = {KEY: draw(st.integers(1, 8))}
        if slices := draw(st.integers(0, 14)):
            cards[SLICES] = slices
        nodes.append(WaveNode(f"n{i}", cards))
    hour = st.integers(0, 40)
    placed = []
    for _ in range(draw(st.integers(0, 6))):
        s = draw(hour)
        placed.append((f"n{draw(st.integers(0, n - 1))}", T0 + s * H,
                       T0 + (s + draw(st.integers(1, 12))) * H))  # fmt: skip

    def holds(total, most):
        found = []
        for _ in range(draw(st.integers(0, most))):
            s = draw(hour)
            found.append((T0 + s * H, T0 + (s + draw(st.integers(1, 12))) * H,
                          draw(st.integers(1, max(1, total // 3)))))  # fmt: skip
        return found

    total = sum(x.cards[KEY] for x in nodes)
    # the placed allocations hold their node's cards in the count too
    cards_of = {x.hostname: x.cards[KEY] for x in nodes}
    counted = holds(total, 4) + [(s, e, cards_of[h]) for h, s, e in placed]
    ratio = draw(st.sampled_from([Decimal("1.00"), Decimal("1.50")]))
    capacity = {KEY: KeyCapacity(total, ratio, counted)}
    if slices := sum(x.cards.get(SLICES, 0) for x in nodes):
        capacity[SLICES] = KeyCapacity(slices, Decimal(1), holds(slices, 4))
    return nodes, placed, capacity


@settings(max_examples=300, deadline=None)
@given(fleets(), st.integers(1, 3), st.integers(1, 8), st.integers(0, 3))
def test_no_wave_takes_an_allocations_cards_and_every_node_is_covered_once(
    fleet, per_wave, length_h, gap_h
):
    """Whole cards and MIG slices: every wave leaves each pool × model (× profile) it takes
    from at least the peak held in the wave, ``floor((total − away) × ratio)`` (ratio 1 for
    slices), and takes no node with cards placed on it."""
    nodes, placed, capacity = fleet
    plan = plan_waves(nodes=nodes, placed=placed, capacity=capacity, first_start=T0,
                      length=length_h * H, gap=gap_h * H, per_wave=per_wave,
                      max_slots=20)  # fmt: skip
    planned = [h for w in plan.waves for h in w.hostnames]
    assert len(planned) == len(set(planned))  # once
    assert sorted(planned + list(plan.unplanned)) == sorted(n.hostname for n in nodes)
    assert (plan.reason is None) == (not plan.unplanned)
    by_host = {n.hostname: n.cards for n in nodes}
    for wave in plan.waves:
        assert 1 <= len(wave.hostnames) <= per_wave
        for host in wave.hostnames:
            assert not node_blocked(host, placed, wave.starts_at, wave.ends_at)
        for key, cap in capacity.items():
            away = sum(by_host[h].get(key, 0) for h in wave.hostnames)
            if not away:
                continue
            left = math.floor((cap.schedulable - away) * cap.ratio)
            assert peak_cards(cap.intervals, wave.starts_at, wave.ends_at) <= left, key
    starts = [w.starts_at for w in plan.waves]
    assert starts == sorted(starts)
    assert all(a.ends_at <= b.starts_at for a, b in zip(plan.waves, plan.waves[1:], strict=False))


def test_a_node_holding_every_slice_held_waits_out_the_allocation():
    """n0: 4 cards and all 9 1g.10gb slices; n1: 4 cards. 3 slices held 0-10 h; nothing else.
    Waves of 4 h every 5 h, one node each: slot 0-4 h takes n1 (n0's 9 − 9 = 0 < 3), slot 5-9 h
    nothing (n0 still), slot 10-14 h n0. Without the slice key n0 would be wave 1."""
    nodes = [WaveNode("n0", {KEY: 4, SLICES: 9}), WaveNode("n1", {KEY: 4})]
    capacity = {KEY: KeyCapacity(8, Decimal(1), []),
                SLICES: KeyCapacity(9, Decimal(1), [(T0, T0 + 10 * H, 3)])}  # fmt: skip
    plan = plan_waves(nodes=nodes, placed=[], capacity=capacity, first_start=T0, length=4 * H,
                      gap=H, per_wave=1, max_slots=5)  # fmt: skip
    assert [(w.starts_at - T0, w.hostnames) for w in plan.waves] == [
        (0 * H, ("n1",)), (10 * H, ("n0",)),
    ]  # fmt: skip
    assert [w.hostnames for w in plan_waves(
        nodes=[WaveNode("n0", {KEY: 4}), WaveNode("n1", {KEY: 4})], placed=[],
        capacity=capacity, first_start=T0, length=4 * H, gap=H, per_wave=1, max_slots=5,
    ).waves] == [("n0",), ("n1",)]  # fmt: skip


def test_a_node_pinned_by_a_placed_allocation_in_every_slot_means_no_plan():
    """n1 has an allocation placed on it for the whole horizon: waves 1 and 2 take n0 and n2,
    n1 is left, and the reason names it."""
    nodes = [WaveNode(f"n{i}", {KEY: 4}) for i in range(3)]
    placed = [("n1", T0, T0 + 100 * H)]
    plan = plan_waves(nodes=nodes, placed=placed,
                      capacity={KEY: KeyCapacity(12, Decimal(1), [(T0, T0 + 100 * H, 4)])},
                      first_start=T0, length=4 * H, gap=H, per_wave=1, max_slots=5)  # fmt: skip
    assert [w.hostnames for w in plan.waves] == [("n0",), ("n2",)]
    assert plan.unplanned == ("n1",)
    assert "placed on n1 in every slot" in plan.reason


@pytest.fixture
def r550(db):
    """Pool ``wave``: w-1, w-2, w-3 with 4 A100 each on driver 550 (12 cards)."""
    pool = PoolFactory(slug="wave", name="Wave")
    for i in (1, 2, 3):
        node_with_gpus(4, hostname=f"w-{i}", pool=pool, driver_version="550.54.15")
    return pool, DriverGroup.objects.get(branch=550)


def test_waves_in_the_database_keep_the_approved_cards_by_hand(pool_admin, r550):
    """nlp holds 6 A100 (no placement) all week; vision 4 placed on w-1 for the first 10 h.
    Waves of 4 h every 6 h, 2 nodes at most: slot 1 (0-4 h): w-1 pinned; w-2 away leaves 8 ≥
    10? no: 12 − 4 = 8 < 6 + 4 = 10 held → w-2 cannot go, nor w-3. Slot 2 (6-10 h): same.
    Slot 3 (12-16 h): vision has ended, 6 held: w-1 leaves 8 ≥ 6, w-1 + w-2 leave 4 < 6 →
    wave 1 = w-1 alone. Slot 4 (18-22 h): wave 2 = w-2. Slot 5: wave 3 = w-3."""
    pool, group = r550
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    t = next_week_9am()
    AllocationFactory(team=TeamFactory(slug="nlp"), pool=pool, gpu_model=a100, card_count=6,
                      starts_at=t - 24 * H, ends_at=t + 7 * 24 * H)  # fmt: skip
    vision = AllocationFactory(team=TeamFactory(slug="vision"), pool=pool, gpu_model=a100,
                               card_count=4, starts_at=t - H, ends_at=t + 10 * H)  # fmt: skip
    PlacedCards.objects.create(allocation=vision, hostname="w-1", gpu_mask=0b1111)
    ask = WaveAsk(group, pool, t, 4 * H, 2 * H, 2, 10)
    plan, nodes = maintenance_wave_plan(ask)
    assert [(w.number, w.starts_at - t, w.hostnames) for w in plan.waves] == [
        (1, 12 * H, ("w-1",)), (2, 18 * H, ("w-2",)), (3, 24 * H, ("w-3",)),
    ]  # fmt: skip
    windows = maintenance_waves_create(actor=pool_admin, ask=ask, title="R570")
    assert [w.title for w in windows] == [f"R570 · wave {i} of 3" for i in (1, 2, 3)]
    assert len({w.wave for w in windows}) == 1


def test_no_wave_plan_is_refused_with_why_and_nothing_written(pool_admin, r550):
    """nlp holds 10 of 12 all week: any node away leaves 8 < 10 → no plan."""
    pool, group = r550
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    t = next_week_9am()
    AllocationFactory(team=TeamFactory(slug="nlp"), pool=pool, gpu_model=a100, card_count=10,
                      starts_at=t - H, ends_at=t + 7 * 24 * H)  # fmt: skip
    with pytest.raises(NoWavePlan) as refused:
        maintenance_waves_create(actor=pool_admin, title="R570",
                                 ask=WaveAsk(group, pool, t, 4 * H, 2 * H, 1, 4))  # fmt: skip
    assert refused.value.data["unplanned"] == ["w-1", "w-2", "w-3"]
    assert "fewer cards or MIG slices than are held" in refused.value.data["reason"]
    assert not MaintenanceWindow.objects.exists()
