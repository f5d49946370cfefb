"""An elastic allocation's cards above its floor, charged as burst card-hours, are held capacity
in the pool's idle cost (allocated), not idle: the idle table and the statement count them alike.

The month, worked out by hand. Pool ``infer``: 2 nodes x 4 L40S, 8 cards, all schedulable; rate
card ``test``: L40S reserved 8.00 EUR per card-hour, no burst price (burst is charged at the
reserved price); October 2026 (UTC) is 744 h.

- allocation E of team ``nlp``, elastic: floor 2 L40S, 5 Oct 08:00 -> 18:00, 10 h: 2 x 10 = 20
  card-hours held at the floor;
- its scale events: 6 cards from 09:00, 4 from 11:00, back to 2 at 13:00: above the floor
  (6 - 2) x 2 h + (4 - 2) x 2 h = 8 + 4 = 12 card-hours, charged as burst.

Idle cost, at the reserved rate: capacity 8 x 744 x 8.00 = 47,616.00; allocated (20 + 12) x 8.00
= 256.00; used outside allocations 0.00; idle 47,616.00 - 256.00 = 47,360.00; utilisation
256.00 / 47,616.00 = 0.5376... % -> 0.5. Leaving the burst out (as before) gave allocated 160.00,
idle 47,456.00, 0.3 %: the 12 charged card-hours counted as idle.
"""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest
from factories import AllocationFactory
from kit import idle_rows, utc

from billing.choices import ChargeBasis
from billing.services.statements import statement_build
from billing.services.usage_import import usage_import_elastic_burst, usage_import_reservations
from pools.common.choices import AllocationStatus
from pools.elastic.models import ElasticPolicy, ScaleEvent

pytestmark = pytest.mark.django_db

OCT = date(2026, 10, 1)
T0 = utc(2026, 10, 5, 8)
WINDOW = {"start": utc(2026, 10, 1), "end": utc(2026, 11, 1), "now": utc(2026, 11, 2)}


@pytest.fixture
def elastic(rates, team, infer_pool, l40s):
    """Allocation E (module docstring), its month's reservation and burst imported."""
    allocation = AllocationFactory(
        team=team, pool=infer_pool, gpu_model=l40s, card_count=2,
        starts_at=T0, ends_at=T0 + timedelta(hours=10), status=AllocationStatus.ENDED,
    )  # fmt: skip
    policy = ElasticPolicy.objects.create(allocation=allocation, ceiling_cards=6, cards_held=2)
    for hours, action, cards in [(1, "up", 6), (3, "down", 4), (5, "down", 2)]:
        at = T0 + timedelta(hours=hours)
        ScaleEvent.objects.create(policy=policy, decided_at=at, effective_at=at, action=action,
                                  reason="test", cards_from=0, cards_to=cards)  # fmt: skip
    usage_import_reservations(**WINDOW)
    usage_import_elastic_burst(**WINDOW)
    return allocation


def test_charged_burst_card_hours_count_as_allocated_not_idle(elastic):
    assert idle_rows(OCT) == [
        ("infer", Decimal("47616.00"), Decimal("256.00"), Decimal("0.00"), Decimal("47360.00"),
         Decimal("0.5")),
    ]  # fmt: skip


def test_the_statement_charges_the_card_hours_the_idle_cost_counts(elastic, team):
    lines = {line.basis: line for line in statement_build(team=team, month=OCT).lines.all()}
    assert (lines[ChargeBasis.RESERVED].quantity, lines[ChargeBasis.BURST].quantity) == (
        Decimal(20), Decimal(12),
    )  # fmt: skip


def test_page_and_csv_show_the_same_numbers(elastic, admin_page):
    page = admin_page.get("/costs/finance/2026-10/").content.decode()
    row = page[page.index("<td>Inference</td>") :].split("</tr>")[0]
    for amount in ("47 616.00", "256.00", "47 360.00", "0.5 %"):
        assert amount in row.replace("\u202f", " ").replace("\xa0", " ")
    response = admin_page.get("/costs/finance/2026-10/", {"export": "idle"})
    assert response.content.decode().splitlines()[1] == (
        "2026-10,infer,47616.00,256.00,0.00,47360.00,0.5,EUR,2026-11-01T00:00:00+00:00"
    )


def test_an_on_use_allocations_burst_usage_counts_once(rates, team, infer_pool, l40s):
    """E priced on use, the same scaling; pod p on 4 L40S of ``inf-01`` 09:00 -> 13:00 and q on
    2 of ``inf-02`` 09:00 -> 11:00: 4 x 4 + 2 x 2 = 20 card-hours used in E, its whole burst
    used. No burst record (its statement charges the usage as used). Allocated: the floor, 20
    card-hours x 8.00 = 160.00; used beyond its floor of 2: 20 - 2 x 4 = 12 card-hours x 8.00 =
    96.00; idle 47,616.00 - 160.00 - 96.00 = 47,360.00, utilisation 0.5 %, as for the reserved
    E. Before, the 12 card-hours were burst and used beyond: allocated 256.00, idle 47,264.00,
    0.7 %."""
    from prometheus_support import gpu_pod

    from billing.services.prometheus_import import usage_import_kubernetes
    from pools.common.choices import PricingMethod
    from scheduler_adapters.prometheus_fake import FakePrometheus

    allocation = AllocationFactory(
        team=team, pool=infer_pool, gpu_model=l40s, card_count=2, pricing_method=PricingMethod.USED,
        starts_at=T0, ends_at=T0 + timedelta(hours=10), status=AllocationStatus.ENDED,
    )  # fmt: skip
    policy = ElasticPolicy.objects.create(allocation=allocation, ceiling_cards=6, cards_held=2)
    for hours, action, cards in [(1, "up", 6), (3, "down", 4), (5, "down", 2)]:
        at = T0 + timedelta(hours=hours)
        ScaleEvent.objects.create(policy=policy, decided_at=at, effective_at=at, action=action,
                                  reason="test", cards_from=0, cards_to=cards)  # fmt: skip
    nine, eleven, one = (T0 + timedelta(hours=h) for h in (1, 3, 5))
    pods = [gpu_pod("p", "inf-01", 4, nine, one), gpu_pod("q", "inf-02", 2, nine, eleven)]
    usage_import_reservations(**WINDOW)
    usage_import_elastic_burst(**WINDOW)
    usage_import_kubernetes(metrics=FakePrometheus(series=pods), **WINDOW)
    assert idle_rows(OCT) == [
        ("infer", Decimal("47616.00"), Decimal("160.00"), Decimal("96.00"), Decimal("47360.00"),
         Decimal("0.5")),
    ]  # fmt: skip
