"""The cards an allocation held over time, rebuilt from its reclamations and undos."""

from datetime import UTC, datetime, timedelta

from pools.capacity.models import Allocation
from pools.reclamation.card_timeline import CardPiece, card_pieces

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def window(cards: int, hours: int = 10) -> Allocation:
    return Allocation(card_count=cards, starts_at=T0, ends_at=T0 + timedelta(hours=hours))


def at(hours: int) -> datetime:
    return T0 + timedelta(hours=hours)


def test_no_change_is_the_card_count_throughout():
    assert card_pieces(window(4), []) == [CardPiece(T0, at(10), 4)]


def test_a_shrink_keeps_the_old_count_before_it():
    assert card_pieces(window(2), [(at(4), 8, 2)]) == [
        CardPiece(T0, at(4), 8),
        CardPiece(at(4), at(10), 2),
    ]


def test_an_ended_then_undone_allocation_held_nothing_in_between():
    changes = [(at(6), 0, 8), (at(3), 8, 0)]  # given out of order
    assert card_pieces(window(8), changes) == [
        CardPiece(T0, at(3), 8),
        CardPiece(at(3), at(6), 0),
        CardPiece(at(6), at(10), 8),
    ]


def test_changes_outside_the_window_are_clamped_to_it():
    # a reclamation recorded after the window's end (ends_at cut to it): no empty piece
    assert card_pieces(window(2), [(at(12), 8, 2)]) == [CardPiece(T0, at(10), 8)]
    assert card_pieces(window(2), [(T0 - timedelta(hours=1), 8, 2)]) == [CardPiece(T0, at(10), 2)]
