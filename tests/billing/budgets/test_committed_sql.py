"""What a budget check counts as committed (``billing.budgets.enforcement._committed``): the one
aggregate statement of PostgreSQL equals the rows summed in Python (SQLite's path), to the last
digit, over random allocations, rate changes and budgets; and both round money exactly.

Each example draws up to eight allocations of three teams (two share cost centre ``CC-1``) in
two pools, of whole A100 or L40S cards or of A100 / A30 MIG slices (a 1g slice is 1/7 of an
A100 and 1/4 of an A30: NVIDIA's MIG user guide), holding or not, priced reserved or on use,
over second-and-microsecond windows around the clock, with or without a reservation usage
record ending anywhere in or after the window (where committed starts), with up to two
reclamations that shrank or ended it somewhere around its window (cards kept 0-8), undone or
not a while later (the card changes committed follows, as the import charges them); one to
three rate cards from random days of March, April and May 2026 with random six-place reserved
prices (one currency); and up to five budgets (a team's or the cost centre's, any pool / model
scope, card-hours and money or card-hours only, a month or a quarter, in EUR, JPY or KWD minor
units).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace
from unittest import mock

import pytest
from django.db import connection
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from billing.budgets import enforcement
from billing.budgets.models import Budget
from billing.budgets.periods import period_bounds, period_start

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 3, 20, 9, 30, 15, 250_000, tzinfo=UTC)
HOUR = 3600

allocations_st = st.lists(
    st.tuples(
        st.integers(0, 2),  # team
        st.integers(0, 1),  # pool
        st.sampled_from(["a100", "l40s", "a100:1g.10gb", "a100:3g.40gb", "a30:1g.6gb"]),
        st.integers(1, 8),  # cards or slices
        st.integers(-20 * 86400, 60 * 86400),  # start, seconds from now
        st.integers(1, 40 * 86400),  # length in seconds
        st.integers(0, 999_999),  # microseconds of the start
        st.sampled_from(["approved", "active", "expiring", "ended", "reclaimed"]),
        st.sampled_from(["reserved", "reserved", "used"]),
        st.one_of(st.none(), st.integers(0, 50 * 86400)),  # imported to, seconds from its start
        st.lists(  # reclamations: seconds from its start, cards kept, undone that much later
            st.tuples(
                st.integers(-3600, 45 * 86400),
                st.integers(0, 8),
                st.one_of(st.none(), st.integers(0, 86400)),
            ),
            max_size=2,
        ),  # fmt: skip
    ),
    max_size=8,
)
budgets_st = st.lists(
    st.tuples(
        st.integers(0, 3),  # 0-2: a team's, 3: cost centre CC-1's
        st.sampled_from([None, 0, 1]),  # pool scope
        st.sampled_from([None, "a100", "l40s"]),  # model scope
        st.sampled_from([True, True, False]),  # a money limit
        st.sampled_from(["month", "quarter"]),
        st.sampled_from(["EUR", "JPY", "KWD"]),
    ),
    min_size=1,
    max_size=5,
    unique_by=lambda budget: (budget[0], budget[1], budget[2], budget[4]),  # one per scope
)
cards_st = st.lists(
    st.tuples(st.integers(0, 80), st.decimals("0.01", "40", places=6, allow_nan=False)),
    min_size=1,
    max_size=3,
    unique_by=lambda card: card[0],
)


@pytest.fixture
def world(db, infer_pool, train_pool):
    from factories import TeamFactory

    from pools.inventory.models import GpuModel

    teams = [
        TeamFactory(slug="t0", name="T0", cost_centre="CC-1"),
        TeamFactory(slug="t1", name="T1", cost_centre="CC-1"),
        TeamFactory(slug="t2", name="T2", cost_centre="CC-2"),
    ]
    models = {slug: GpuModel.objects.get(slug=slug) for slug in ("l40s", "a30")}
    models["a100"] = GpuModel.objects.get(slug="a100_80g_sxm")
    return SimpleNamespace(teams=teams, pools=[train_pool, infer_pool], models=models)


def _setup(world, allocations, budgets, cards):
    from factories import AllocationFactory, UsageRecordFactory

    from billing.choices import RateKind
    from billing.models import RateCard, UsageRecord
    from billing.services.rates import rate_card_create
    from pools.capacity.models import Allocation

    UsageRecord.objects.all().delete()
    Allocation.objects.all().delete()
    Budget.objects.all().delete()
    RateCard.objects.all().delete()
    for n, (day, price) in enumerate(sorted(cards)):
        rate_card_create(
            name=f"card {n}", currency="EUR", effective_from=date(2026, 3, 1) + timedelta(day),
            gpu_prices={(world.models[m].pk, RateKind.GPU_RESERVED): price * (i + 1)
                        for i, m in enumerate(("a100", "l40s", "a30"))},
        )  # fmt: skip
    for (
        team,
        pool,
        what,
        count,
        offset,
        length,
        micros,
        status,
        method,
        imported,
        reclaimed,
    ) in allocations:
        model, _, profile = what.partition(":")
        start = NOW + timedelta(seconds=offset, microseconds=micros)
        allocation = AllocationFactory(
            team=world.teams[team], pool=world.pools[pool], gpu_model=world.models[model],
            card_count=count, mig_profile=profile, starts_at=start,
            ends_at=start + timedelta(seconds=length), status=status, pricing_method=method,
        )  # fmt: skip
        if imported is not None:  # its reservation record, ending anywhere (even past its end)
            end = start + timedelta(seconds=imported)
            UsageRecordFactory(
                team=allocation.team, gpu_model=allocation.gpu_model, allocation=allocation,
                quantity=Decimal(count * imported), basis="reserved", source="reservation",
                source_id=f"alloc:{allocation.pk}", period_start=start, period_end=end,
                month=date(start.year, start.month, 1), created_at=NOW, updated_at=NOW,
            )  # fmt: skip
        for reclamation in reclaimed:
            _reclamation(allocation, start, *reclamation)
    made = []
    for owner, pool, model, money, period, currency in budgets:
        made.append(
            Budget.objects.create(
                team=world.teams[owner] if owner < 3 else None,
                cost_centre="CC-1" if owner == 3 else "", period=period,
                pool=world.pools[pool] if pool is not None else None,
                gpu_model=world.models[model] if model else None, starts_on=date(2026, 1, 1),
                card_hours_limit=Decimal(1000), money_limit=Decimal(1000) if money else None,
                currency=currency, enforcement="warn",
            )
        )  # fmt: skip
    return made


def _reclamation(allocation, start, after: int, kept: int, undone: int | None):
    """A finding that shrank ``allocation`` to ``kept`` cards (at most its own) ``after``
    seconds from ``start``, undone ``undone`` seconds later when not ``None``."""
    from pools.reclamation.models import IdleFinding

    at = start + timedelta(seconds=after)
    IdleFinding.objects.create(
        allocation=allocation, first_seen_at=at, last_seen_at=at, reclaimed_at=at,
        card_count=allocation.card_count, cards_in_use=min(kept, allocation.card_count),
        state="reclaimed" if undone is None else "undone",
        closed_at=None if undone is None else at + timedelta(seconds=undone),
    )  # fmt: skip


def _statuses(budgets):
    """Each budget's period holding NOW (the bounds the check's statuses carry)."""
    out = {}
    for budget in budgets:
        first = period_start(budget.period, NOW.date())
        start, end = period_bounds(budget.period, first, UTC)
        out[budget.pk] = SimpleNamespace(starts_at=start, ends_at=end)
    return out


def _prices(budgets):
    from billing.models import PriceListVersion

    if not any(b.money_limit is not None for b in budgets):
        return None
    version = PriceListVersion.objects.filter(pk=1).values_list("version", flat=True).first()
    return enforcement._ReservedPrices(version or 0)


@settings(
    max_examples=40, deadline=None, database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)  # fmt: skip
@given(allocations=allocations_st, budgets=budgets_st, cards=cards_st)
def test_one_statement_equals_the_rows_summed_in_python(world, allocations, budgets, cards):
    with override_settings(BILLING_TIME_ZONE="UTC"):
        made = _setup(world, allocations, budgets, cards)
        statuses = _statuses(made)
        team = world.teams[0]
        sql = enforcement._committed(team, made, statuses, NOW, _prices(made))
        with mock.patch.object(connection, "vendor", "sqlite"):
            rows = enforcement._committed(team, made, statuses, NOW, _prices(made))
    assert sql == rows
    assert all(money.as_tuple().exponent <= 0 for _, money in sql.values())


@pytest.fixture
def half_cent(world):
    """One rate card from 1 March 2026 at 0.015 EUR per reserved A100 card-hour."""
    from billing.choices import RateKind
    from billing.services.rates import rate_card_create

    rate_card_create(name="tie", currency="EUR", effective_from=date(2026, 3, 1),
                     gpu_prices={(world.models["a100"].pk, RateKind.GPU_RESERVED):
                                 Decimal("0.015")})  # fmt: skip


@pytest.mark.parametrize("vendor", ["postgresql", "sqlite"])
@pytest.mark.usefixtures("half_cent")
def test_a_half_cent_rounds_up_exactly(world, vendor):
    """1 A100 for 20 minutes (1,200 s: 1/3 card-hour) at 0.015 EUR = 0.005 EUR exactly, which
    rounds half-up to 0.01; 7 slices of 1g.10gb (7 × 1/7 card) for the same 20 minutes are the
    same 1/3 card-hour. Reckoned as 0.333… card-hours to 28 digits first, it was 0.004999…
    and rounded down to 0.00. A 1g.6gb A30 slice is 1/4 card: 3 of them for an hour are
    0.75 card-hours, unpriced (no A30 price): hours and no money, 17/12 card-hours in all."""
    from factories import AllocationFactory

    team, pool = world.teams[0], world.pools[0]
    start = NOW + timedelta(hours=1)
    for model, count, profile, seconds in [
        ("a100", 1, "", 1200), ("a100", 7, "1g.10gb", 1200), ("a30", 3, "1g.6gb", HOUR),
    ]:  # fmt: skip
        AllocationFactory(
            team=team, pool=pool, gpu_model=world.models[model], card_count=count,
            mig_profile=profile, starts_at=start, ends_at=start + timedelta(seconds=seconds),
            status="approved", pricing_method="reserved",
        )  # fmt: skip
    budget = Budget.objects.create(
        team=team,
        period="month",
        starts_on=date(2026, 1, 1),
        money_limit=Decimal(1),
        currency="EUR",
        enforcement="warn",
    )
    patched = mock.patch.object(connection, "vendor", vendor)
    with override_settings(BILLING_TIME_ZONE="UTC"), patched:
        committed = enforcement._committed(team, [budget], _statuses([budget]), NOW,
                                           _prices([budget]))  # fmt: skip
    hours, money = committed[budget.pk]
    assert money == Decimal("0.02")  # 0.01 + 0.01
    assert hours == Decimal(17) / 12  # 1/3 + 1/3 + 3/4
