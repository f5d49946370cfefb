"""What a budget check counts as used + committed does not move between hourly reservation
imports: committed starts where each allocation's imported usage ends, not at now.

Clock fixed per step, billing zone UTC, March 2026. Rate card: A100 reserved 2.00 EUR a
card-hour. Team ``nlp`` holds 4 A100, active, priced reserved, 10 March 08:00 -> 20:00 (4 x 12 =
48 card-hours, 96.00 EUR in all). The reservation import last ran at 11:00: it accrued 08:00 ->
11:00, 4 x 3 = 12 card-hours (24.00 EUR). The request asked about: 8 A100 21:00 -> 23:00 = 16
card-hours (32.00 EUR).

- 12:00: used 12, committed 11:00 -> 20:00 = 4 x 9 = 36 (72.00 EUR); 12 + 36 + 16 = 64.
- 12:10, no import: the same 12 and 36 (committed from now was 4 x 8 = 32 at 12:00 and
  4 x 7 h 50 min = 31.33... at 12:10: the 11:00 -> now hours were in neither).
- 12:15, the import runs to 12:15: used 4 x 4.25 = 17, committed 4 x 7.75 = 31; still 48.

Each test runs on both paths of the sum: PostgreSQL's one statement and the rows summed in
Python (SQLite's, the demo's).
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from billing.budgets.enforcement import budget_check
from billing.budgets.models import Budget
from billing.services.usage_import import usage_import_reservations

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rates", "vendor")]
DAY = datetime(2026, 3, 10, tzinfo=UTC)
MARCH = datetime(2026, 3, 1, tzinfo=UTC)


def _figures(team, train_pool, a100, now):
    verdict = budget_check(
        team=team, pool=train_pool, gpu_model=a100, cards=8, starts_at=DAY.replace(hour=21),
        ends_at=DAY.replace(hour=23), now=now,
    )  # fmt: skip
    assert verdict is not None
    data = verdict.data
    return data["dimension"], data["used"], data["committed"], data["requested"], verdict.reason


def test_card_hours_used_and_committed_hold_still_between_imports(
    team, train_pool, a100, clock, held
):
    Budget.objects.create(team=team, period="month", starts_on=date(2026, 1, 1),
                          card_hours_limit=Decimal(50), enforcement="warn")  # fmt: skip

    at_noon = _figures(team, train_pool, a100, clock(12))
    ten_later = _figures(team, train_pool, a100, clock(12, 10))

    assert at_noon[:4] == ("card_hours", "12", "36", "16")
    assert ten_later == at_noon
    assert "12.00 card-hours used + 36.00 committed to approved allocations" in at_noon[4]

    quarter_past = clock(12, 15)
    usage_import_reservations(start=MARCH, end=quarter_past, now=quarter_past)
    assert _figures(team, train_pool, a100, quarter_past)[:4] == ("card_hours", "17", "31", "16")


def test_money_used_and_committed_hold_still_between_imports(team, train_pool, a100, clock, held):
    """Money: 24.00 used + 72.00 committed + 32.00 requested = 128.00 > 100.00 EUR, at 12:00
    and at 12:10 alike."""
    Budget.objects.create(team=team, period="month", starts_on=date(2026, 1, 1),
                          money_limit=Decimal(100), currency="EUR", enforcement="warn")  # fmt: skip

    at_noon = _figures(team, train_pool, a100, clock(12))
    assert at_noon[:4] == ("money", "24", "72", "32")
    assert _figures(team, train_pool, a100, clock(12, 10)) == at_noon


def test_an_allocation_ended_since_the_last_import_still_counts_its_last_hours(
    team, train_pool, a100, clock, held
):
    """Released at 11:30 (ended, its window cut to 11:30): 11:00 -> 11:30 is not imported yet,
    so 4 x 0.5 = 2 card-hours stay committed until the import takes them: 12 + 2 + 16 = 30 >
    25. (Counting holding allocations only, from now, it read 0.)"""
    held.status, held.ends_at = "ended", DAY.replace(hour=11, minute=30)
    held.save(update_fields=["status", "ends_at"])
    Budget.objects.create(team=team, period="month", starts_on=date(2026, 1, 1),
                          card_hours_limit=Decimal(25), enforcement="warn")  # fmt: skip

    assert _figures(team, train_pool, a100, clock(12))[:4] == ("card_hours", "12", "2", "16")
    usage_import_reservations(start=MARCH, end=clock(12, 10), now=clock(12, 10))
    assert _figures(team, train_pool, a100, clock(12, 10))[:4] == ("card_hours", "14", "0", "16")
