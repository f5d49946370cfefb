"""A past month's held card-seconds (the showback's allocated cost) are kept per allocations'
generation outside a transaction, and read afresh inside one
(:func:`pools.common.generation.cached`): a transaction that wrote an allocation sees it
charged though the page kept the month under the same token, and once it rolls back the page
reads what it kept. Amounts by hand."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from factories import AllocationFactory
from kit import utc

from billing import selectors

pytestmark = pytest.mark.django_db
OCT = date(2026, 10, 1)


class RolledBack(Exception):
    pass


def test_the_showback_charges_the_transactions_own_allocation(
    rates, train_pool, team, a100, read_as_a_page
):
    """``train``: 8 A100, reserved 2.00 EUR per card-hour; October 2026 (UTC) is 744 h, ended.
    Capacity 8 × 744 × 2.00 = 11,904.00. NLP holds 2 cards 1 → 3 October: 2 × 48 × 2.00 =
    192.00, idle 11,712.00. Inside the transaction 1 card more, 10 → 11 October: 1 × 24 × 2.00
    = 48.00, allocated 240.00, idle 11,664.00."""

    def hold(cards, start, end):
        AllocationFactory(team=team, pool=train_pool, gpu_model=a100, card_count=cards,
                          starts_at=start, ends_at=end, status="active")  # fmt: skip

    def read():
        [row] = selectors.pool_idle_costs(month=OCT)
        return row.capacity_cost, row.allocated_cost, row.idle_cost

    hold(2, utc(2026, 10, 1), utc(2026, 10, 3))
    with read_as_a_page():
        with CaptureQueriesContext(connection) as first:
            kept = read()
        with CaptureQueriesContext(connection) as second:
            assert read() == kept
    assert len(second.captured_queries) < len(first.captured_queries)  # the held sums kept
    assert kept == (Decimal("11904.00"), Decimal("192.00"), Decimal("11712.00"))

    with pytest.raises(RolledBack), transaction.atomic():
        hold(1, utc(2026, 10, 10), utc(2026, 10, 11))
        assert read() == (Decimal("11904.00"), Decimal("240.00"), Decimal("11664.00"))
        raise RolledBack
    with read_as_a_page():
        assert read() == kept
