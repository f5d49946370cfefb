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
from django.db import connection
from django.test import Client
from django.utils import timezone
from factories import AllocationFactory, PoolFactory, TeamFactory, UserFactory, node_with_gpus

from billing.choices import RateKind
from billing.dashboards.costs import stranded_costs
from billing.models import RateCard, RateCardEntry
from pools.capacity.models import Allocation
from pools.common.choices import AllocationStatus, Scheduler
from pools.dashboards.capacity import DashboardFilters
from pools.dashboards.stranded import (
    SNAPSHOT_EVERY,
    stranded_capacity,
    stranded_for_dashboard,
    stranded_snapshot_refresh,
)
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


def test_dashboard_reads_the_stored_snapshot_until_recomputed(dgx):
    now, a100 = dgx
    admin = UserFactory(username="admin-snapshot", is_staff=True)
    client = Client()
    client.force_login(admin)
    first = client.get("/dashboard/").content.decode()
    assert "move or end 2 held cards on dgx-1 for a whole 8" in first
    assert "Recompute" in first and "(just now; every 10 min)" in first  # computed by this view
    # the 2 held cards go away: the page keeps showing the snapshot it stored, with its time
    Allocation.objects.update(status=AllocationStatus.ENDED)
    assert "move or end 2 held cards on dgx-1" in client.get("/dashboard/").content.decode()
    # Recompute runs the task (eagerly in tests) and the page reads the new snapshot: nothing
    # is stranded any more (two whole free NVSwitch nodes)
    done = client.post("/dashboard/stranded/recompute/", follow=True).content.decode()
    assert "Stranded capacity recomputed." in done
    assert "move or end" not in done
    (row,) = stranded_for_dashboard(filters=DashboardFilters(), now=now).rows
    assert row.stranded_card_hours == 0


def test_snapshot_narrowed_to_a_pool_equals_the_report_computed_for_it(dgx):
    now, a100 = dgx
    pool = PoolFactory(slug="odd", name="Odd", scheduler=Scheduler.SLURM)
    node_with_gpus(2, hostname="odd-1", pool=pool)
    stored = stranded_snapshot_refresh(now=now)
    assert {r.pool_slug for r in stored.rows} == {"dgx", "odd"}
    narrowed = stranded_for_dashboard(filters=DashboardFilters(pool="dgx"), now=now)
    assert narrowed.computed_at == now
    assert narrowed.rows == stranded_capacity(filters=DashboardFilters(pool="dgx"), now=now)
    by_model = stranded_for_dashboard(filters=DashboardFilters(gpu_model="h100_sxm"), now=now)
    assert by_model.rows == []


def test_recompute_is_for_pool_admins_and_posts_only(dgx):
    client = Client()
    client.force_login(UserFactory(username="member-snapshot"))
    assert client.post("/dashboard/stranded/recompute/").status_code == 403
    client.force_login(UserFactory(username="admin-get", is_staff=True))
    assert client.get("/dashboard/stranded/recompute/").status_code == 405


def test_the_snapshot_task_is_on_the_beat_schedule():
    from django.conf import settings

    entry = settings.CELERY_BEAT_SCHEDULE["stranded-snapshot"]
    assert entry["task"] == "pools.dashboards.tasks.stranded_snapshot_task"
    assert timedelta(seconds=entry["schedule"]) == SNAPSHOT_EVERY


def test_stranded_report_query_count_does_not_grow_with_the_fleet(dgx, django_assert_num_queries):
    now, a100 = dgx
    queries = 4 if connection.vendor == "postgresql" else 3  # PostgreSQL: nodes apart
    with django_assert_num_queries(queries):
        stranded_capacity(filters=DashboardFilters(), now=now)
    pool = PoolFactory(slug="more", name="More", scheduler=Scheduler.SLURM)
    for i in range(12):
        node_with_gpus(8, hostname=f"more-{i}", pool=pool, nvlink_domains=[list(range(8))])
        AllocationFactory(
            pool=pool,
            gpu_model=a100,
            card_count=1,
            starts_at=now,
            ends_at=now + timedelta(days=2),
            status=AllocationStatus.ACTIVE,
            placement=[{"node": f"more-{i}", "gpus": [i % 8]}],
        )
    with django_assert_num_queries(queries):
        rows = stranded_capacity(filters=DashboardFilters(), now=now)
    more = next(r for r in rows if r.pool_slug == "more")
    # each node: 7 free cards for 48 h (all stranded for a 1 x 8), then 8 free for 624 h
    assert more.stranded_card_hours == Decimal(12 * 7 * 48)


def test_unplaced_allocations_hold_cards_only_over_their_own_span(dgx):
    """Three unplaced allocations in the horizon besides the fixture's placed one: 8 cards over
    hours [100, 148), 4 over [300, 348) and 4 over [348, 396) (touching, so two spans). Each is
    laid only while it runs: free card-hours 10 656 - 8 x 48 - 4 x 48 - 4 x 48 = 9 888. (Laid
    at the peak for the whole 4 weeks, as before, the report said 10 656 - 8 x 672 at best.)
    Stranded: the fixture's 288; the 8 cards take a whole node (no stranding); each 4 goes to
    dgx-1 by best fit (ties by name) and leaves 4 cards no 1 x 8 can use for 48 h: 2 x 192."""
    now, a100 = dgx
    pool = Allocation.objects.get().pool
    for cards, lo, hi in ((8, 100, 148), (4, 300, 348), (4, 348, 396)):
        AllocationFactory(
            pool=pool,
            gpu_model=a100,
            card_count=cards,
            starts_at=now + timedelta(hours=lo),
            ends_at=now + timedelta(hours=hi),
            status=AllocationStatus.APPROVED,
        )
    (row,) = stranded_capacity(filters=DashboardFilters(), now=now)
    assert row.free_card_hours == Decimal(9888)
    assert row.stranded_card_hours == Decimal(288 + 2 * 192)


def test_the_api_gives_the_dashboards_stranded_capacity(dgx, admin_api):
    """The same figures as the dashboard (worked out in the module docstring): 288 stranded
    card-hours of 10 656 free (2.7 %), 96 for a 1 × 4, priced at 2.50 EUR = 720.00 EUR; the
    request's now is a little after the fixture's, so the card-hours are a little under."""
    now, a100 = dgx
    stranded_snapshot_refresh(now=now)  # the beat's snapshot, computed at the fixture's now

    body = admin_api.get("/api/v1/stranded-capacity/").json()

    assert body["computed_at"] == now.isoformat().replace("+00:00", "Z")
    assert body["horizon_end"] == (now + timedelta(weeks=4)).isoformat().replace("+00:00", "Z")
    (row,) = body["results"]
    assert {k: row[k] for k in ("pool", "gpu_model", "cards", "currency")} == {
        "pool": "dgx", "gpu_model": "a100_80g_sxm", "cards": 16, "currency": "EUR"}  # fmt: skip
    assert (row["free_card_hours"], row["stranded_card_hours"], row["stranded_percent"]) == (
        "10656.000", "288.000", "2.7")  # fmt: skip
    assert (row["stranded_for_2_card_hours"], row["stranded_for_4_card_hours"],
            row["stranded_for_8_card_hours"], row["unknown_topology_card_hours"]) == (
        "0.000", "96.000", "288.000", "0.000")  # fmt: skip
    assert (row["price_per_card_hour"], row["amount"]) == ("2.5000", "720.00")
    assert row["worst_nodes"] == [{"node": "dgx-1", "stranded_card_hours": "288.000"}]
    assert row["win_back"] == [
        {"node": "dgx-1", "stranded": 6, "target_cards": 8, "cards_to_free": 2}]  # fmt: skip


def test_the_apis_card_hours_are_3_places_half_up():
    """As every other card-hours figure of the API (``"2.025"``): 2.0245 card-h is "2.025"
    (half-even would give "2.024"; the 2 places before, "2.02"), 287.9695 is "287.970"."""
    from billing.dashboards.api import StrandedRowSerializer, WorstNodeSerializer

    fields = StrandedRowSerializer().fields
    names = ["free_card_hours", "stranded_card_hours", "stranded_for_2_card_hours",
             "stranded_for_4_card_hours", "stranded_for_8_card_hours",
             "unknown_topology_card_hours"]  # fmt: skip
    assert {n: fields[n].to_representation(Decimal("2.0245")) for n in names} == dict.fromkeys(
        names, "2.025"
    )
    worst = WorstNodeSerializer().fields["stranded_card_hours"]
    assert worst.to_representation(Decimal("287.9695")) == "287.970"


def test_the_stranded_api_filters_by_slug_and_refuses_unknown_ones(dgx, admin_api):
    now, a100 = dgx
    PoolFactory(slug="odd", name="Odd", scheduler=Scheduler.SLURM)
    stranded_snapshot_refresh(now=now)

    dgx_only = admin_api.get("/api/v1/stranded-capacity/?pool=dgx&gpu_model=a100_80g_sxm")
    none = admin_api.get("/api/v1/stranded-capacity/?pool=odd").json()["results"]
    bad = admin_api.get("/api/v1/stranded-capacity/?pool=NLP&driver_branch=999")

    assert [r["pool"] for r in dgx_only.json()["results"]] == ["dgx"]
    assert none == []
    assert bad.status_code == 400
    assert bad.json()["code"] == "invalid_input"
    assert set(bad.json()["errors"]) == {"pool", "driver_branch"}


def test_the_stranded_api_is_for_pool_admins(dgx, member_api):
    response = member_api.get("/api/v1/stranded-capacity/")

    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
