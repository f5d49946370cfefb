"""A budget's run-out forecast (:func:`billing.budgets.periods.forecast`) after a reclamation
shrank an allocation mid-month: it extrapolates the period's use so far, which is the imported
reservation records, so the hours before the shrink count the cards held then and none is
priced at today's ``card_count``.

Billing zone UTC, March 2026 (the ``held`` fixture): team ``nlp`` holds 4 A100, active, priced
reserved, 10 March 08:00 -> 20:00, imported up to 11:00; card-hours limit 20 a month.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from factories import IdleFindingFactory

from billing.budgets.models import Budget
from billing.budgets.selectors import budget_statuses
from billing.services.usage_import import usage_import_reservations
from pools.reclamation.services.scan import allocation_reclaim

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rates")]
MARCH = datetime(2026, 3, 1, tzinfo=UTC)


def test_the_run_out_extrapolates_the_cards_held_before_and_after_the_shrink(team, clock, held):
    """Shrunk to 1 card at 11:30, imported at 12:00: used 4 × 3.5 h + 1 × 0.5 h = 14.5
    card-hours (today's 1 card over 4 h would be 4). At 12:00 on 10 March, 9 × 24 + 12 = 228 h
    into the month: 14.5 / 228 card-hours an hour, the 5.5 left last 5.5 × 228 / 14.5 =
    86.4828 h = 311,338 s (rounded) = 3 d 14:28:58 → 14 March 02:28:58."""
    budget = Budget.objects.create(team=team, period="month", starts_on=date(2026, 1, 1),
                                   card_hours_limit=Decimal(20), enforcement="warn")  # fmt: skip
    finding = IdleFindingFactory(allocation=held, first_seen_at=clock(9), cards_in_use=1)
    assert allocation_reclaim(finding, held, keep=1, why="idle", now=clock(11, 30), actor=None)
    noon = clock(12)
    usage_import_reservations(start=MARCH, end=noon, now=noon)
    status = budget_statuses([budget], now=noon)[budget.pk]
    assert status.card_hours.used == Decimal("14.5")
    assert status.run_out_at == datetime(2026, 3, 14, 2, 28, 58, tzinfo=UTC)
