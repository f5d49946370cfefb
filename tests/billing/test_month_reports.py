"""The finance month's showback and top allocations: the sums the database makes on PostgreSQL
equal the card timeline priced in Python (the way SQLite, the demo's database, runs them), and
both equal the amounts worked out by hand. Query counts do not grow with the month's rows."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from unittest import mock

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from kit import utc

from billing import selectors

pytestmark = pytest.mark.django_db
OCT = date(2026, 10, 1)


@pytest.fixture
def month_of_allocations(rates, train_pool, team, a100):
    """On ``train`` (8 A100, reserved 2.00 EUR per card-hour), in October 2026 (UTC):

    - A: 2 cards, 1 Oct 00:00 → 3 Oct 00:00: 2 × 48 h × 2.00 = 192.00;
    - B: 1 card, 30 Sep 12:00 → 1 Oct 12:00: 12 h inside October, 1 × 12 × 2.00 = 24.00;
    - C: 4 cards, 10 Oct → 12 Oct, reclaimed to 1 card at 11 Oct 00:00:
      4 × 24 × 2.00 + 1 × 24 × 2.00 = 240.00;
    - D: cancelled, 8 cards all month: not charged.
    Each of A-C has its reserved usage record for the part inside October.
    """
    from factories import AllocationFactory

    from billing.models import UsageRecord
    from pools.models import IdleFinding

    def allocation(cards, start, end, status="active"):
        return AllocationFactory(
            team=team, pool=train_pool, gpu_model=a100, card_count=cards,
            starts_at=start, ends_at=end, status=status,
        )  # fmt: skip

    a = allocation(2, utc(2026, 10, 1), utc(2026, 10, 3))
    b = allocation(1, utc(2026, 9, 30, 12), utc(2026, 10, 1, 12))
    c = allocation(1, utc(2026, 10, 10), utc(2026, 10, 12))
    allocation(8, utc(2026, 10, 1), utc(2026, 11, 1), status="cancelled")
    IdleFinding.objects.create(
        allocation=c, state="reclaimed", first_seen_at=utc(2026, 10, 10, 12),
        last_seen_at=utc(2026, 10, 11), reclaimed_at=utc(2026, 10, 11), card_count=4,
        cards_in_use=1,
    )  # fmt: skip
    for alloc, start, cards_seconds in (
        (a, utc(2026, 10, 1), 2 * 48 * 3600),
        (b, utc(2026, 10, 1), 1 * 12 * 3600),
        (c, utc(2026, 10, 10), (4 * 24 + 24) * 3600),
    ):
        UsageRecord.objects.create(
            team=team, gpu_model=a100, allocation=alloc, quantity=cards_seconds,
            unit="card-seconds", basis="reserved", month=OCT, period_start=start,
            period_end=min(alloc.ends_at, utc(2026, 11, 1)), source="reservation",
            source_id=f"allocation-{alloc.pk}", created_at=start, updated_at=start,
        )  # fmt: skip
    return a, b, c


def _both_ways(fn):
    """``fn()`` on PostgreSQL, then with the portable path (as on SQLite)."""
    sql = fn()
    with mock.patch.object(connection, "vendor", "sqlite"):
        python = fn()
    return sql, python


def test_top_allocations_in_sql_equal_the_card_timeline(month_of_allocations):
    a, b, c = month_of_allocations
    sql, python = _both_ways(lambda: selectors.top_allocations(month=OCT, limit=2))
    expected = [(c.pk, Decimal("240.00")), (a.pk, Decimal("192.00"))]
    assert [(r["allocation"].pk, r["amount"]) for r in sql] == expected
    assert [(r["allocation"].pk, r["amount"]) for r in python] == expected
    everything = selectors.top_allocations(month=OCT)
    assert [(r["allocation"].pk, r["amount"], r["card_hours"]) for r in everything] == [
        (c.pk, Decimal("240.00"), 120), (a.pk, Decimal("192.00"), 96), (b.pk, Decimal("24.00"), 12)
    ]  # fmt: skip


def test_idle_cost_in_sql_equals_the_card_timeline(month_of_allocations):
    sql, python = _both_ways(lambda: selectors.pool_idle_costs(month=OCT))
    # capacity 8 × 744 h × 2.00 = 11,904.00; held 192 + 24 + 240 = 456.00; 456 / 11904 = 3.83 %
    for rows in (sql, python):
        assert [(r.pool.slug, r.capacity_cost, r.allocated_cost, r.idle_cost, r.utilisation)
                for r in rows] == [("train", Decimal("11904.00"), Decimal("456.00"),
                                    Decimal("11448.00"), Decimal("3.8"))]  # fmt: skip


def test_idle_cost_leaves_out_cards_nobody_can_be_given_and_nets_used_hours(
    month_of_allocations, team, a100, l40s
):
    """Idle cost = capacity − allocated − used outside allocations, at the reserved rate.

    ``train`` gains a drained node (4 A100) and a down one (2 A100), and one of its 8 cards is in
    error: it counts 7 cards. Pool ``spare`` holds 1 A100 on an up node. October 2026 (UTC) is
    744 h; A100 reserved 2.00 EUR per card-hour.

    - train: capacity 7 × 744 × 2.00 = 10,416.00; allocated 456.00 (A 192 + B 24 + C 240);
    - a job outside any allocation: 3 A100 × 10 h = 30 card-hours × 2.00 = 60.00, split 7 : 1
      by the pools' A100s: train 52.50, spare 7.50;
    - train idle 10,416.00 − 456.00 − 52.50 = 9,907.50; utilisation 508.50 / 10,416 = 4.88 %;
    - spare: capacity 1 × 744 × 2.00 = 1,488.00, idle 1,488.00 − 7.50 = 1,480.50, 0.50 %;
    - an L40S job outside allocations (no pool holds L40S) and an A100 job inside one
      (basis included) change nothing.
    """
    from factories import PoolFactory, node_with_gpus

    from billing.models import UsageRecord
    from pools.inventory.models import Gpu

    train = month_of_allocations[0].pool
    node_with_gpus(4, hostname="trn-02", pool=train, state="drain")
    node_with_gpus(2, hostname="trn-03", pool=train, state="down")
    Gpu.objects.filter(node__hostname="trn-01", index=7).update(health="error")
    node_with_gpus(1, hostname="spr-01", pool=PoolFactory(slug="spare", name="Spare"))
    for model, basis, key in ((a100, "used", "j1"), (l40s, "used", "j2"), (a100, "included", "j3")):
        UsageRecord.objects.create(
            team=team, gpu_model=model, quantity=3 * 10 * 3600, unit="card-seconds", basis=basis,
            month=OCT, period_start=utc(2026, 10, 5), period_end=utc(2026, 10, 5, 10),
            source="slurm-accounting", source_id=key, created_at=utc(2026, 10, 5),
            updated_at=utc(2026, 10, 5),
        )  # fmt: skip

    sql, python = _both_ways(lambda: selectors.pool_idle_costs(month=OCT))
    expected = [
        ("spare", Decimal("1488.00"), Decimal("0.00"), Decimal("7.50"), Decimal("1480.50"),
         Decimal("0.5")),
        ("train", Decimal("10416.00"), Decimal("456.00"), Decimal("52.50"), Decimal("9907.50"),
         Decimal("4.9")),
    ]  # fmt: skip
    for rows in (sql, python):
        assert [(r.pool.slug, r.capacity_cost, r.allocated_cost, r.used_outside_cost,
                 r.idle_cost, r.utilisation) for r in rows] == expected  # fmt: skip


def test_finance_month_sums_and_pages_in_constant_queries(admin_page, rates):
    from factories import TeamFactory

    from billing.services.statements import statement_build

    def count():
        with CaptureQueriesContext(connection) as ctx:
            page = admin_page.get("/costs/finance/2026-10/")
        assert page.status_code == 200
        return len(ctx.captured_queries), page

    for n in range(3):
        statement_build(team=TeamFactory(slug=f"t{n}", cost_centre="CC-1"), month=OCT)
    count()  # the first read of this inventory generation counts the pools' cards (kept after)
    few, _ = count()
    for n in range(3, 60):
        statement_build(team=TeamFactory(slug=f"t{n:02d}", cost_centre="CC-1"), month=OCT)
    many, page = count()
    assert many == few
    assert page.context["statement_count"] == 60
    assert len(page.context["statements"].object_list) == 50  # one page of 50
    assert page.context["statements"].paginator.num_pages == 2


def test_team_month_links_the_users_other_teams(team, team_member):
    from django.test import Client
    from factories import MembershipFactory, TeamFactory

    MembershipFactory(team=TeamFactory(slug="vision", name="Vision"), user=team_member)
    TeamFactory(slug="audio", name="Audio")  # not alice's: never linked
    client = Client()
    client.force_login(team_member)
    page = client.get("/costs/nlp/2026-10/").content.decode()
    assert ' · <a href="/costs/vision/2026-10/">Vision</a>' in page
    assert "/costs/audio/" not in page and 'href="/costs/nlp/2026-10/"' not in page


def test_finance_chart_names_the_ten_dearest_teams_and_sums_the_rest():
    from factories import StatementFactory, TeamFactory

    # 13 teams costing 10, 20, ..., 130 EUR: the chart names 130 down to 40 and sums
    # 10 + 20 + 30 = 60 into one bar; the month's total stays 10 × (1 + ... + 13) = 910.
    for n in range(1, 14):
        StatementFactory(
            team=TeamFactory(slug=f"t{n:02d}", name=f"Team {n:02d}"), month=OCT,
            usage_amount=Decimal(10 * n), total_amount=Decimal(10 * n),
        )  # fmt: skip
    data = selectors.finance_month(month=OCT)
    assert [(i["label"], i["amount"]) for i in data["by_team"]] == [
        *((f"Team {n:02d}", Decimal(10 * n)) for n in range(13, 3, -1)),
        ("3 other teams", Decimal(60)),
    ]
    assert data["total"] == Decimal(910)


def test_statements_csv_reads_every_line_in_one_query():
    from factories import StatementFactory, StatementLineFactory

    from billing.models import Statement
    from billing.reports import statement_csv_rows

    def rows_and_queries():
        with CaptureQueriesContext(connection) as ctx:
            rows = statement_csv_rows(Statement.objects.select_related("team").order_by("pk"))
        return rows, len(ctx.captured_queries)

    def add_statement():
        statement = StatementFactory(month=OCT)
        StatementLineFactory(statement=statement, position=1)
        StatementLineFactory(statement=statement, position=2)

    add_statement()
    rows, few = rows_and_queries()
    assert len(rows) == 1 + 2  # header, two lines
    for _ in range(5):
        add_statement()
    rows, many = rows_and_queries()
    assert len(rows) == 1 + 6 * 2
    assert few == many == 2  # the statements, then all their lines
    # each line's priced quantity x unit price is its amount: 10 card-hours x 1.25 = 12.50
    header = rows[0]
    for row in rows[1:]:
        line = dict(zip(header, row, strict=True))
        assert Decimal(line["priced_quantity"]) * Decimal(line["unit_price"]) == Decimal("12.50")
        assert (line["priced_quantity"], line["unit_price"], line["amount"]) == (
            "10.000", "1.25", "12.50")  # fmt: skip


def test_team_month_links_only_a_pool_admins_own_teams(team, pool_admin):
    from django.test import Client
    from factories import MembershipFactory, TeamFactory

    MembershipFactory(team=TeamFactory(slug="vision", name="Vision"), user=pool_admin)
    TeamFactory(slug="audio", name="Audio")  # visible to staff, but not their team: not linked
    client = Client()
    client.force_login(pool_admin)
    page = client.get("/costs/nlp/2026-10/").content.decode()
    assert ' · <a href="/costs/vision/2026-10/">Vision</a>' in page
    assert "/costs/audio/" not in page
    assert 'href="/costs/finance/2026-10/">Finance view</a>' in page


def test_idle_cost_csv_has_the_table_in_plain_decimals(month_of_allocations, admin_page):
    """``?export=idle`` on the finance month: the idle table's row, worked out above by hand
    (capacity 8 × 744 h × 2.00 = 11904.00, held 456.00, idle 11448.00, 3.8 %), as plain
    decimals: no thousands space, no exponent, the currency in its own column."""
    page = admin_page.get("/costs/finance/2026-10/")
    assert 'href="?export=idle" data-idle-csv>CSV</a>' in page.content.decode()
    # no statement yet, so no currency and nothing to draw: each chart is a sentence, not empty
    # axes, and nothing reads "0.2 None"
    assert page.content.decode().count("data-chart-empty") == 3
    assert "None" not in page.content.decode()
    response = admin_page.get("/costs/finance/2026-10/", {"export": "idle"})
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert 'filename="idle-cost-2026-10.csv"' in response["Content-Disposition"]
    assert response.content.decode().splitlines() == [
        "month,pool,capacity_cost,allocated_cost,used_outside_cost,idle_cost,utilisation_pct,"
        "currency,hours_counted_to",
        "2026-10,train,11904.00,456.00,0.00,11448.00,3.8,EUR,2026-11-01T00:00:00+00:00",
    ]
    assert "Burst pools are rented and paid per use, so they carry no idle cost" in (
        page.content.decode()
    )


def test_top_allocations_csv_is_the_table_on_both_month_pages(
    month_of_allocations, admin_page, team, train_pool, a100
):
    """``?export=top``: the top allocations worked out above by hand (C 240.00 EUR over
    4 × 24 + 1 × 24 = 120 card-hours, A 192.00 over 96, B 24.00 over 12; D cancelled, absent),
    dearest first, as plain decimals, card-hours to the 3 places the page's table shows them
    with (120.000, not 120.0); the team's month gives the same rows."""
    a, b, c = month_of_allocations
    head = (
        "month,allocation,team,pool,gpu_model,cards,mig_profile,reserved_card_hours,cost,currency"
    )
    rows = [
        f"2026-10,{c.pk},{team.slug},{train_pool.slug},{a100.slug},1,,120.000,240.00,EUR",
        f"2026-10,{a.pk},{team.slug},{train_pool.slug},{a100.slug},2,,96.000,192.00,EUR",
        f"2026-10,{b.pk},{team.slug},{train_pool.slug},{a100.slug},1,,12.000,24.00,EUR",
    ]
    page = admin_page.get("/costs/finance/2026-10/").content.decode()
    assert 'href="?export=top" data-top-csv>CSV</a>' in page
    table = page.split("Top allocations by cost", 1)[1].split("</table>", 1)[0]
    for hours, cost in (("120.000", "240.00"), ("96.000", "192.00"), ("12.000", "24.00")):
        assert f'<td class="num">{hours}</td><td class="num">{cost}\u00a0EUR</td>' in table
    for url, name in (
        ("/costs/finance/2026-10/", "top-allocations-2026-10.csv"),
        (f"/costs/{team.slug}/2026-10/", f"top-allocations-{team.slug}-2026-10.csv"),
    ):
        response = admin_page.get(url, {"export": "top"})
        assert response["Content-Type"] == "text/csv; charset=utf-8"
        assert f'filename="{name}"' in response["Content-Disposition"]
        assert response.content.decode().splitlines() == [head, *rows]


def test_idle_cost_of_the_current_month_counts_hours_to_now_and_leaves_out_burst_pools(
    month_of_allocations,
):
    """Now is 11 Oct 2026 00:00 UTC: October has run 10 days = 240 h, not 744.

    - train capacity 8 × 240 h × 2.00 = 3,840.00;
    - held: A 192.00 (all before now), B 24.00, C 4 cards × 24 h (10 → 11 Oct) × 2.00 = 192.00
      (its 1 card after 11 Oct has not happened): 408.00;
    - idle 3,840.00 − 408.00 = 3,432.00; utilisation 408 / 3,840 = 10.625 % → 10.6.
    - ``cloud``, a burst pool of 2 A100 (rented, paid per use), has no idle cost and no row.
    """
    from factories import PoolFactory, node_with_gpus

    cloud = PoolFactory(slug="cloud", name="Cloud", scheduler="kubernetes", burst=True,
                        slurm_partition="")  # fmt: skip
    node_with_gpus(2, hostname="cld-01", pool=cloud)
    with mock.patch("billing.selectors.timezone.now", return_value=utc(2026, 10, 11)):
        sql, python = _both_ways(lambda: selectors.pool_idle_costs(month=OCT))
    for rows in (sql, python):
        assert [(r.pool.slug, r.capacity_cost, r.allocated_cost, r.idle_cost, r.utilisation)
                for r in rows] == [("train", Decimal("3840.00"), Decimal("408.00"),
                                    Decimal("3432.00"), Decimal("10.6"))]  # fmt: skip


def test_idle_cost_counts_the_cards_again_once_the_inventory_changes(month_of_allocations):
    """The pools' schedulable cards are kept per inventory generation: a card put in error
    after a first read is not idle capacity in the next one. ``train``: 8 A100 → 7; October
    2026 is 744 h at 2.00 EUR: 8 × 744 × 2 = 11,904.00, then 7 × 744 × 2 = 10,416.00."""
    from pools.inventory.models import Gpu

    (before,) = selectors.pool_idle_costs(month=OCT)
    Gpu.objects.filter(node__hostname="trn-01", index=7).update(health="error")
    (after,) = selectors.pool_idle_costs(month=OCT)
    assert (before.capacity_cost, after.capacity_cost) == (Decimal("11904.00"), Decimal("10416.00"))
    with CaptureQueriesContext(connection) as ctx:
        selectors.pool_idle_costs(month=OCT)
    counts = [q for q in ctx.captured_queries if 'COUNT("pools_gpu"."id")' in q["sql"]]
    # kept on PostgreSQL (its inventory stamp); SQLite, without one, counts every time
    assert len(counts) == (0 if connection.vendor == "postgresql" else 1)


def test_idle_cost_keeps_a_past_months_held_cards_until_an_allocation_is_written(
    month_of_allocations, train_pool, team, a100, django_capture_on_commit_callbacks,
    outside_a_transaction,
):  # fmt: skip
    """Read as the page reads, outside a transaction. A past month's held card-seconds are kept
    per allocations' generation: read again, no
    allocation is read; once a new allocation commits, it counts. Held in October (fixture):
    A 192.00 + B 24.00 + C 240.00 = 456.00; then E, 1 card for 20 → 21 Oct (24 h at 2.00 EUR):
    + 48.00 = 504.00."""
    from factories import AllocationFactory

    (before,) = selectors.pool_idle_costs(month=OCT)
    with CaptureQueriesContext(connection) as ctx:
        (again,) = selectors.pool_idle_costs(month=OCT)
    assert [q["sql"] for q in ctx.captured_queries if '"pools_allocation"' in q["sql"]] == []
    with django_capture_on_commit_callbacks(execute=True):
        AllocationFactory(
            team=team, pool=train_pool, gpu_model=a100, card_count=1,
            starts_at=utc(2026, 10, 20), ends_at=utc(2026, 10, 21), status="active",
        )  # fmt: skip
    (after,) = selectors.pool_idle_costs(month=OCT)
    assert (before.allocated_cost, again.allocated_cost, after.allocated_cost) == (
        Decimal("456.00"), Decimal("456.00"), Decimal("504.00"),
    )  # fmt: skip
