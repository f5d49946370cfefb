"""Burst cards come only from free capacity and go back, newest first, when a guaranteed
approval needs them."""

from __future__ import annotations

from pools.elastic.burst import Burst, free_for_burst, grant_burst, hand_back_plan

NOW = 1_800_000_000.0


def test_free_for_burst_excludes_floors_and_burst_already_lent():
    # 16 usable cards, floors 10, burst lent 4 -> 2 free; never negative
    assert free_for_burst(capacity_cards=16, guaranteed_cards=10, burst_cards=4) == 2
    assert free_for_burst(capacity_cards=16, guaranteed_cards=14, burst_cards=4) == 0


def test_grant_stops_at_the_free_cards():
    # floor 2, holding 4 (burst 2); others' floors (with ours) 10, others' burst 3; 16 usable:
    # free = 16 - 10 - (3 + 2) = 1 -> wanting 8 gives 5
    args = dict(floor_cards=2, capacity_cards=16, guaranteed_cards=10, burst_cards_of_others=3)
    assert grant_burst(wanted_cards=8, cards_held=4, **args) == 5
    assert grant_burst(wanted_cards=5, cards_held=4, **args) == 5
    assert grant_burst(wanted_cards=1, cards_held=4, **args) == 2  # never below the floor


def test_a_guaranteed_approval_takes_borrowed_cards_back_newest_first():
    # 16 usable; floors were 8, now an approval of 6 more -> 14 guaranteed.
    # bursts: A (floor 2, holds 5: 3 burst, since t-3600), B (floor 2, holds 4: 2 burst, t-60)
    # floors 14 + burst 5 = 19 > 16: 3 must go back; B (newest) gives its 2, A gives 1.
    bursts = [
        Burst(allocation_id=1, floor_cards=2, cards_held=5, borrowed_since=NOW - 3600),
        Burst(allocation_id=2, floor_cards=2, cards_held=4, borrowed_since=NOW - 60),
    ]
    plan = hand_back_plan(
        capacity_cards=16,
        guaranteed_cards=14,
        bursts=bursts,
        now=NOW,
        guaranteed_starts_at=NOW + 600,
    )
    assert [(h.allocation_id, h.cards_from, h.cards_to) for h in plan] == [(2, 4, 2), (1, 5, 4)]
    assert {(h.effective_at, h.notice_s) for h in plan} == {(NOW + 600, 600)}


def test_nothing_is_taken_when_it_fits():
    bursts = [Burst(allocation_id=1, floor_cards=2, cards_held=5, borrowed_since=NOW)]
    assert hand_back_plan(capacity_cards=16, guaranteed_cards=13, bursts=bursts, now=NOW,
                          guaranteed_starts_at=NOW) == []  # fmt: skip


def test_a_guaranteed_allocation_already_started_takes_them_at_once():
    bursts = [Burst(allocation_id=1, floor_cards=0, cards_held=4, borrowed_since=NOW)]
    plan = hand_back_plan(capacity_cards=4, guaranteed_cards=4, bursts=bursts, now=NOW,
                          guaranteed_starts_at=NOW - 5)  # fmt: skip
    assert [(h.cards_to, h.effective_at, h.notice_s) for h in plan] == [(0, NOW, 0)]
