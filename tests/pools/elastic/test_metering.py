"""Burst card-seconds from the cards-held timeline, worked out by hand."""

from __future__ import annotations

from pools.elastic.metering import burst_card_seconds

H = 3600.0
TIMELINE = [(0.0, 2), (1 * H, 6), (3 * H, 4), (5 * H, 2)]  # floor 2


def test_burst_above_the_floor_only():
    # 4 burst cards x 2 h + 2 x 2 h = 12 card-hours
    assert burst_card_seconds(TIMELINE, floor_cards=2, start=0, end=10 * H) == 12 * H


def test_split_at_a_boundary_adds_up():
    first = burst_card_seconds(TIMELINE, floor_cards=2, start=0, end=2 * H)  # 4 x 1 h
    second = burst_card_seconds(TIMELINE, floor_cards=2, start=2 * H, end=10 * H)  # 4 + 4
    assert (first, second) == (4 * H, 8 * H)


def test_last_point_runs_to_the_end():
    assert burst_card_seconds([(0.0, 5)], floor_cards=2, start=H, end=2 * H) == 3 * H
    assert burst_card_seconds([(0.0, 5)], floor_cards=2, start=H, end=H) == 0.0
