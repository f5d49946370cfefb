"""Issue 38: a reserved allocation of MIG slices is billed at each slice's share of a card, the
share a Slurm job's MIG GRES is metered at (one rule: ``pools.capacity.slices.slice_share``).

By hand: 2 × ``2g.20gb`` of an A100 for 3 h = 2 × 2/7 × 10,800 s = 43,200/7 card-seconds
= 6,171.428571 (6 places, the record's) = 1.714286 card-hours; at the test card's A100
reserved price 2.00 EUR per card-hour, 12/7 × 2.00 = 3.428571… → 3.43 EUR. A Slurm job of
``gres/gpu:a100_2g.20gb=2`` over the same 3 h is metered at the same 6,171.428571.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from factories import AllocationFactory
from kit import utc

from billing.choices import ChargeBasis, UsageSource
from billing.models import UsageRecord
from billing.sacct import SacctFile
from billing.selectors import top_allocations
from billing.services.usage_import import usage_import_reservations, usage_import_slurm
from pools.common.choices import AllocationStatus, PricingMethod

pytestmark = pytest.mark.django_db

WINDOW = {"start": utc(2026, 10, 1), "end": utc(2026, 11, 1), "now": utc(2026, 11, 2)}
SHARE_SECONDS = Decimal("6171.428571")


def test_a_reserved_slice_allocation_is_billed_at_its_share(team, train_pool, a100, rates):
    slices = AllocationFactory(
        team=team, pool=train_pool, gpu_model=a100, card_count=2, mig_profile="2g.20gb",
        starts_at=utc(2026, 10, 5, 9), ends_at=utc(2026, 10, 5, 12),
        status=AllocationStatus.ENDED, pricing_method=PricingMethod.RESERVED,
    )  # fmt: skip
    whole = AllocationFactory(
        team=team, pool=train_pool, gpu_model=a100, card_count=2,
        starts_at=utc(2026, 10, 6, 9), ends_at=utc(2026, 10, 6, 12),
        status=AllocationStatus.ENDED, pricing_method=PricingMethod.RESERVED,
    )  # fmt: skip
    usage_import_reservations(**WINDOW)
    records = {
        r.allocation_id: r.quantity for r in UsageRecord.objects.filter(basis=ChargeBasis.RESERVED)
    }
    assert records == {slices.pk: SHARE_SECONDS, whole.pk: Decimal(2 * 10800)}
    rows = {row["allocation"].pk: row for row in top_allocations(month=date(2026, 10, 1))}
    # 12/7 card-hours × 2.00 = 3.43; 6 card-hours × 2.00 = 12.00
    assert rows[slices.pk]["amount"] == Decimal("3.43")
    assert rows[whole.pk]["amount"] == Decimal("12.00")


def test_a_slurm_job_on_the_same_slices_is_metered_the_same(team, train_pool):
    text = (
        "JobID|State|Account|Partition|Start|End|ElapsedRaw|AllocTRES\n"
        "2001|COMPLETED|nlp|train|2026-10-05T09:00:00|2026-10-05T12:00:00|10800|"
        "billing=8,cpu=4,gres/gpu:a100_2g.20gb=2,gres/gpu=2,node=1\n"
    )
    usage_import_slurm(scheduler=SacctFile(text), **WINDOW)
    record = UsageRecord.objects.get(source=UsageSource.SLURM_ACCOUNTING)
    assert record.quantity == SHARE_SECONDS
