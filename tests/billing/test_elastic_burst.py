"""Elastic burst card-hours: metered from the cards held over time, their own statement line,
priced at the rate card's burst price or, without one, its reserved price."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest
from broker_support import catalogue_loaded
from factories import AllocationFactory
from kit import utc

from billing.choices import ChargeBasis, RateKind
from billing.models import UsageRecord
from billing.services.rates import rate_card_create
from billing.services.statements import statement_build
from billing.services.usage_import import usage_import_elastic_burst, usage_import_reservations
from pools.common.choices import AllocationStatus
from pools.elastic.models import ElasticPolicy, ScaleEvent

pytestmark = pytest.mark.django_db

T0 = utc(2026, 10, 5, 8)  # allocation 08:00 - 18:00 on 5 Oct


@pytest.fixture
def elastic(team, infer_pool, l40s):
    allocation = AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=2,
                                   starts_at=T0, ends_at=T0 + timedelta(hours=10),
                                   status=AllocationStatus.ENDED)  # fmt: skip
    policy = ElasticPolicy.objects.create(allocation=allocation, ceiling_cards=6, cards_held=2)
    # up to 6 at 09:00, down to 4 at 11:00, back to the floor at 13:00; a hold in between
    for hours, action, cards in [(1, "up", 6), (2, "hold", 6), (3, "down", 4), (5, "down", 2)]:
        at = T0 + timedelta(hours=hours)
        ScaleEvent.objects.create(policy=policy, decided_at=at, effective_at=at, action=action,
                                  reason="test", cards_from=0, cards_to=cards)  # fmt: skip
    return allocation


def test_burst_card_seconds_and_the_reserved_price_by_default(team, elastic, rates, l40s):
    window = {"start": utc(2026, 10, 1), "end": utc(2026, 11, 1), "now": utc(2026, 10, 20)}
    usage_import_reservations(**window)
    usage_import_elastic_burst(**window)
    again = usage_import_elastic_burst(**window)
    assert (again.records_created, again.records_unchanged) == (0, 1)
    burst = UsageRecord.objects.get(basis=ChargeBasis.BURST)
    # (6 - 2) x 2 h + (4 - 2) x 2 h = 12 card-hours = 43,200 card-seconds
    assert burst.quantity == Decimal(43200)
    statement = statement_build(team=team, month=date(2026, 10, 1))
    lines = {line.basis: line for line in statement.lines.all()}
    assert lines[ChargeBasis.RESERVED].quantity == Decimal(20)  # 2 cards x 10 h
    assert lines[ChargeBasis.RESERVED].amount == Decimal("160.00")  # x 8.00 EUR
    assert lines[ChargeBasis.BURST].quantity == Decimal(12)
    assert lines[ChargeBasis.BURST].unit_price == Decimal("8.00")  # the reserved price
    assert lines[ChargeBasis.BURST].amount == Decimal("96.00")


def test_a_burst_price_on_the_card_wins(team, elastic, l40s):
    rate_card_create(name="burst", currency="EUR", effective_from=date(2026, 1, 1),
                     gpu_prices={(l40s.pk, RateKind.GPU_RESERVED): Decimal("8.00"),
                                 (l40s.pk, RateKind.GPU_BURST): Decimal("5.00")})  # fmt: skip
    usage_import_elastic_burst(start=utc(2026, 10, 1), end=utc(2026, 11, 1), now=utc(2026, 11, 2))
    statement = statement_build(team=team, month=date(2026, 10, 1))
    burst = statement.lines.get(basis=ChargeBasis.BURST)
    assert (burst.quantity, burst.unit_price, burst.amount) == (
        Decimal(12), Decimal("5.00"), Decimal("60.00"),
    )  # fmt: skip


@pytest.fixture
def catalogue():
    """The GPU catalogue, loaded again before the fixtures read it: a transactional test may
    start from a database the one before it flushed."""
    catalogue_loaded()


@pytest.mark.django_db(transaction=True)
def test_the_burst_import_runs_outside_a_callers_transaction(catalogue, elastic):
    """Beat's usage import (and the demo's clock) call it with no transaction open: it opens its
    own, as the reservation import does, for the source lock it takes (it raised
    "billing_lock('usage-import:elastic-burst') needs a transaction")."""
    report = usage_import_elastic_burst(start=utc(2026, 10, 1), end=utc(2026, 11, 1),
                                        now=utc(2026, 11, 2))  # fmt: skip
    assert report.records_created == 1  # the allocation's October burst
