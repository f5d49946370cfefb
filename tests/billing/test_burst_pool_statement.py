"""Burst pools and extra charges on the statement (issue 35): burst-pool card-hours at the burst
pool's price, shared storage per GB-month and egress per GB, each its own line, worked by hand;
the storage / egress CSV importer keeps good lines and reports bad ones."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest
from factories import AllocationFactory, PoolFactory
from kit import utc

from billing.choices import ChargeBasis, RateKind, UsageSource
from billing.models import UsageRecord
from billing.reports import CSV_COLUMNS, statement_csv_rows, statement_pdf
from billing.services.extra_charges import extra_charges_import
from billing.services.rates import rate_card_create
from billing.services.statements import statement_build
from billing.services.usage_import import usage_import_elastic_burst, usage_import_reservations
from pools.common.choices import AllocationStatus, Scheduler
from pools.elastic.models import ElasticPolicy, ScaleEvent

pytestmark = pytest.mark.django_db

T0 = utc(2026, 10, 5, 8)  # the elastic allocation: 08:00 - 18:00 UTC on 5 Oct 2026
OCTOBER = date(2026, 10, 1)


@pytest.fixture
def rented(db):
    return PoolFactory(slug="rented-infer", name="Rented", scheduler=Scheduler.KUBERNETES,
                       slurm_partition="", burst=True)  # fmt: skip


@pytest.fixture
def card(l40s, rented):
    """EUR from 2026-01-01: L40S reserved 8.00 / card-hour; in the burst pool 2.90 /
    card-hour; storage 0.02 / GB-month (every pool); egress 0.09 / GB, 0.05 in the burst pool."""
    return rate_card_create(
        name="burst", currency="EUR", effective_from=date(2026, 1, 1),
        gpu_prices={(l40s.pk, RateKind.GPU_RESERVED): Decimal("8.00")},
        pool_prices={
            (RateKind.POOL_BURST, rented.pk, l40s.pk): Decimal("2.90"),
            (RateKind.STORAGE_GB_MONTH, None, None): Decimal("0.02"),
            (RateKind.EGRESS_GB, None, None): Decimal("0.09"),
            (RateKind.EGRESS_GB, rented.pk, None): Decimal("0.05"),
        },
    )  # fmt: skip


@pytest.fixture
def bursting(team, infer_pool, l40s, rented):
    """Floor 2 in the home pool; at 09:00 up to 10 cards, 8 of them in the burst pool (home
    full); at 12:30 back to the floor (the 8 burst cards handed back)."""
    allocation = AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=2,
                                   starts_at=T0, ends_at=T0 + timedelta(hours=10),
                                   status=AllocationStatus.ENDED)  # fmt: skip
    policy = ElasticPolicy.objects.create(allocation=allocation, ceiling_cards=10, cards_held=2)
    for at, action, cards, burst in [
        (T0 + timedelta(hours=1), "up", 10, 8),
        (T0 + timedelta(hours=4, minutes=30), "down", 2, 0),
    ]:
        ScaleEvent.objects.create(policy=policy, decided_at=at, effective_at=at, action=action,
                                  reason="test", cards_from=0, cards_to=cards,
                                  burst_pool=rented, burst_cards_to=burst)  # fmt: skip
    return allocation


CSV = """team,pool,charge,quantity,start,end
nlp,,storage,500,2026-10-01T00:00:00+00:00,2026-10-16T12:00:00+00:00
nlp,rented-infer,egress,120,2026-10-01,2026-11-01
"""


def test_a_statement_with_burst_pool_storage_and_egress_lines(team, bursting, card, rented):
    window = {"start": utc(2026, 10, 1), "end": utc(2026, 11, 1), "now": utc(2026, 11, 2)}
    usage_import_reservations(**window)
    usage_import_elastic_burst(**window)
    report = extra_charges_import(text=CSV, now=window["now"])
    assert (report.lines, report.created, report.rejected) == (2, 2, [])

    statement = statement_build(team=team, month=OCTOBER)
    lines = {line.basis: line for line in statement.lines.all()}
    # floor: 2 cards x 10 h = 20 card-hours x 8.00 = 160.00 EUR
    reserved = lines[ChargeBasis.RESERVED]
    assert (reserved.quantity, reserved.amount) == (Decimal(20), Decimal("160.00"))
    # all 8 cards above the floor sat in the burst pool: no home burst line
    assert ChargeBasis.BURST not in lines
    # burst pool: 8 cards x 3.5 h (09:00 - 12:30) = 28 card-hours x 2.90 = 81.20 EUR
    burst = lines[ChargeBasis.BURST_POOL]
    assert (burst.pool, burst.quantity, burst.unit_price, burst.amount) == (
        rented, Decimal(28), Decimal("2.90"), Decimal("81.20"),
    )  # fmt: skip
    assert burst.label == "L40S in Rented"
    # storage: 500 GB for 15.5 of October's 31 days = 0.5 month -> 250 GB-months x 0.02
    # = 5.00 EUR (no pool: the price for every pool)
    storage = lines[ChargeBasis.STORAGE]
    assert (storage.unit, storage.quantity, storage.unit_price, storage.amount) == (
        "gb-months", Decimal(250), Decimal("0.02"), Decimal("5.00"),
    )  # fmt: skip
    # egress: 120 GB x 0.05 (the burst pool's own price, not 0.09) = 6.00 EUR
    egress = lines[ChargeBasis.EGRESS]
    assert (egress.unit, egress.quantity, egress.unit_price, egress.amount) == (
        "gb", Decimal(120), Decimal("0.05"), Decimal("6.00"),
    )  # fmt: skip
    # 160.00 + 81.20 + 5.00 + 6.00 = 252.20 EUR
    assert (statement.total_amount, statement.currency) == (Decimal("252.20"), "EUR")
    assert statement.warnings == []

    rows = statement_csv_rows([statement])
    by_basis = {row[CSV_COLUMNS.index("basis")]: row for row in rows[1:]}
    pool_at, price_unit_at = CSV_COLUMNS.index("pool"), CSV_COLUMNS.index("price_unit")
    assert by_basis["burst-pool"][pool_at] == "rented-infer"
    assert by_basis["storage"][price_unit_at] == "GB-month"
    assert by_basis["egress"][CSV_COLUMNS.index("amount")] == "6.00"

    # the finance month's "Cost by GPU" chart names storage and egress as the team page does:
    # L40S 160.00 + 81.20 = 241.20, storage 5.00, egress 6.00
    from billing.selectors import finance_month

    assert finance_month(month=OCTOBER)["by_gpu_model"] == [
        {"label": "L40S", "amount": Decimal("241.20")},
        {"label": "Network egress", "amount": Decimal("6.00")},
        {"label": "Shared storage", "amount": Decimal("5.00")},
    ]


def test_a_burst_pool_without_its_price_is_unpriced_not_reserved(team, bursting, l40s, rented):
    """A card without the burst pool's price: the 28 card-hours are a warning, never billed at
    the home pool's price (rented capacity has its own)."""
    rate_card_create(name="plain", currency="EUR", effective_from=date(2026, 1, 1),
                     gpu_prices={(l40s.pk, RateKind.GPU_RESERVED): Decimal("8.00")})  # fmt: skip
    usage_import_elastic_burst(start=utc(2026, 10, 1), end=utc(2026, 11, 1), now=utc(2026, 11, 2))
    statement = statement_build(team=team, month=OCTOBER)
    assert not statement.lines.filter(basis=ChargeBasis.BURST_POOL).exists()
    (warning,) = statement.warnings
    assert (warning["code"], warning["basis"], warning["pool_id"]) == (
        "unpriced", "burst-pool", rented.pk,
    )  # fmt: skip
    assert Decimal(warning["quantity"]) == 28 * 3600  # card-seconds


def test_bad_csv_lines_are_reported_and_the_rest_kept(team, rented):
    text = "\n".join([
        "team,pool,charge,quantity,start,end",
        "nlp,,storage,100,2026-10-01,2026-10-02",                      # 2: good
        "ghost,,storage,100,2026-10-01,2026-10-02",                    # 3: no team
        "nlp,nowhere,egress,5,2026-10-01,2026-10-02",                  # 4: no pool
        "nlp,,backup,5,2026-10-01,2026-10-02",                         # 5: no such charge
        "nlp,,egress,-5,2026-10-01,2026-10-02",                        # 6: negative
        "nlp,,egress,lots,2026-10-01,2026-10-02",                      # 7: not a number
        "nlp,,egress,5,2026-10-01T00:00:00,2026-10-02",                # 8: no offset
        "nlp,,egress,5,2026-10-02,2026-10-01",                         # 9: end before start
        "nlp,,storage,100,2026-10-01,2026-10-02",                      # 10: repeats line 2
        "nlp,rented-infer,egress,7",                                   # 11: short line
        "nlp,rented-infer,egress,7.5,2026-10-31T12:00:00+00:00,2026-11-01T12:00:00+00:00",  # 12
    ])  # fmt: skip
    report = extra_charges_import(text=text, now=utc(2026, 11, 2))
    assert [r["line"] for r in report.rejected] == [3, 4, 5, 6, 7, 8, 9, 10, 11]
    errors = {r["line"]: r["error"] for r in report.rejected}
    assert errors[3] == "no team 'ghost'" and errors[4] == "no pool 'nowhere'"
    assert errors[8] == "'2026-10-01T00:00:00' has no UTC offset"
    assert errors[10] == "the same charge as line 2"
    # line 2: 100 GB for 1 of October's 31 days = 100/31 = 3.225806 GB-months; line 12: 7.5 GB
    # over 24 h, 12 h in each month -> 3.75 GB in October and 3.75 in November
    records = UsageRecord.objects.filter(source=UsageSource.EXTRA_CHARGES_CSV).order_by(
        "basis", "month"
    )
    assert [(r.basis, r.month, r.quantity) for r in records] == [
        ("egress", OCTOBER, Decimal("3.75")),
        ("egress", date(2026, 11, 1), Decimal("3.75")),
        ("storage", OCTOBER, Decimal("3.225806")),
    ]
    assert report.created == 3
    again = extra_charges_import(text=text, now=utc(2026, 11, 3))
    assert (again.created, again.unchanged, len(again.rejected)) == (0, 3, 9)


def test_a_header_without_a_column_reads_nothing(team):
    with pytest.raises(ValueError, match="no column quantity"):
        extra_charges_import(text="team,pool,charge,start,end\nnlp,,storage,2026-10-01,x\n")
    assert not UsageRecord.objects.exists()


def test_the_command_reports_bad_lines_and_exits_1(team, tmp_path, capsys):
    from django.core.management import call_command

    path = tmp_path / "charges.csv"
    path.write_text("team,pool,charge,quantity,start,end\n"
                    "nlp,,egress,12,2026-10-01,2026-10-02\n"
                    "nlp,,egress,x,2026-10-01,2026-10-02\n", encoding="utf-8")  # fmt: skip
    with pytest.raises(SystemExit) as done:
        call_command("import_extra_charges", str(path))
    assert done.value.code == 1
    out = capsys.readouterr().out
    assert "2 line(s): 1 record(s) created" in out
    assert "line 3: quantity 'x' is not a number" in out


def test_whatif_prices_the_same_load_with_and_without_burst(team, infer_pool, l40s, rented):
    """Home pool ``infer``: 8 L40S; other teams hold 4, our floor 2 -> 2 free: the home pool
    holds 4 of ours. Replayed load: 2 cards, then 6 for 2 h, then 2 (4 h in all).
    With burst: at home 4 - 2 = 2 cards x 2 h = 4 card-hours x 8.00 (burst at the reserved
    price) = 32.00; in the burst pool 6 - 4 = 2 x 2 h = 4 card-hours x 2.90 = 11.60;
    32.00 + 11.60 = 43.60 EUR. Without: 32.00 EUR, and 4 card-hours of load not served."""
    from django.utils import timezone

    from pools.elastic.burst_pool import burst_split
    from pools.elastic.models import BurstOptIn
    from pools.elastic.services import WhatIfRun, WhatIfSource, elastic_burst_whatif
    from pools.elastic.whatif import WhatIf

    now = timezone.now()
    window = {"status": AllocationStatus.ACTIVE, "starts_at": now - timedelta(days=1),
              "ends_at": now + timedelta(days=1), "pool": infer_pool,
              "gpu_model": l40s}  # fmt: skip
    AllocationFactory(card_count=4, **window)
    policy = ElasticPolicy.objects.create(
        allocation=AllocationFactory(team=team, card_count=2, **window),
        ceiling_cards=6, cards_held=2,
    )  # fmt: skip
    rate_card_create(
        name="w", currency="EUR", effective_from=date(2020, 1, 1),
        gpu_prices={(l40s.pk, RateKind.GPU_RESERVED): Decimal("8.00")},
        pool_prices={(RateKind.POOL_BURST, rented.pk, l40s.pk): Decimal("2.90")},
    )  # fmt: skip
    t0 = (now - timedelta(hours=5)).timestamp()
    timeline = ((t0, 2), (t0 + 3600, 6), (t0 + 3 * 3600, 2))
    # 4 card-hours at home above the floor, 4 in the burst pool, in card-seconds
    assert burst_split(timeline, floor_cards=2, home_cards=4, start=t0,
                       end=t0 + 4 * 3600) == (4 * 3600, 4 * 3600)  # fmt: skip
    result = WhatIf(1, 1, 2, 6, 16.0, 6, 24.0, 8.0, 0.0, 0.0, 4.0, (), timeline)
    run = WhatIfRun(result, WhatIfSource.RECORDED, datetime_of(t0), datetime_of(t0 + 4 * 3600), 240)
    assert elastic_burst_whatif(policy=policy, run=run, now=now) is None  # not opted in
    BurstOptIn.objects.create(team=team, pool=rented)
    found = elastic_burst_whatif(policy=policy, run=run, now=now)
    assert (found["burst_pool"], found["home_cards"]) == ("rented-infer", 4)
    money = found["money"]
    assert money["with_burst"] == {"home_card_hours": Decimal(4),
                                   "burst_pool_card_hours": Decimal(4),
                                   "amount": Decimal("43.60")}  # fmt: skip
    assert money["without_burst"] == {"home_card_hours": Decimal(4),
                                      "unserved_card_hours": Decimal(4),
                                      "amount": Decimal("32.00")}  # fmt: skip
    assert (money["currency"], money["burst_pool_price"]) == ("EUR", Decimal("2.90"))


def test_whatif_home_pool_counts_the_cards_this_allocation_already_borrows_once(
    team, infer_pool, l40s, rented
):
    """Home pool ``infer``: 8 L40S; another team holds 4, our floor is 2 and we borrow 2 more
    (held 4): the guaranteed cards leave 8 - 4 - 2 = 2 free, and our 2 borrowed take them, so
    nothing is left to lend: the home pool holds 2 + 2 = 4 of ours (not 2 + 2 + 2 = 6, our
    borrowed cards counted twice). Replay: 6 cards for 2 h -> 6 - 4 = 2 cards x 2 h = 4
    card-hours in the burst pool."""
    from django.utils import timezone

    from pools.elastic.models import BurstOptIn
    from pools.elastic.services import WhatIfRun, WhatIfSource, elastic_burst_whatif
    from pools.elastic.whatif import WhatIf

    now = timezone.now()
    window = {"status": AllocationStatus.ACTIVE, "starts_at": now - timedelta(days=1),
              "ends_at": now + timedelta(days=1), "pool": infer_pool,
              "gpu_model": l40s}  # fmt: skip
    AllocationFactory(card_count=4, **window)
    policy = ElasticPolicy.objects.create(
        allocation=AllocationFactory(team=team, card_count=2, **window),
        ceiling_cards=6, cards_held=4,
    )  # fmt: skip
    BurstOptIn.objects.create(team=team, pool=rented)
    rate_card_create(
        name="w", currency="EUR", effective_from=date(2020, 1, 1),
        gpu_prices={(l40s.pk, RateKind.GPU_RESERVED): Decimal("8.00")},
        pool_prices={(RateKind.POOL_BURST, rented.pk, l40s.pk): Decimal("2.90")},
    )  # fmt: skip
    t0 = (now - timedelta(hours=3)).timestamp()
    timeline = ((t0, 6), (t0 + 2 * 3600, 4))
    result = WhatIf(0, 1, 4, 6, 12.0, 6, 12.0, 0.0, 0.0, 0.0, 4.0, (), timeline)
    run = WhatIfRun(result, WhatIfSource.RECORDED, datetime_of(t0), datetime_of(t0 + 2 * 3600), 120)
    found = elastic_burst_whatif(policy=policy, run=run, now=now)
    assert found["home_cards"] == 4
    assert found["money"]["with_burst"]["burst_pool_card_hours"] == Decimal(4)


def test_whatif_burst_card_hours_are_3_places_half_up(team, infer_pool, l40s, rented):
    """As the first what-if (home pool holds 4 of ours, floor 2) but 5 cards for 3,609 s: at
    home 2 × 3,609 = 7,218 card-s = 2.005 card-h × 8.00 = 16.04; in the burst pool 1 × 3,609 s
    = 1.0025 card-h, half-up to 1.003 (half-even: 1.002; 6 places, as before: 1.002500) ×
    2.90 = 2.9087 -> 2.91; with burst 18.95 EUR. The API's block shows the same strings."""
    from django.utils import timezone

    from pools.elastic.models import BurstOptIn
    from pools.elastic.services import (
        WhatIfRun,
        WhatIfSource,
        elastic_burst_whatif,
        whatif_burst_json,
    )
    from pools.elastic.whatif import WhatIf

    now = timezone.now()
    window = {"status": AllocationStatus.ACTIVE, "starts_at": now - timedelta(days=1),
              "ends_at": now + timedelta(days=1), "pool": infer_pool,
              "gpu_model": l40s}  # fmt: skip
    AllocationFactory(card_count=4, **window)
    policy = ElasticPolicy.objects.create(
        allocation=AllocationFactory(team=team, card_count=2, **window),
        ceiling_cards=6, cards_held=2,
    )  # fmt: skip
    BurstOptIn.objects.create(team=team, pool=rented)
    rate_card_create(
        name="w", currency="EUR", effective_from=date(2020, 1, 1),
        gpu_prices={(l40s.pk, RateKind.GPU_RESERVED): Decimal("8.00")},
        pool_prices={(RateKind.POOL_BURST, rented.pk, l40s.pk): Decimal("2.90")},
    )  # fmt: skip
    t0 = (now - timedelta(hours=5)).timestamp()
    timeline = ((t0, 2), (t0 + 3600, 5), (t0 + 3600 + 3609, 2))
    result = WhatIf(1, 1, 2, 5, 11.0, 5, 20.0, 9.0, 0.0, 0.0, 4.0, (), timeline)
    run = WhatIfRun(result, WhatIfSource.RECORDED, datetime_of(t0), datetime_of(t0 + 4 * 3600), 240)
    found = elastic_burst_whatif(policy=policy, run=run, now=now)
    assert found["money"]["with_burst"] == {"home_card_hours": Decimal("2.005"),
                                            "burst_pool_card_hours": Decimal("1.003"),
                                            "amount": Decimal("18.95")}  # fmt: skip
    block = whatif_burst_json(found)
    assert block["with_burst"] == {"home_card_hours": "2.005", "burst_pool_card_hours": "1.003",
                                   "amount": "18.95"}  # fmt: skip
    assert block["without_burst"] == {
        "home_card_hours": "2.005",
        "unserved_card_hours": "1.003",
        "amount": "16.04",
    }


def datetime_of(t: float):
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, tz=UTC)


def test_focus_names_the_storage_and_egress_units(team, card):
    from billing.focus import focus_rows

    extra_charges_import(text=CSV, now=utc(2026, 11, 2))
    statement = statement_build(team=team, month=OCTOBER)
    units = {row["x_Basis"]: row["PricingUnit"] for row in focus_rows([statement])}
    assert units == {"storage": "GB-Months", "egress": "GB"}


def test_focus_files_storage_and_egress_under_their_own_service_category(
    team, bursting, card, rented
):
    """FOCUS 1.2 ServiceCategory is one of its allowed values by what the service does
    (``specification/columns/servicecategory.md``): the card-hours are "AI and Machine
    Learning", shared storage "Storage", egress "Networking" -- a finance tool summing by
    category reads 160.00 + 81.20 = 241.20 EUR of GPU, 5.00 of storage and 6.00 of network,
    not 252.20 EUR of GPU. Each description names the line as the statement does: the burst
    pool's card-hours in their pool, egress in its pool, storage (no pool) by its basis only,
    never an empty name ("Shared storage: , 250 gb-months")."""
    from billing.focus import focus_rows

    window = {"start": utc(2026, 10, 1), "end": utc(2026, 11, 1), "now": utc(2026, 11, 2)}
    usage_import_reservations(**window)
    usage_import_elastic_burst(**window)
    extra_charges_import(text=CSV, now=window["now"])
    statement = statement_build(team=team, month=OCTOBER)
    rows = {row["x_Basis"]: row for row in focus_rows([statement])}
    assert {basis: (row["ServiceCategory"], row["BilledCost"]) for basis, row in rows.items()} == {
        "reserved": ("AI and Machine Learning", "160.00"),
        "burst-pool": ("AI and Machine Learning", "81.20"),
        "storage": ("Storage", "5.00"),
        "egress": ("Networking", "6.00"),
    }
    assert {basis: row["ChargeDescription"] for basis, row in rows.items()} == {
        "reserved": "Reserved card-hours: L40S, 20 card-hours",
        "burst-pool": "Burst-pool card-hours (elastic, another pool): L40S in Rented, "
        "28 card-hours",
        "storage": "Shared storage, 250 gb-months",
        "egress": "Network egress in Rented, 120 gb",
    }


def test_a_month_with_a_dst_change_is_metered_by_its_real_length(team):
    """Europe/Berlin, October 2026 is 745 h (DST ends on the 25th): 745 GB for its first 10 h
    is 745 x 10 / 745 = 10 GB-months (it was 745 x 10 / 744 = 10.013441 while the month's
    length was taken as wall time, 31 x 24 h), and held the whole month exactly 745."""
    from django.test import override_settings

    text = (
        "team,pool,charge,quantity,start,end\n"
        f"{team.slug},,storage,745,2026-10-01,2026-11-01\n"
        f"{team.slug},,storage,745,2026-10-01T00:00:00+02:00,2026-10-01T10:00:00+02:00\n"
    )
    with override_settings(BILLING_TIME_ZONE="Europe/Berlin"):
        assert extra_charges_import(text=text, now=utc(2026, 11, 2)).rejected == []
    quantities = UsageRecord.objects.filter(source=UsageSource.EXTRA_CHARGES_CSV)
    assert sorted(quantities.values_list("quantity", flat=True)) == [Decimal(10), Decimal(745)]


def test_the_statement_names_the_storage_and_egress_units(team, card, admin_page, monkeypatch):
    """The lines' Unit column reads GB-months and GB, as the unit price does ("0.02 EUR /
    GB-month"), on the page and in the PDF, not the stored codes "gb-months" and "gb"."""
    extra_charges_import(text=CSV, now=utc(2026, 11, 2))
    statement = statement_build(team=team, month=OCTOBER)
    # quantity, then unit: storage 250 GB-months and egress 120 GB, 3 places like card-hours
    page = admin_page.get(f"/costs/{team.slug}/2026-10/").content.decode()
    assert '<td class="num">250.000</td><td class="wrap-ok">GB-months</td>' in page
    assert '<td class="num">120.000</td><td class="wrap-ok">GB</td>' in page

    rendered = []

    class _Html:  # weasyprint's HTML, keeping the page it was given
        def __init__(self, string):
            rendered.append(string)

        def write_pdf(self):
            return b"%PDF"

    monkeypatch.setattr("weasyprint.HTML", _Html)
    statement_pdf(statement)
    assert '<td class="num">250.000</td><td>GB-months</td>' in rendered[0]
    assert '<td class="num">120.000</td><td>GB</td>' in rendered[0]


def test_the_finance_months_lines_keep_their_team_on_a_phone(team, card, admin_page):
    """Every team's lines in one table: on a phone, where the Team column folds away, the
    team is named in the kept label cell, as the basis is (it read "1 usage Shared storage
    10.00 EUR", of no team)."""
    extra_charges_import(text=CSV, now=utc(2026, 11, 2))
    statement_build(team=team, month=OCTOBER)
    page = admin_page.get("/costs/finance/2026-10/").content.decode()
    lines = page.split("<h3>All lines</h3>")[1]
    assert lines.count('<span class="basis-on-phone" data-team-on-phone>NLP: </span>') == 2
    team_page = admin_page.get(f"/costs/{team.slug}/2026-10/").content.decode()
    assert "data-team-on-phone" not in team_page  # one team's statement: no need
