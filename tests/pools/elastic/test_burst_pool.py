"""Where elastic cards go (issue 35): home first, the burst pool when home is full; the burst
pool's cards go back first. Pure: examples worked by hand, then properties."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pools.elastic.burst_pool import Placement, place


def test_home_full_the_rest_goes_to_the_burst_pool():
    # floor 2, holds 4 (all home); wants 12 (ceiling 12): home can lend 2 more, burst has 20
    # free -> 4 + 2 home + 6 burst = 12 held, 6 of them in the burst pool
    got = place(floor_cards=2, ceiling_cards=12, held=Placement(4, 0), wanted_cards=12,
                home_room=2, burst_room=20)  # fmt: skip
    assert (got.cards, got.burst_cards, got.home_cards) == (12, 6, 6)


def test_the_burst_pool_has_less_than_asked():
    # wants 12 from 4: home 0, burst 3 -> 7 held, 3 in burst
    got = place(floor_cards=2, ceiling_cards=12, held=Placement(4, 0), wanted_cards=12,
                home_room=0, burst_room=3)  # fmt: skip
    assert (got.cards, got.burst_cards) == (7, 3)


def test_going_down_hands_the_burst_cards_back_first():
    # holds 12 (6 burst), wants 8: the 4 released are burst cards -> 8 held, 2 burst
    got = place(floor_cards=2, ceiling_cards=12, held=Placement(12, 6), wanted_cards=8,
                home_room=0, burst_room=0)  # fmt: skip
    assert (got.cards, got.burst_cards) == (8, 2)
    # then down to 3: 2 burst + 3 home released -> 3 held, none in burst
    got = place(floor_cards=2, ceiling_cards=12, held=got, wanted_cards=3, home_room=0,
                burst_room=0)  # fmt: skip
    assert (got.cards, got.burst_cards) == (3, 0)


@st.composite
def states(draw):
    floor = draw(st.integers(0, 16))
    ceiling = draw(st.integers(floor, 64))
    cards = draw(st.integers(floor, ceiling))
    burst = draw(st.integers(0, cards - floor))
    return floor, ceiling, Placement(cards, burst)


# a shared, loaded test machine can stall one draw for seconds: not a slow strategy
RELAXED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@RELAXED
@given(states(), st.integers(-8, 80), st.integers(-4, 40), st.integers(-4, 40))
def test_never_above_the_ceiling_and_burst_stays_above_the_floor(state, wanted, home, burst):
    floor, ceiling, held = state
    got = place(floor_cards=floor, ceiling_cards=ceiling, held=held, wanted_cards=wanted,
                home_room=home, burst_room=burst)  # fmt: skip
    assert floor <= got.cards <= ceiling
    assert 0 <= got.burst_cards <= got.cards - floor
    # up: never more than each pool had room for; down: exactly what was wanted
    if got.cards >= held.cards:
        assert got.home_cards - held.home_cards <= max(0, home)
        assert got.burst_cards - held.burst_cards <= max(0, burst)
    else:
        assert got.cards == max(floor, min(ceiling, wanted))


@RELAXED
@given(states(), st.integers(0, 80))
def test_burst_cards_are_returned_before_home_cards(state, wanted):
    floor, ceiling, held = state
    got = place(floor_cards=floor, ceiling_cards=ceiling, held=held, wanted_cards=wanted,
                home_room=0, burst_room=0)  # fmt: skip
    if got.cards < held.cards:
        released = held.cards - got.cards
        burst_released = held.burst_cards - got.burst_cards
        home_released = held.home_cards - got.home_cards
        # a home card goes only once every burst card has gone
        assert burst_released == min(released, held.burst_cards)
        assert home_released == 0 or got.burst_cards == 0
