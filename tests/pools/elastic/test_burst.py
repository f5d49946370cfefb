"""Burst cards go back, newest first, when a guaranteed approval needs them. That they come only
from free capacity is the lending step of ``pools.elastic.services`` (test_services.py)."""

from __future__ import annotations

from pools.elastic.burst import Burst, hand_back_plan

NOW = 1_800_000_000.0


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
