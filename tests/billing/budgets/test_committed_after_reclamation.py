"""What a budget counts as committed follows the cards an allocation held over time when
reclamation changed them (:mod:`pools.reclamation.card_timeline`, what the reservation import
charges): the cards before a shrink up to it, those kept after it, the cards given back by an
undo from the undo on, and the last hours of an allocation reclamation ended. It counted the
allocation's latest ``card_count`` from where its imported usage ends, so a shrink after the
last import took its cards away before it happened, an undo gave them back before it happened,
and an allocation reclaimed whole dropped out until the next import.

Clock fixed per step, billing zone UTC, 10 March 2026. Rate card: A100 reserved 2.00 EUR a
card-hour. Team ``nlp`` holds 4 A100, active, priced reserved, 08:00 -> 20:00; the reservation
import last ran at 11:00 (4 x 3 = 12 card-hours used). The request asked about: 8 A100 21:00 ->
23:00 = 16 card-hours (32.00 EUR). Each test runs on both paths of the sum: PostgreSQL's one
statement and the rows summed in Python (SQLite's, the demo's).
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from factories import IdleFindingFactory

from billing.budgets.enforcement import budget_check
from billing.budgets.models import Budget
from billing.services.usage_import import usage_import_reservations
from pools.reclamation.services.scan import allocation_reclaim, reclamation_undo

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rates", "vendor")]
DAY = datetime(2026, 3, 10, tzinfo=UTC)
MARCH = datetime(2026, 3, 1, tzinfo=UTC)


def _reclaim(allocation, *, keep: int, at: datetime):
    """The idle scan's reclaim of ``allocation`` down to ``keep`` cards at ``at``."""
    finding = IdleFindingFactory(allocation=allocation, first_seen_at=DAY.replace(hour=9),
                                 cards_in_use=keep)  # fmt: skip
    assert allocation_reclaim(finding, allocation, keep=keep, why="idle", now=at, actor=None)
    allocation.refresh_from_db()
    return finding


def _figures(team, train_pool, a100, now):
    verdict = budget_check(
        team=team, pool=train_pool, gpu_model=a100, cards=8, starts_at=DAY.replace(hour=21),
        ends_at=DAY.replace(hour=23), now=now,
    )  # fmt: skip
    assert verdict is not None
    data = verdict.data
    return data["dimension"], data["used"], data["committed"], data["requested"]


def _card_hours_budget(team):
    Budget.objects.create(team=team, period="month", starts_on=date(2026, 1, 1),
                          card_hours_limit=Decimal(20), enforcement="warn")  # fmt: skip


def test_a_shrink_after_the_last_import_keeps_the_cards_held_before_it(
    team, train_pool, a100, clock, held
):
    """Shrunk to 1 card at 11:30. At 12:00, before the next import: committed 11:00 -> 11:30
    at 4 cards (2) + 11:30 -> 20:00 at 1 card (8.5) = 10.5 (the latest count alone from 11:00
    read 9). The import at 12:00 charges the same 2 + 0.5: used 14.5, committed 1 x 8 = 8;
    used + committed 22.5 before and after."""
    _card_hours_budget(team)
    _reclaim(held, keep=1, at=clock(11, 30))
    assert held.card_count == 1

    assert _figures(team, train_pool, a100, clock(12)) == ("card_hours", "12", "10.5", "16")
    noon = clock(12)
    usage_import_reservations(start=MARCH, end=noon, now=noon)
    assert _figures(team, train_pool, a100, noon) == ("card_hours", "14.5", "8", "16")


def test_money_committed_after_a_shrink_is_priced_on_the_cards_held(
    team, train_pool, a100, clock, held
):
    """The same 10.5 card-hours at 2.00 EUR = 21.00 EUR committed (18.00 before)."""
    Budget.objects.create(team=team, period="month", starts_on=date(2026, 1, 1),
                          money_limit=Decimal(50), currency="EUR", enforcement="warn")  # fmt: skip
    _reclaim(held, keep=1, at=clock(11, 30))
    assert _figures(team, train_pool, a100, clock(12)) == ("money", "24", "21", "32")


def test_an_undo_gives_the_cards_back_from_the_undo_on(team, train_pool, a100, clock, held):
    """Shrunk to 1 card at 11:30, imported to 12:00 (used 14.5), undone at 12:30 (4 cards to
    20:00 again). At 13:00: committed 12:00 -> 12:30 at 1 card (0.5) + 12:30 -> 20:00 at 4
    (30) = 30.5 (the latest count alone from 12:00 read 32)."""
    from factories import UserFactory

    _card_hours_budget(team)
    finding = _reclaim(held, keep=1, at=clock(11, 30))
    noon = clock(12)
    usage_import_reservations(start=MARCH, end=noon, now=noon)
    reclamation_undo(finding=finding, actor=UserFactory(is_staff=True), now=clock(12, 30))
    held.refresh_from_db()
    assert (held.card_count, held.ends_at) == (4, DAY.replace(hour=20))

    assert _figures(team, train_pool, a100, clock(13)) == ("card_hours", "14.5", "30.5", "16")


def test_an_allocation_reclaimed_whole_counts_its_hours_until_the_import_takes_them(
    team, train_pool, a100, clock, held
):
    """Ended by reclamation at 11:30 (no card in use): 11:00 -> 11:30 at 4 cards = 2 card-hours
    stay committed until the import takes them (it read 0): 12 + 2 + 16 = 30 > 20; after the
    import at 12:10 used 14, committed 0."""
    _card_hours_budget(team)
    _reclaim(held, keep=0, at=clock(11, 30))
    assert (held.status, held.ends_at) == ("reclaimed", DAY.replace(hour=11, minute=30))

    assert _figures(team, train_pool, a100, clock(12)) == ("card_hours", "12", "2", "16")
    later = clock(12, 10)
    usage_import_reservations(start=MARCH, end=later, now=later)
    assert _figures(team, train_pool, a100, later) == ("card_hours", "14", "0", "16")
