"""The capacity dashboards on a small fleet whose numbers are worked out by hand.

Fleet: pool *train* (Slurm, no over-commit) with node trn-1 (up, R550, 4 × A100, one in error)
and trn-2 (drain, R535, 2 × A100). So: total 6, healthy 3 (trn-1's cards not in error),
schedulable 3, usable 3. Team nlp holds 2 cards from yesterday for a week (allocated now 2, free
1); team vision asks for 1 card from tomorrow for a week (pending), so the 8-week peak is 3 =
2 allocated + 1 pending against 3 usable: the pool carries its peak (≥ 85 %) with 0 % spare,
under the 30 % buffer, "thin".
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from factories import (
    AllocationFactory,
    CapacityRequestFactory,
    GpuFactory,
    MembershipFactory,
    NodeFactory,
    PoolFactory,
    RateCardEntryFactory,
    RateCardFactory,
    TeamFactory,
    UserFactory,
)

from billing.choices import ChargeBasis, UsageSource, UsageUnit
from billing.conf import billing_zone
from billing.models import Statement, UsageRecord
from billing.pricing import month_of, previous_month
from pools.capacity.generation import GENERATION_KEY as ALLOCATIONS_GENERATION_KEY
from pools.common.choices import AllocationStatus, GpuHealth, NodeState, Scheduler
from pools.dashboards import capacity as dashboard
from pools.dashboards.demand_history import GENERATION_KEY
from pools.dashboards.stranded import SNAPSHOT_KEY
from pools.inventory.models import GpuModel
from pools.reclamation.models import IdleFinding

pytestmark = pytest.mark.django_db
# Idle detection (issue 7) is built alongside: its IdleFinding may or may not be there yet.


@pytest.fixture
def fleet():
    now = timezone.now()
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    train = PoolFactory(slug="train", name="Train", scheduler=Scheduler.SLURM)
    trn1 = NodeFactory(hostname="trn-1", pool=train, driver_version="550.54.15")
    trn2 = NodeFactory(
        hostname="trn-2", pool=train, state=NodeState.DRAIN, driver_version="535.129.03"
    )
    for i in range(4):
        GpuFactory(node=trn1, index=i, gpu_model=a100,
                   health=GpuHealth.ERROR if i == 3 else GpuHealth.OK)  # fmt: skip
    for i in range(2):
        GpuFactory(node=trn2, index=i, gpu_model=a100, health=GpuHealth.OK)
    nlp, vision = TeamFactory(slug="nlp"), TeamFactory(slug="vision")
    allocation = AllocationFactory(
        team=nlp, pool=train, gpu_model=a100, card_count=2, status=AllocationStatus.ACTIVE,
        starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=6),
    )  # fmt: skip
    CapacityRequestFactory(
        team=vision, pool=train, gpu_model=a100, card_count=1,
        starts_at=now + timedelta(days=1), ends_at=now + timedelta(days=8),
    )  # fmt: skip
    return {"now": now, "pool": train, "a100": a100, "nlp": nlp, "allocation": allocation}


def test_capacity_rows_by_hand(fleet):
    (row,) = dashboard.capacity_rows(filters=dashboard.DashboardFilters(), now=fleet["now"])
    assert (row.pool, row.gpu_model) == ("Train", "A100 SXM4 80GB")
    assert (row.total, row.healthy, row.schedulable, row.usable) == (6, 3, 3, 3)
    assert [(g.driver_group, g.total, g.healthy) for g in row.groups] == [
        ("R535", 2, 0),
        ("R550", 4, 3),
    ]
    assert (row.allocated, row.free) == (2, 1)
    # None ("idle data: not available yet") until idle detection's IdleFinding exists, then 0
    assert row.idle_allocated == 0
    assert (row.peak_held, row.peak_pending) == (2, 1)
    assert row.headroom.level == "thin"
    assert "0% spare" in row.headroom.text


def test_idle_allocated_from_open_findings(fleet):
    # nlp's 2-card allocation, 1 card in use: 1 idle-allocated card
    now = fleet["now"]
    IdleFinding.objects.create(
        allocation=fleet["allocation"], first_seen_at=now, last_seen_at=now, card_count=2,
        cards_in_use=1,
    )  # fmt: skip
    (row,) = dashboard.capacity_rows(filters=dashboard.DashboardFilters(), now=now)
    assert row.idle_allocated == 1
    # the team filter narrows it: nlp holds the idle card, vision none
    for team, idle in (("nlp", 1), ("vision", 0)):
        filters = dashboard.DashboardFilters(team=team)
        (row,) = dashboard.capacity_rows(filters=filters, now=now)
        assert row.idle_allocated == idle


def test_headroom_rules():
    assert dashboard.headroom_flag(usable=8, held=10, pending=0).level == "short"  # 80 % < 85 %
    assert dashboard.headroom_flag(usable=17, held=20, pending=0).level == "thin"  # 85 %, no spare
    assert dashboard.headroom_flag(usable=10, held=6, pending=1).level == "ok"  # 30 % spare
    assert dashboard.headroom_flag(usable=10, held=7, pending=1).level == "thin"  # 20 % spare
    assert dashboard.headroom_flag(usable=10, held=0, pending=0).level == "idle"


def test_filters_narrow_the_rows(fleet):
    now = fleet["now"]
    (row,) = dashboard.capacity_rows(filters=dashboard.DashboardFilters(driver_branch=550), now=now)
    assert (row.total, row.healthy) == (4, 3)
    assert dashboard.capacity_rows(filters=dashboard.DashboardFilters(pool="none"), now=now) == []
    by_team = dashboard.top_teams_by_cards(
        filters=dashboard.DashboardFilters(team="vision"), now=now
    )
    assert by_team == []
    assert dashboard.top_teams_by_cards(filters=dashboard.DashboardFilters(), now=now) == [
        {"team": "Nlp", "slug": "nlp", "cards": 2}
    ]


def test_least_squares_line():
    assert dashboard._least_squares([1.0, 2.0, 3.0]) == (1.0, 1.0)
    # x̄ = 6, ȳ = Y/13; Σ(x−x̄)² = 2(1+4+9+16+25+36) = 182; Σ(x−x̄)(y−ȳ) = 6Y → slope 3Y/91
    intercept, slope = dashboard._least_squares([0.0] * 12 + [91.0])
    assert slope == pytest.approx(3.0)
    assert intercept + slope * 12 == pytest.approx(25.0)  # ȳ + 6 × slope = 7 + 18


def test_forecast_by_hand(fleet):
    # Both requests were submitted now: 2 cards × 7 days + 1 card × 7 days = 21 card-days in
    # the last of 13 weeks. The line through [0 × 12, 21] has slope 3 × 21 / 91 = 9/13 and
    # reaches 25 × 21 / 91 = 75/13 card-days this week. Capacity: 3 usable × 7 = 21 a week,
    # crossed after (21 − 75/13) / (9/13) = 198/9 = 22 weeks.
    now = fleet["now"]
    (forecast,) = dashboard.demand_forecasts(
        filters=dashboard.DashboardFilters(), now=now, usable={("train", "a100_80g_sxm"): 3}
    )
    assert forecast.weekly == [0.0] * 12 + [21.0]
    assert forecast.slope == pytest.approx(9 / 13)
    assert forecast.capacity == 21.0
    assert forecast.runs_out == pytest.approx(now + timedelta(weeks=22), abs=timedelta(seconds=1))
    assert "about 22 weeks" in forecast.text
    (none,) = dashboard.demand_forecasts(filters=dashboard.DashboardFilters(), now=now, usable={})
    assert none.runs_out is None and none.text.startswith("No usable cards")


def _admin_client(django_user_model):
    user = django_user_model.objects.create_user("boss", password="pw", is_staff=True)
    client = Client()
    client.force_login(user)
    return client


def _member_client(team):
    user = UserFactory(username=f"m-{team.slug}")
    MembershipFactory(team=team, user=user)
    client = Client()
    client.force_login(user)
    return client


def _count_queries(client, url) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
        assert response.status_code == 200, response.content[:500]
    return len(queries)


def _grow(nodes: int):
    pool = PoolFactory(slug="grow", scheduler=Scheduler.KUBERNETES)
    l40s = GpuModel.objects.get(slug="l40s")
    for n in range(nodes):
        node = NodeFactory(hostname=f"grow-{n:03d}", pool=pool)
        for i in range(2):
            GpuFactory(node=node, index=i, gpu_model=l40s)
        team = TeamFactory(slug=f"t{n:03d}")
        AllocationFactory(team=team, pool=pool, gpu_model=l40s, status=AllocationStatus.ACTIVE,
                          starts_at=timezone.now() - timedelta(hours=1))  # fmt: skip


def test_query_count_does_not_grow_with_the_fleet(fleet, django_user_model, outside_a_transaction):
    client = _admin_client(django_user_model)
    _grow(5)
    cache.delete(SNAPSHOT_KEY)  # the stranded snapshot: computed by each first view, then read
    small = [_count_queries(client, u) for u in ("/dashboard/", "/dashboard/?part=heatmap")]
    team_small = _count_queries(client, "/teams/nlp/dashboard/")
    _grow_more = [NodeFactory(hostname=f"more-{n:03d}", pool=fleet["pool"]) for n in range(35)]
    for node in _grow_more:
        GpuFactory(node=node, index=0, gpu_model=fleet["a100"])
    for _ in range(35):
        AllocationFactory(team=fleet["nlp"], pool=fleet["pool"], gpu_model=fleet["a100"],
                          status=AllocationStatus.ACTIVE, starts_at=timezone.now())  # fmt: skip
    cache.delete(SNAPSHOT_KEY)
    # the forecast's hourly sums: a commit of the requests above replaces their generation;
    # the test's transaction never commits; so the plan's held cards of the allocations'
    cache.delete(GENERATION_KEY)
    cache.delete(ALLOCATIONS_GENERATION_KEY)
    large = [_count_queries(client, u) for u in ("/dashboard/", "/dashboard/?part=heatmap")]
    assert large == small
    # the snapshot stored: later views read it instead of four report queries; and the
    # capacity table's and the over-commit check's cards come from the census kept per
    # inventory generation (one grouped read of the cards when it changed,
    # pools.inventory.selectors.inventory_census). Neither train x A100 nor grow x L40S holds
    # more cards in all than it has usable, so neither is swept for over-commit. The forecast
    # reads its hourly sums from the cache (pools.dashboards.demand_history): one query less;
    # so do the plan its held cards' daily peaks (two less: the sweep and the allocations a
    # reclamation changed today, pools.capacity.selectors.timeline_peaks) and the over-commit
    # check its pairs' sums (pools.capacity.generation), read as the page reads, outside a
    # transaction.
    assert _count_queries(client, "/dashboard/") == small[0] - 4 - 1 - 1 - 2 - 1
    assert _count_queries(client, "/teams/nlp/dashboard/") == team_small


def test_permissions(fleet, django_user_model, client):
    member = _member_client(fleet["nlp"])
    assert member.get("/dashboard/").status_code == 403
    assert member.get("/teams/nlp/dashboard/").status_code == 200
    assert member.get("/teams/vision/dashboard/").status_code == 404
    assert member.get("/teams/nobody/dashboard/").status_code == 404
    assert client.get("/dashboard/").status_code == 302  # anonymous: sign in first
    admin = _admin_client(django_user_model)
    assert admin.get("/teams/vision/dashboard/").status_code == 200


def test_admin_page_and_htmx_fragment(fleet, django_user_model):
    admin = _admin_client(django_user_model)
    page = admin.get("/dashboard/").content.decode()
    assert "idle data: not available yet" not in page
    assert "Thin buffer" in page and "plan-chart-data" in page
    fragment = admin.get("/dashboard/?pool=train", headers={"HX-Request": "true"})
    assert fragment["Vary"].count("HX-Request") == 1
    assert "<html" not in fragment.content.decode() and "Free now" in fragment.content.decode()
    heat = admin.get("/dashboard/?part=heatmap", headers={"HX-Request": "true"}).content.decode()
    assert 'href="/nodes/trn-1/"' in heat
    assert "/allocations/?pool=train&gpu_model=a100_80g_sxm" in heat
    grid = heat.split('class="heatmap"', 1)[1]  # after the legend
    assert grid.count('class="cell ok"') == 3 and grid.count('class="cell drain"') == 2


def _csv(response) -> list[str]:
    return b"".join(response.streaming_content).decode().strip().splitlines()


def test_csv_exports(fleet, django_user_model):
    admin = _admin_client(django_user_model)
    assert _csv(admin.get("/dashboard/?export=capacity")) == [
        "pool,gpu_model,pool_slug,gpu_model_slug,driver_group,total,healthy,schedulable,usable,"
        "allocated,in_use,in_use_reporting,idle_allocated,free,headroom,mig_cards,mig_slices",
        # no Prometheus: in use unknown; no card in MIG mode
        "Train,A100 SXM4 80GB,train,a100_80g_sxm,all,6,3,3,3,2,,,0,1,thin,0,",
        "Train,A100 SXM4 80GB,train,a100_80g_sxm,R535,2,0,0,,,,,,,,0,",
        "Train,A100 SXM4 80GB,train,a100_80g_sxm,R550,4,3,3,,,,,,,,0,",
    ]
    assert _csv(admin.get("/dashboard/?export=teams-cards")) == ["team,cards_held", "nlp,2"]
    plan = _csv(admin.get("/dashboard/?export=plan"))
    assert len(plan) == 1 + 56 and plan[1].startswith("train,a100_80g_sxm,")
    heat = _csv(admin.get("/dashboard/?export=heatmap"))
    assert heat[0] == "node,pool,node_state,gpu_index,gpu_model,gpu_state,util_pct,cluster"
    assert len(heat) == 1 + 6 and heat[1].split(",")[4] == "a100_80g_sxm"
    assert _csv(admin.get("/dashboard/?export=forecast"))[1].startswith("train,a100_80g_sxm,")
    for table in ("alerts", "teams-cost"):
        assert admin.get(f"/dashboard/?export={table}").status_code == 200


def test_team_dashboard_usage_and_spend(mid_month, fleet):
    """At :data:`MID_MONTH` (pinned before the fleet is built): the allocation's day since
    yesterday is all this month's, and the page's hours are exactly 24, not 24 and the seconds
    the test took (48.001 card-hours on a slow run)."""
    now, allocation, nlp = fleet["now"], fleet["allocation"], fleet["nlp"]
    month = month_of(now, timezone.UTC if hasattr(timezone, "UTC") else now.tzinfo)
    UsageRecord.objects.create(
        team=nlp, gpu_model=fleet["a100"], allocation=allocation, quantity=Decimal(3 * 3600),
        unit=UsageUnit.CARD_SECONDS, basis=ChargeBasis.INCLUDED, month=month,
        period_start=now - timedelta(hours=3), period_end=now, source=UsageSource.SLURM_ACCOUNTING,
        source_id="job-1", created_at=now, updated_at=now,
    )  # fmt: skip
    Statement.objects.create(team=nlp, month=previous_month(month), currency="EUR",
                             usage_amount=Decimal("123.40"), total_amount=Decimal("123.40"),
                             built_at=now)  # fmt: skip
    member = _member_client(nlp)
    page = member.get("/teams/nlp/dashboard/").content.decode()
    # held: 2 cards × 24 h since yesterday = 48 card-hours (time pinned); used 3 → 6 % (kept
    # with its sign)
    assert "48.000" in page and "3.000" in page and "6&nbsp;%" in page
    assert "123.40\u00a0EUR" in page and "no cost data" in page
    rows = _csv(member.get("/teams/nlp/dashboard/?export=allocations"))
    window = f",2,active,{allocation.starts_at.isoformat()},{allocation.ends_at.isoformat()},"
    assert rows[1].endswith(window + "48.000,3.000,6")
    spend = _csv(member.get("/teams/nlp/dashboard/?export=spend"))
    assert spend[1] == f"{previous_month(month):%Y-%m},123.40,EUR,False,False"  # to the cent
    assert spend[2] == f"{month:%Y-%m},,,False,False"  # no rate card: no cost so far either


def test_metrics_needs_no_login(client):
    response = client.get("/metrics")
    assert response.status_code == 200
    assert b"django_http_requests" in response.content


def test_heatmap_csv_has_every_node_not_the_page(fleet, django_user_model, monkeypatch):
    monkeypatch.setattr(dashboard, "HEATMAP_PAGE", 1)  # one node a page on screen
    admin = _admin_client(django_user_model)
    page = admin.get("/dashboard/?part=heatmap", headers={"HX-Request": "true"}).content.decode()
    assert page.count('href="/nodes/') == 1
    rows = _csv(admin.get("/dashboard/?export=heatmap"))[1:]
    assert len(rows) == 6 and len({r.split(",")[0] for r in rows}) == 2


def test_the_page_reads_pools_models_and_the_serving_state_once_each_where_it_can(
    fleet, django_user_model
):
    """Pools and GPU models: the filter form's choices, the names the plan, the capacity table
    and the forecast share (``pool_model_names``), the over-commit check's pairs -- three reads
    of each table (five before: the plan, table and forecast read them each). The serving
    rollups' state: once for the rows and the page (twice before)."""
    client = _admin_client(django_user_model)
    client.get("/dashboard/")
    with CaptureQueriesContext(connection) as ctx:
        assert client.get("/dashboard/").status_code == 200
    sql = [q["sql"] for q in ctx.captured_queries]
    assert sum(' FROM "pools_pool" ' in s for s in sql) == 3
    assert sum(' FROM "pools_gpumodel" ' in s for s in sql) == 3
    assert sum('MAX("pools_servingrollup"."bucket_start")' in s for s in sql) == 1


def test_the_page_reads_this_months_rate_cards_once_for_serving_and_stranded(
    fleet, django_user_model
):
    """The serving efficiency and the stranded capacity's cost both price from this month's
    rate cards: one read of the cards and one of their entries for both (each read them
    before). The top teams by cost so far read them twice more on their own
    (``rate_period_at`` and ``usage_lines_by_team``): three of each (four before)."""
    RateCardEntryFactory(gpu_model=fleet["a100"], price=Decimal("3.00"))
    client = _admin_client(django_user_model)
    client.get("/dashboard/")
    with CaptureQueriesContext(connection) as ctx:
        assert client.get("/dashboard/").status_code == 200
    sql = [q["sql"] for q in ctx.captured_queries]
    assert sum(' FROM "billing_ratecard" ' in s for s in sql) == 3
    assert sum(' FROM "billing_ratecardentry" ' in s for s in sql) == 3


def test_a_month_whose_rate_cards_mix_currencies_is_shown_unpriced(fleet, django_user_model):
    """A EUR card in force from before the month and a USD one from its 2nd day: no single
    price list for the month, so the admin dashboard shows it without serving or stranded costs
    (a 500 before: the serving efficiency raised the rate cards' conflict)."""
    first = month_of(timezone.now(), billing_zone())
    RateCardFactory(currency="EUR", effective_from=first - timedelta(days=40))
    RateCardFactory(currency="USD", effective_from=first + timedelta(days=1))
    admin = _admin_client(django_user_model)
    page = admin.get("/dashboard/")
    assert page.status_code == 200
    assert page.context["stranded"]
    assert all(row.amount is None for row in page.context["stranded"])
