"""The elastic what-if prices the home pool's burst card-hours as the allocation's statement
would: by its pricing method (reserved: the burst price; on use: the on-use price, the burst
cards serving the load; tokens: nothing, its tokens pay), and the burst pool's at that pool's
price under every method. Worked by hand from the rate card below."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from factories import AllocationFactory, PoolFactory

from billing.choices import RateKind
from billing.elastic_costs import burst_whatif_money
from billing.services.rates import rate_card_create
from pools.common.choices import AllocationStatus, PricingMethod, Scheduler
from pools.elastic.models import BurstOptIn, ElasticPolicy
from pools.elastic.services import (
    WhatIfRun,
    WhatIfSource,
    elastic_burst_whatif,
    whatif_burst_json,
)
from pools.elastic.whatif import WhatIf

pytestmark = pytest.mark.django_db


@pytest.fixture
def rented(db):
    return PoolFactory(slug="rented-infer", name="Rented", scheduler=Scheduler.KUBERNETES,
                       slurm_partition="", burst=True)  # fmt: skip


@pytest.fixture
def card(l40s, rented):
    """EUR: L40S reserved 8.00, burst 9.00, on use 3.50 per card-hour; 2.90 per card-hour in
    burst pool Rented."""
    return rate_card_create(
        name="methods", currency="EUR", effective_from=date(2020, 1, 1),
        gpu_prices={(l40s.pk, RateKind.GPU_RESERVED): Decimal("8.00"),
                    (l40s.pk, RateKind.GPU_BURST): Decimal("9.00"),
                    (l40s.pk, RateKind.GPU_USED): Decimal("3.50")},
        pool_prices={(RateKind.POOL_BURST, rented.pk, l40s.pk): Decimal("2.90")},
    )  # fmt: skip


def _whatif(team, infer_pool, l40s, rented, method):
    """Home pool ``infer``: 8 L40S; another team holds 4, our floor is 2 -> the home pool holds
    4 of ours. Replayed load: 2 cards, then 6 for 2 h, then 2 (4 h in all): at home 4 - 2 = 2
    cards x 2 h = 4 card-hours above the floor, in the burst pool 6 - 4 = 2 x 2 h = 4."""
    now = timezone.now()
    window = {"status": AllocationStatus.ACTIVE, "starts_at": now - timedelta(days=1),
              "ends_at": now + timedelta(days=1), "pool": infer_pool,
              "gpu_model": l40s}  # fmt: skip
    AllocationFactory(card_count=4, **window)
    allocation = AllocationFactory(team=team, card_count=2, pricing_method=method, **window)
    policy = ElasticPolicy.objects.create(allocation=allocation, ceiling_cards=6, cards_held=2)
    BurstOptIn.objects.create(team=team, pool=rented)
    t0 = (now - timedelta(hours=5)).timestamp()
    timeline = ((t0, 2), (t0 + 3600, 6), (t0 + 3 * 3600, 2))
    result = WhatIf(1, 1, 2, 6, 16.0, 6, 24.0, 8.0, 0.0, 0.0, 4.0, (), timeline)
    start, end = (datetime.fromtimestamp(t, tz=UTC) for t in (t0, t0 + 4 * 3600))
    run = WhatIfRun(result, WhatIfSource.RECORDED, start, end, 240)
    return elastic_burst_whatif(policy=policy, run=run, now=now)


# What the statement charges for the same card-hours, by method (4 at home, 4 in Rented):
#   reserved: home burst line 4 x 9.00 = 36.00; burst-pool line 4 x 2.90 = 11.60 -> 47.60
#   used:     home burst line 0; used line 4 x 3.50 = 14.00; burst-pool 11.60       -> 25.60
#   tokens:   home burst line 0, usage included (its tokens pay); burst-pool 11.60  -> 11.60
# Without burst the burst-pool line goes (its 4 card-hours are not served).
BY_METHOD = [
    (PricingMethod.RESERVED, "9.00", "gpu-burst", "burst price", "47.60", "36.00"),
    (PricingMethod.USED, "3.50", "gpu-used", "on-use price", "25.60", "14.00"),
    (PricingMethod.TOKENS, "0", "tokens", "paid by its tokens", "11.60", "0.00"),
]


@pytest.mark.parametrize(("method", "price", "basis", "label", "with_", "without"), BY_METHOD)
def test_the_whatif_charges_the_home_card_hours_as_the_statement_would(
    team, infer_pool, l40s, rented, card, method, price, basis, label, with_, without
):
    found = _whatif(team, infer_pool, l40s, rented, method)
    money = found["money"]
    assert money["with_burst"]["amount"] == Decimal(with_)
    assert money["without_burst"]["amount"] == Decimal(without)
    assert (money["home_price"], money["burst_pool_price"]) == (Decimal(price), Decimal("2.90"))
    assert (money["home_price_basis"], money["home_price_label"]) == (basis, label)
    block = whatif_burst_json(found)  # what the API answers and the page reads
    assert (block["with_burst"]["amount"], block["without_burst"]["amount"]) == (with_, without)
    assert (block["home_price_basis"], block["home_price_label"]) == (basis, label)
    assert block["texts"]["home_price_label"] == label
    assert (block["texts"]["with_burst"], block["texts"]["without_burst"]) == (
        f"{with_}\u00a0EUR",
        f"{without}\u00a0EUR",
    )


def test_an_allocation_priced_on_use_without_an_on_use_price_is_unpriced_not_burst(
    team, infer_pool, l40s, rented
):
    """The card has the burst price (9.00) but no on-use price: the home card-hours are
    unknown (its statement's used line would be unpriced), never the burst price's 36.00."""
    rate_card_create(
        name="no-used", currency="EUR", effective_from=date(2020, 1, 1),
        gpu_prices={(l40s.pk, RateKind.GPU_BURST): Decimal("9.00")},
        pool_prices={(RateKind.POOL_BURST, rented.pk, l40s.pk): Decimal("2.90")},
    )  # fmt: skip
    money = _whatif(team, infer_pool, l40s, rented, PricingMethod.USED)["money"]
    assert (money["with_burst"]["amount"], money["without_burst"]["amount"]) == (None, None)
    assert money["reason"] == "the rate card has no on-use price for this GPU model"


def test_the_pricer_defaults_to_the_burst_price(l40s, rented, card):
    """Called as before, without a method: reserved. 1.5 card-hours x 9.00 = 13.50 at home,
    0.5 x 2.90 = 1.45 in the burst pool: 14.95 EUR with burst."""
    money = burst_whatif_money(gpu_model_id=l40s.pk, burst_pool_id=rented.pk,
                               home_card_hours=Decimal("1.5"), burst_card_hours=Decimal("0.5"),
                               now=timezone.now())  # fmt: skip
    assert (money["with_burst"]["amount"], money["without_burst"]["amount"]) == (
        Decimal("14.95"),
        Decimal("13.50"),
    )
    assert money["home_price_basis"] == "gpu-burst"
