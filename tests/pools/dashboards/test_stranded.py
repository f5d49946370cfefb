"""Stranded capacity on the admin dashboard, worked out by hand (issue #20).

Pool dgx: two 8-card A100 SXM nodes with their NVSwitch domain imported. Team nlp holds cards
0-1 of dgx-1 for the first 48 hours of the 4-week horizon (672 h). Then:
- free card-hours: dgx-1 6 × 48 + 8 × 624 = 5 280, dgx-2 8 × 672 = 5 376; 10 656 in all;
- stranded: dgx-1's 6 free cards cannot make a 1 × 8 for 48 h: 6 × 48 = 288 card-hours;
  for 1 × 4: 6 mod 4 = 2 cards × 48 h = 96; for 1 × 2 and 1 × 1: 0;
- to win a whole node back now: move or end the 2 held cards on dgx-1;
- at 2.50 EUR per reserved card-hour: 288 × 2.50 = 720.00 EUR.
"""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone
from factories import AllocationFactory, PoolFactory, TeamFactory, UserFactory, node_with_gpus

from billing.choices import RateKind
from billing.dashboards.costs import stranded_costs
from billing.models import RateCard, RateCardEntry
from pools.choices import AllocationStatus, Scheduler
from pools.dashboards.capacity import DashboardFilters
from pools.dashboards.stranded import stranded_capacity
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db


@pytest.fixture
def dgx(db):
    now = timezone.now().replace(microsecond=0)
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    pool = PoolFactory(slug="dgx", name="DGX", scheduler=Scheduler.SLURM)
    for i in (1, 2):
        node_with_gpus(8, hostname=f"dgx-{i}", pool=pool, nvlink_domains=[list(range(8))])
    AllocationFactory(
        team=TeamFactory(slug="nlp"),
        pool=pool,
        gpu_model=a100,
        card_count=2,
        starts_at=now - timedelta(hours=1),
        ends_at=now + timedelta(hours=48),
        status=AllocationStatus.ACTIVE,
        placement=[{"node": "dgx-1", "gpus": [0, 1]}],
    )
    card = RateCard.objects.create(name="test", currency="EUR", effective_from=date(2020, 1, 1))
    RateCardEntry.objects.create(
        rate_card=card, kind=RateKind.GPU_RESERVED, gpu_model=a100, price=Decimal("2.50")
    )
    return now, a100


def test_stranded_card_hours_and_money_by_hand(dgx):
    now, a100 = dgx
    (row,) = stranded_capacity(filters=DashboardFilters(), now=now)
    assert (row.pool_slug, row.gpu_model_slug, row.cards) == ("dgx", "a100_80g_sxm", 16)
    assert row.free_card_hours == Decimal(10656)
    assert row.stranded_card_hours == Decimal(288)
    assert row.card_hours_for == {1: 0, 2: 0, 4: Decimal(96), 8: Decimal(288)}
    assert row.unknown_topology_card_hours == 0
    assert row.worst_nodes == [("dgx-1", Decimal(288))]
    assert [(w.node, w.cards_to_free, w.target_cards) for w in row.win_back] == [("dgx-1", 2, 8)]
    assert row.stranded_share == Decimal("2.7")  # 288 / 10 656
    (priced,) = stranded_costs([row], now=now)
    assert (priced.price_per_card_hour, priced.amount, priced.currency) == (
        Decimal("2.50"),
        Decimal("720.00"),
        "EUR",
    )


def test_unknown_topology_is_counted_apart(dgx):
    now, a100 = dgx
    pool = PoolFactory(slug="odd", name="Odd", scheduler=Scheduler.SLURM)
    node_with_gpus(2, hostname="odd-1", pool=pool)  # 2 SXM cards: no board the catalogue knows
    rows = {r.pool_slug: r for r in stranded_capacity(filters=DashboardFilters(), now=now)}
    odd = rows["odd"]
    assert odd.unknown_topology_card_hours == Decimal(2 * 672)
    assert odd.stranded_card_hours == 0  # unknown, not stranded and not usable


def test_dashboard_shows_stranded_and_exports_csv(dgx):
    admin = UserFactory(username="admin-stranded", is_staff=True)
    client = Client()
    client.force_login(admin)
    page = client.get("/dashboard/").content.decode()
    assert "Stranded capacity, next 4 weeks" in page
    assert "move or end 2 held cards on dgx-1 for a whole 8" in page
    lines = b"".join(client.get("/dashboard/?export=stranded").streaming_content).decode()
    header, row = lines.strip().splitlines()
    assert header == (
        "pool_slug,gpu_model_slug,cards,free_card_hours,stranded_card_hours,"
        "stranded_for_2_card_hours,stranded_for_4_card_hours,stranded_for_8_card_hours,"
        "unknown_topology_card_hours,price_per_card_hour,amount,currency,win_back"
    )
    cells = row.split(",")
    assert cells[:3] == ["dgx", "a100_80g_sxm", "16"]
    # the page's now is a little after the fixture's: a little under 288 card-hours
    assert Decimal(287) < Decimal(cells[4]) <= Decimal(288)
    assert cells[11] == "EUR"
    assert cells[12] == "dgx-1: free 2 held card(s) for a whole 8"
