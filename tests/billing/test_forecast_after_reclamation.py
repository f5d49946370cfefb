"""The month's cost forecast (:func:`billing.dashboards.costs.teams_cost_so_far`) after a
reclamation shrank an allocation mid-month: the month so far at the cards it held (the imported
reservation records, :mod:`pools.reclamation.card_timeline`), the hours ahead at the cards it
holds now, and the hours between the last hourly import and the shrink at the cards held then.

Billing zone UTC, December 2026, L40S reserved at 1.25 EUR a card-hour. Team ``nlp`` holds 4
L40S, active, priced reserved, 1 Dec 00:00 -> 21 Dec 00:00; a reclamation shrinks it to 1 card
on 10 Dec at 06:00. Whenever the import ran, the month holds 4 × (9 × 24 + 6) = 888 card-hours
before the shrink and 1 × (10 × 24 + 18) = 258 after: 1,146 card-hours × 1.25 = 1,432.50 EUR.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from factories import AllocationFactory, IdleFindingFactory, RateCardEntryFactory, RateCardFactory

from billing.dashboards.costs import teams_cost_so_far
from billing.services.usage_import import usage_import_reservations
from pools.common.choices import AllocationStatus, IdleFindingState, PricingMethod
from pools.inventory.models import GpuModel
from pools.reclamation.services.scan import allocation_reclaim

pytestmark = pytest.mark.django_db

DEC_1 = datetime(2026, 12, 1, tzinfo=UTC)


def dec10(hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 12, 10, hour, minute, tzinfo=UTC)


@pytest.fixture
def four(team, settings):
    """The 4 L40S of the module docstring (not yet shrunk) and the rate card."""
    settings.BILLING_TIME_ZONE = "UTC"
    card = RateCardFactory(effective_from=date(2026, 12, 1))
    RateCardEntryFactory(rate_card=card, price=Decimal("1.25"))
    return AllocationFactory(
        team=team, card_count=4, gpu_model=GpuModel.objects.get(slug="l40s"),
        status=AllocationStatus.ACTIVE, pricing_method=PricingMethod.RESERVED,
        starts_at=DEC_1, ends_at=datetime(2026, 12, 21, tzinfo=UTC),
    )  # fmt: skip


def _shrink(allocation, *, keep: int, at: datetime):
    finding = IdleFindingFactory(allocation=allocation, state=IdleFindingState.OPEN,
                                 first_seen_at=dec10(2), last_seen_at=dec10(5))  # fmt: skip
    assert allocation_reclaim(finding, allocation, keep=keep, why="idle", now=at, actor=None)
    allocation.refresh_from_db()
    assert allocation.card_count == keep


def test_imported_after_the_shrink(team, four):
    """The import ran at 12:00, after the shrink. To date (the records): 4 × 222 + 1 × 6 = 894
    card-hours × 1.25 = 1,117.50 EUR. Ahead: 12:00 -> 21 Dec 00:00 = 252 h × 1 card (now) =
    252 card-hours × 1.25 = 315.00. Forecast 1,432.50 (at the old 4 cards ahead: 2,377.50)."""
    _shrink(four, keep=1, at=dec10(6))
    usage_import_reservations(start=DEC_1, end=dec10(12), now=dec10(12))
    cost = teams_cost_so_far(team_ids=[team.pk], now=dec10(12))[team.pk]
    assert cost.to_date == Decimal("1117.50")
    assert cost.reserved_ahead_card_hours == Decimal(252)
    assert cost.forecast == Decimal("1432.50")


def test_imported_before_the_shrink(team, four):
    """The import ran at 05:00, the shrink at 06:00, now 06:30 (the next import not yet run).
    To date: 4 × 221 = 884 card-hours × 1.25 = 1,105.00 EUR. Ahead from 05:00: 4 cards to the
    shrink (4 card-hours) + 1 card × 258 h = 262 card-hours × 1.25 = 327.50. Forecast 1,432.50,
    as after the next import. Today's 1 card from 05:00 said 259 card-hours: 1,428.75."""
    usage_import_reservations(start=DEC_1, end=dec10(5), now=dec10(5))
    _shrink(four, keep=1, at=dec10(6))
    cost = teams_cost_so_far(team_ids=[team.pk], now=dec10(6, 30))[team.pk]
    assert cost.to_date == Decimal("1105.00")
    assert cost.reserved_ahead_card_hours == Decimal(262)
    assert cost.forecast == Decimal("1432.50")


def test_reads_the_card_changes_in_one_query(team, four):
    """Eight queries: the statement path's and the rate card, the allocations with where their
    import stopped, and their reclamations and undos (one query, whatever the number of
    allocations; seven before the forecast read them)."""
    usage_import_reservations(start=DEC_1, end=dec10(5), now=dec10(5))
    _shrink(four, keep=1, at=dec10(6))
    with CaptureQueriesContext(connection) as counted:
        teams_cost_so_far(team_ids=[team.pk], now=dec10(6, 30))
    assert len(counted) == 8


def test_mig_slices_ahead_count_their_share_of_a_card(team, settings):
    """7 × ``1g.10gb`` A100 slices (each 1/7 of a card), reserved at 2.00 EUR a card-hour, 1 Dec
    00:00 -> 21 Dec 00:00, imported to 10 Dec 12:00. To date 7 × 1/7 × 228 h = 228 card-hours
    × 2.00 = 456.00; ahead 1 card × 252 h = 252 card-hours = 504.00; forecast 960.00, the
    month's line as the import will count it (7 cards ahead said 1,764 card-hours: 3,984.00)."""
    settings.BILLING_TIME_ZONE = "UTC"
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    card = RateCardFactory(effective_from=date(2026, 12, 1))
    RateCardEntryFactory(rate_card=card, gpu_model=a100, price=Decimal("2.00"))
    AllocationFactory(
        team=team, card_count=7, gpu_model=a100, mig_profile="1g.10gb",
        status=AllocationStatus.ACTIVE, pricing_method=PricingMethod.RESERVED,
        starts_at=DEC_1, ends_at=datetime(2026, 12, 21, tzinfo=UTC),
    )  # fmt: skip
    usage_import_reservations(start=DEC_1, end=dec10(12), now=dec10(12))
    cost = teams_cost_so_far(team_ids=[team.pk], now=dec10(12))[team.pk]
    assert cost.to_date == Decimal("456.00")
    assert cost.reserved_ahead_card_hours == Decimal(252)
    assert cost.forecast == Decimal("960.00")
