"""Shared cards on statements and on the finance month's idle-cost section (issue 36 item 4):
three teams on one time-sliced L40S, worked out by hand, add up to the card to the cent."""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from billing.choices import ChargeBasis, ShareBasis
from billing.models import SharedCardUse, StatementLine
from billing.reports import CSV_COLUMNS, SHARED_CARD_COLUMNS
from billing.selectors import shared_card_idle
from billing.services.statements import statement_build, statements_close_month

pytestmark = pytest.mark.django_db
NOV = date(2026, 11, 1)


def at(day: int, seconds: int = 0) -> datetime:
    return datetime(2026, 11, day, tzinfo=UTC) + timedelta(seconds=seconds)


@pytest.fixture
def card(db):
    from factories import node_with_gpus

    return node_with_gpus(1, gpu_model="l40s", hostname="ts-01").gpus.get()


@pytest.fixture
def tenants(db):
    from factories import TeamFactory

    return [TeamFactory(slug=s, name=s.title()) for s in ("alpha", "beta", "gamma")]


def use(card, team, key, start, end, held=None, replicas=3, basis=ShareBasis.TIME_SLICING,
        utilisation=None):  # fmt: skip
    return SharedCardUse.objects.create(
        gpu=card, team=team, basis=basis, period_start=start, period_end=end,
        parts_held=held, parts_per_card=replicas if held else None,
        utilisation_pct=utilisation, source_id=key,
    )  # fmt: skip


@pytest.fixture
def month_of_three(card, tenants, rates):
    """The month of test_shared_cards.test_three_tenants_with_idle_gaps_sum_to_the_card_hour:
    R = 3 replicas, L40S reserved 8.00 EUR, November (720 card-h = 5,760.00 EUR).
    alpha 1 replica 50,000 s on the 1st and 50,000 s on the 3rd → 33,333.33 card-s, 74.08;
    beta 2 replicas 50,000 s on the 3rd → 33,333.33 card-s, 74.07 (tie: alpha first by slug);
    gamma 1 replica 27,000 s on the 10th → 9,000 card-s = 2.5 card-h, 20.00;
    idle 7,549,000/3 card-s = 698.981481 card-h, 5,591.85. Sum 5,760.00."""
    alpha, beta, gamma = tenants
    use(card, alpha, "a1", at(1), at(1, 50_000), held=1)
    use(card, alpha, "a2", at(3), at(3, 50_000), held=1)
    use(card, beta, "b1", at(3), at(3, 50_000), held=2)
    use(card, gamma, "g1", at(10), at(10, 27_000), held=1)
    return tenants


def shared(statement):
    return [
        (x.basis, x.gpu_id, x.quantity, x.unit_price, x.amount, x.card_share, x.share_basis)
        for x in StatementLine.objects.filter(statement=statement, basis=ChargeBasis.SHARED)
    ]


def test_three_tenants_statements_and_idle_sum_to_the_card(month_of_three, card):
    alpha, beta, gamma = month_of_three
    # quantity: 33,333.33 card-s / 3,600 = 9.259259 card-h; share 33,333.33 / 2,592,000
    # = 0.012860; gamma 9,000 / 2,592,000 = 0.003472
    expected = {
        alpha: (Decimal("9.259259"), Decimal("74.08"), Decimal("0.012860")),
        beta: (Decimal("9.259259"), Decimal("74.07"), Decimal("0.012860")),
        gamma: (Decimal("2.5"), Decimal("20.00"), Decimal("0.003472")),
    }
    total = Decimal(0)
    for team, (hours, amount, share) in expected.items():
        statement = statement_build(team=team, month=NOV)
        assert shared(statement) == [("shared", card.pk, hours, Decimal(8), amount, share,
                                      "time-slicing")]  # fmt: skip
        assert statement.total_amount == amount
        total += statement.total_amount
    rows, currency = shared_card_idle(month=NOV)
    (row,) = rows
    assert (row.card_hours, row.idle_card_hours, row.idle_amount) == (
        Decimal(720), Decimal("698.981481"), Decimal("5591.85"))  # fmt: skip
    assert total + row.idle_amount == row.card.split.amount == Decimal("5760.00")
    assert currency == "EUR"


def test_month_close_writes_the_same_lines(month_of_three, card):
    statements = statements_close_month(month=NOV, now=datetime(2026, 12, 1, 1, tzinfo=UTC))
    got = {s.team.slug: (s.status, s.total_amount, shared(s)[0][4]) for s in statements}
    assert got == {
        "alpha": ("final", Decimal("74.08"), Decimal("74.08")),
        "beta": ("final", Decimal("74.07"), Decimal("74.07")),
        "gamma": ("final", Decimal("20.00"), Decimal("20.00")),
    }


def test_mig_shared_card_on_statements(tenants, rates, a100):
    """A100 80GB SXM reserved 2.00 EUR, 7 compute slices, November (720 card-h = 1,440.00):
    alpha 3g (3/7) for 7 h = 3 card-h = 6.00, beta 2g (2/7) for 14 h = 4 card-h = 8.00,
    idle 713 card-h = 1,426.00."""
    from factories import node_with_gpus

    gpu = node_with_gpus(1, hostname="mig-01").gpus.get()
    alpha, beta, _ = tenants
    use(gpu, alpha, "m1", at(2), at(2, 7 * 3600), held=3, replicas=7, basis=ShareBasis.MIG)
    use(gpu, beta, "m2", at(2), at(2, 14 * 3600), held=2, replicas=7, basis=ShareBasis.MIG)
    assert statement_build(team=alpha, month=NOV).total_amount == Decimal("6.00")
    assert statement_build(team=beta, month=NOV).total_amount == Decimal("8.00")
    (row,) = shared_card_idle(month=NOV)[0]
    assert (row.idle_card_hours, row.idle_amount) == (Decimal(713), Decimal("1426.00"))


def test_dcgm_utilisation_on_statements(card, tenants, rates):
    """L40S 8.00 EUR: alpha at 45 % for 10 h = 4.5 card-h = 36.00; beta at 30.5 % for 10 h =
    3.05 card-h = 24.40; idle 712.45 card-h = 5,699.60."""
    alpha, beta, _ = tenants
    dcgm = ShareBasis.DCGM_UTILISATION
    use(card, alpha, "d1", at(1), at(1, 36_000), basis=dcgm, utilisation=Decimal(45))
    use(card, beta, "d2", at(1), at(1, 36_000), basis=dcgm, utilisation=Decimal("30.5"))
    line = StatementLine.objects.get(statement=statement_build(team=alpha, month=NOV))
    assert (line.quantity, line.amount, line.share_basis) == (
        Decimal("4.5"), Decimal("36.00"), "dcgm-util")  # fmt: skip
    assert statement_build(team=beta, month=NOV).total_amount == Decimal("24.40")
    (row,) = shared_card_idle(month=NOV)[0]
    assert (row.idle_card_hours, row.idle_amount) == (Decimal("712.45"), Decimal("5699.60"))


def test_over_shared_card_is_a_warning_not_a_charge(card, tenants, rates):
    """alpha 2 + beta 2 of 3 replicas from 1 Nov 05:00: 4/3 of the card, nothing billed."""
    alpha, beta, _ = tenants
    use(card, alpha, "o1", at(1), at(1, 36_000), held=2)
    use(card, beta, "o2", at(1, 18_000), at(2), held=2)
    statement = statement_build(team=alpha, month=NOV)
    assert statement.total_amount == 0 and not statement.lines.exists()
    (warning,) = statement.warnings
    assert (warning["code"], warning["gpu_id"]) == ("shared_card_over_shared", card.pk)
    (row,) = shared_card_idle(month=NOV)[0]
    assert (row.card.problem, row.idle_amount) == ("over_shared", None)


def test_use_rows_refuse_impossible_parts(card, tenants):
    from django.db import IntegrityError, transaction

    dcgm = ShareBasis.DCGM_UTILISATION
    for fields in ({"held": 4}, {"held": None}, {"held": 1, "utilisation": Decimal(10)},
                   {"basis": dcgm, "utilisation": Decimal(101)}, {"basis": dcgm}):  # fmt: skip
        with pytest.raises(IntegrityError), transaction.atomic():
            use(card, tenants[0], "x", at(1), at(2), **fields)
    assert not SharedCardUse.objects.exists()


def test_pages_and_csvs(month_of_three, card, admin_page, client):
    """The fixture's numbers; card-hours to 3 places on the page and in its CSV alike:
    33,333.33 card-s = 9.259259 card-h -> 9.259, idle 698.981481 -> 698.981."""
    alpha = month_of_three[0]
    statement_build(team=alpha, month=NOV)
    page = admin_page.get("/costs/finance/2026-11/").content.decode()
    assert "data-shared-cards" in page and "5\u202f591.85\u00a0EUR" in page
    assert "Alpha: 9.259 · 1.286\u00a0% · 74.08\u00a0EUR" in page
    assert '<td class="num">698.981</td>' in page
    rows = list(csv.reader(io.StringIO(
        admin_page.get("/costs/finance/2026-11/?export=shared").content.decode())))  # fmt: skip
    assert rows[0] == list(SHARED_CARD_COLUMNS)
    assert [(r[1], r[5], r[6], r[8]) for r in rows[1:]] == [
        ("ts-01:0", "alpha", "9.259", "74.08"), ("ts-01:0", "beta", "9.259", "74.07"),
        ("ts-01:0", "gamma", "2.500", "20.00"), ("ts-01:0", "", "698.981", "5591.85"),
    ]  # fmt: skip
    assert sum(Decimal(r[8]) for r in rows[1:]) == Decimal("5760.00")
    team_page = admin_page.get("/costs/alpha/2026-11/").content.decode()
    assert "card ts-01:0 · 1.286 % of its card-hours · Time-slicing" in team_page
    statement_rows = list(csv.reader(io.StringIO(
        admin_page.get("/costs/alpha/2026-11/?export=csv").content.decode())))  # fmt: skip
    line = dict(zip(CSV_COLUMNS, statement_rows[1], strict=True))
    got = [line[k] for k in ("basis", "card", "card_share", "share_basis", "amount")]
    assert got == ["shared", "ts-01:0", "0.012860", "time-slicing", "74.08"]


def test_pool_idle_cost_nets_the_tenants(month_of_three, card):
    """The pool of ts-01 holds only that L40S: capacity 720 h × 8.00 = 5,760.00; its tenants
    are charged 74.08 + 74.07 + 20.00 = 168.15 outside any allocation; the pool's idle cost is
    5,760.00 − 168.15 = 5,591.85, the card's idle remainder."""
    from billing.selectors import pool_idle_costs

    (row,) = [r for r in pool_idle_costs(month=NOV) if r.pool.pk == card.node.pool_id]
    assert (row.capacity_cost, row.allocated_cost, row.used_outside_cost, row.idle_cost) == (
        Decimal("5760.00"), Decimal("0.00"), Decimal("168.15"), Decimal("5591.85"))  # fmt: skip


def test_cost_so_far_path_has_the_shared_lines(month_of_three, card):
    """usage_lines_by_team (cost so far, budgets) reads the same shared lines as the
    statement; in another pool there are none."""
    from factories import PoolFactory

    from billing.charges import usage_lines_by_team

    alpha, beta, gamma = month_of_three
    lines, _ = usage_lines_by_team(month=NOV, team_ids=[alpha.pk, gamma.pk])
    got = {t: [(x.basis, x.gpu_id, x.amount) for x in v] for t, v in lines.items()}
    assert got == {alpha.pk: [("shared", card.pk, Decimal("74.08"))],
                   gamma.pk: [("shared", card.pk, Decimal("20.00"))]}  # fmt: skip
    elsewhere, _ = usage_lines_by_team(month=NOV, pool_id=PoolFactory(slug="other").pk)
    assert elsewhere == {}
    here, _ = usage_lines_by_team(month=NOV, pool_id=card.node.pool_id)
    assert sorted(x.amount for v in here.values() for x in v) == [
        Decimal("20.00"), Decimal("74.07"), Decimal("74.08")]  # fmt: skip


def test_late_shared_use_becomes_an_adjustment(month_of_three, card):
    """November closed (alpha 74.08). A late import adds alpha 1 of 3 replicas on 20 Nov for
    3 h: 10,800 × 1/3 = 3,600 card-s = 1 card-h. Recomputed: alpha 36,933.33 card-s → 8,207.407
    cents, beta 7,407.407, gamma 2,000, idle 2,512,733.33 card-s → 558,385.185; floors sum to
    575,999, the missing cent to alpha (remainder 0.407, tied with beta, first): 82.08. The
    December draft carries an adjustment for November: +1.000000 card-h, +8.00 EUR."""
    from billing.choices import LineKind

    alpha = month_of_three[0]
    statements_close_month(month=NOV)
    use(card, alpha, "late", at(20), at(20, 10_800), held=1)
    december = statement_build(team=alpha, month=date(2026, 12, 1))
    got = [(x.kind, x.period, x.basis, x.gpu_id, x.quantity, x.amount)
           for x in december.lines.order_by("position")]  # fmt: skip
    assert got == [(LineKind.ADJUSTMENT, NOV, "shared", card.pk, Decimal(1), Decimal("8.00"))]
    assert december.total_amount == Decimal("8.00")


def test_unpriced_period_warns_only_where_the_card_was_used(card, tenants, rates, a100):
    """A card from 15 Nov prices no L40S. alpha's use on the 3rd (1 of 3 replicas, 10,800 s
    = 1 card-h = 8.00) is billed in the priced period; beta's on the 20th falls in the
    unpriced one: a ``shared_card_unpriced`` warning for both tenants' statements, no line."""
    from billing.choices import RateKind
    from billing.services.rates import rate_card_create

    rate_card_create(name="no l40s", currency="EUR", effective_from=date(2026, 11, 15),
                     gpu_prices={(a100.pk, RateKind.GPU_RESERVED): Decimal(2)})  # fmt: skip
    alpha, beta, _ = tenants
    use(card, alpha, "p1", at(3), at(3, 10_800), held=1)
    statement = statement_build(team=alpha, month=NOV)
    assert statement.total_amount == Decimal("8.00") and statement.warnings == []
    use(card, beta, "p2", at(20), at(20, 10_800), held=1)
    statement = statement_build(team=beta, month=NOV)
    assert statement.total_amount == 0
    assert [(w["code"], w["from"]) for w in statement.warnings] == [
        ("shared_card_unpriced", "2026-11-15")]  # fmt: skip


def test_api_lines_name_the_card_share_and_basis(month_of_three, card, admin_api):
    statement = statement_build(team=month_of_three[0], month=NOV)
    (line,) = admin_api.get(f"/api/v1/statements/{statement.pk}/lines/").json()["results"]
    got = {k: line[k] for k in ("basis", "card", "card_share", "share_basis", "amount")}
    assert got == {"basis": "shared", "card": "ts-01:0", "card_share": "0.012860",
                   "share_basis": "time-slicing", "amount": "74.08"}  # fmt: skip


def test_admin_lists_uses_read_only(month_of_three, django_user_model):
    from django.test import Client

    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root", password="pw"))
    page = client.get("/admin/billing/sharedcarduse/")
    assert page.status_code == 200 and b"ts-01:0" in page.content
    assert client.get("/admin/billing/sharedcarduse/add/").status_code == 403
