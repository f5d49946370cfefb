"""Kept consumption (billing/budgets/consumption.py) equals the statements' full recomputation.

Rate card (tests/billing/conftest.py ``rates``, EUR from 2024-01-01): A100 reserved 2.00 / used
3.00 per card-hour, L40S reserved 8.00 (burst and shared cards fall back to / use it), qwen input
2.00 per million tokens. Billing zone UTC (the default).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from billing.budgets import consumption
from billing.budgets.consumption import scoped_usage
from billing.budgets.models import Budget, BudgetConsumption
from billing.budgets.selectors import budget_statuses
from billing.charges import CARD_HOURS, usage_lines_by_team
from billing.choices import RateKind
from billing.models import RateCard, SharedCardUse, UsageRecord
from billing.services.rates import rate_card_create
from billing.services.usage_import import ImportReport, usage_records_upsert
from billing.services.versions import shared_card_months_changed, usage_months_changed

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rates")]
FEB, MAR = date(2026, 2, 1), date(2026, 3, 1)


def record(team, model, *, basis, seconds, start, source_id, allocation=None, **extra):
    """An unsaved usage record of ``seconds`` card-seconds over one hour from ``start``."""
    return UsageRecord(
        team=team, gpu_model=model, quantity=Decimal(seconds), unit=extra.pop("unit",
        "card-seconds"), basis=basis, month=start.date().replace(day=1), period_start=start,
        period_end=start + timedelta(hours=1), source="slurm-accounting", source_id=source_id,
        allocation=allocation, **extra,
    )  # fmt: skip


def upsert(*records) -> None:
    """Write records as every importer does (billing/services/usage_import.py)."""
    with transaction.atomic():
        usage_records_upsert(list(records), ImportReport(), timezone.now())


def recomputed(needs) -> dict:
    """What a budget counts, priced from scratch through the statements' lines (the
    definition ``scoped_usage`` keeps): ``{(team, pool, month): {model: [seconds, money]}}``."""
    result = {}
    for (pool, month), teams in needs.items():
        lines, _ = usage_lines_by_team(month=month, team_ids=sorted(teams), pool_id=pool)
        for team in teams:
            per_model = defaultdict(lambda: [Decimal(0), Decimal(0)])
            for line in lines.get(team, ()):
                if line.unit == CARD_HOURS:
                    per_model[line.gpu_model_id][0] += line.raw_quantity
                per_model[line.gpu_model_id][1] += line.amount
            if per_model:
                result[(team, pool, month)] = dict(per_model)
    return result


OPS = st.lists(
    st.one_of(
        # a card-seconds record: team, model, basis, month, day, hour, seconds, source id
        st.tuples(st.just("usage"), st.integers(0, 1), st.sampled_from(["a100", "l40s"]),
                  st.sampled_from(["reserved", "used", "burst"]), st.sampled_from([FEB, MAR]),
                  st.integers(1, 28), st.integers(0, 23), st.integers(1, 30_000),
                  st.integers(0, 5)),
        st.tuples(st.just("tokens"), st.integers(0, 1), st.sampled_from([FEB, MAR]),
                  st.integers(1, 3_000_000), st.integers(0, 2)),
        # a new rate card from that day: A100 reserved price in cents
        st.tuples(st.just("rates"), st.sampled_from([FEB, MAR]), st.integers(2, 28),
                  st.integers(1, 999)),
        # a shared-card use of the first L40S: team, month, day, replicas of 4
        st.tuples(st.just("shared"), st.integers(0, 1), st.sampled_from([FEB, MAR]),
                  st.integers(1, 28), st.integers(1, 2)),
        st.just(("read",)),
    ),
    min_size=1,
    max_size=8,
)  # fmt: skip


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_kept_consumption_equals_the_full_recomputation(ops, train_pool, infer_pool, a100, l40s):
    """Random writes through the real writers (the importers' upsert — new records, records
    re-metered in place, records moved to another team or month —, token records, rate cards
    from any day, so records straddle a price change and are prorated, shared-card uses);
    after each, what the budgets read (kept rows, priced again only when stale) equals the
    statements' lines priced from scratch, for two teams × every pool / each pool × 2 months."""
    from factories import AllocationFactory, TeamFactory

    with transaction.atomic():
        teams = [TeamFactory(), TeamFactory()]
        models = {"a100": a100, "l40s": l40s}
        pools = [train_pool, infer_pool]
        allocations = {
            (t, p): AllocationFactory(team=teams[t], pool=pools[p], gpu_model=a100,
                                      card_count=1, starts_at=datetime(2026, 2, 1, tzinfo=UTC),
                                      ends_at=datetime(2026, 4, 1, tzinfo=UTC))
            for t in (0, 1) for p in (0, 1)
        }  # fmt: skip
        card = infer_pool.nodes.first().gpus.order_by("index").first()
        needs = {
            (pool, month): {t.pk for t in teams}
            for pool in (None, train_pool.pk, infer_pool.pk)
            for month in (FEB, MAR)
        }
        for n, op in enumerate(ops):
            if op[0] == "usage":
                _, t, model, basis, month, day, hour, seconds, sid = op
                start = datetime(month.year, month.month, day, hour, 30, tzinfo=UTC)
                held = allocations[(t, sid % 2)] if basis != "used" else None
                upsert(record(teams[t], models[model], basis=basis, seconds=seconds,
                              start=start, source_id=f"prop:{sid}", allocation=held))  # fmt: skip
            elif op[0] == "tokens":
                _, t, month, tokens, sid = op
                start = datetime(month.year, month.month, 5, tzinfo=UTC)
                upsert(record(teams[t], None, basis="tokens", seconds=tokens, start=start,
                              source_id=f"tok:{sid}", unit="input-tokens",
                              served_model="qwen"))  # fmt: skip
            elif op[0] == "rates":
                _, month, day, cents = op
                when = month.replace(day=day)
                if not RateCard.objects.filter(effective_from=when).exists():
                    rate_card_create(name=f"r{n}", currency="EUR", effective_from=when,
                                     gpu_prices={(a100.pk, RateKind.GPU_RESERVED):
                                                 Decimal(cents) / 100})  # fmt: skip
            elif op[0] == "shared":
                _, t, month, day, held = op
                start = datetime(month.year, month.month, day, 8, tzinfo=UTC)
                end = start + timedelta(hours=5)
                SharedCardUse.objects.create(gpu=card, team=teams[t], basis="time-slicing",
                                             period_start=start, period_end=end,
                                             parts_held=held, parts_per_card=4,
                                             source_id=f"shared:{n}")  # fmt: skip
                shared_card_months_changed(start=start, end=end)
            kept, _ = scoped_usage(needs)
            assert kept == recomputed(needs), op
        transaction.set_rollback(True)


def test_current_rows_are_read_in_one_query(team, train_pool, a100, django_assert_num_queries):
    """Two A100 card-hours used in March (3.00 each: 6.00): priced once, then read from the
    kept row — one query — and the same figures."""
    upsert(record(team, a100, basis="used", seconds=7200, start=datetime(2026, 3, 3, tzinfo=UTC),
                  source_id="a"))  # fmt: skip
    needs = {(None, MAR): {team.pk}}
    first, currencies = scoped_usage(needs)
    assert first == {(team.pk, None, MAR): {a100.pk: [Decimal(7200), Decimal("6.00")]}}
    assert currencies == {MAR: "EUR"}
    with django_assert_num_queries(1):
        again, _ = scoped_usage(needs)
    assert again == first


def test_a_write_makes_only_its_team_month_stale(team, a100):
    """One hour more in March for ``team``: March is priced again (3 card-hours, 9.00); the
    kept February row and the other team's March row stay current."""
    from factories import TeamFactory

    other = TeamFactory()
    upsert(record(team, a100, basis="used", seconds=7200, start=datetime(2026, 3, 3, tzinfo=UTC),
                  source_id="a"))  # fmt: skip
    needs = {(None, FEB): {team.pk, other.pk}, (None, MAR): {team.pk, other.pk}}
    scoped_usage(needs)
    kept = BudgetConsumption.objects.values_list("team_id", "month", "computed_at")
    before = {(t, m): at for t, m, at in kept}
    upsert(record(team, a100, basis="used", seconds=3600, start=datetime(2026, 3, 4, tzinfo=UTC),
                  source_id="b"))  # fmt: skip
    usage, _ = scoped_usage(needs)
    assert usage == {(team.pk, None, MAR): {a100.pk: [Decimal(10800), Decimal("9.00")]}}
    after = {(t, m): at for t, m, at in kept.all()}
    assert after.keys() == before.keys()  # one row per team and month, replaced in place
    assert [k for k in after if after[k] != before[k]] == [(team.pk, MAR)]


def test_a_rate_card_change_reprices_every_month(team, a100):
    """Two A100 card-hours used on 10 March at 3.00 = 6.00; a card from 1 March with the used
    price at 4.50 makes them 9.00."""
    upsert(record(team, a100, basis="used", seconds=7200,
                  start=datetime(2026, 3, 10, tzinfo=UTC), source_id="a"))  # fmt: skip
    needs = {(None, MAR): {team.pk}}
    assert scoped_usage(needs)[0][(team.pk, None, MAR)][a100.pk][1] == Decimal("6.00")
    rate_card_create(name="dearer", currency="EUR", effective_from=MAR,
                     gpu_prices={(a100.pk, RateKind.GPU_USED): Decimal("4.50")})  # fmt: skip
    assert scoped_usage(needs)[0][(team.pk, None, MAR)][a100.pk][1] == Decimal("9.00")


def test_a_co_tenants_use_moves_the_teams_share(team, infer_pool, l40s):
    """A L40S time-sliced into 4: ``team`` holds 2 replicas for the whole of 1 March 00:00-10:00
    UTC. Alone in March its share is 10 h × 2/4 = 5 card-hours of the card's 744 h; when
    ``other`` then takes 1 replica for 4 h the same day, ``team``'s figures are read again (its
    month's version moved): still 5 card-hours (shares are per tenant), and ``other``'s 1."""
    from factories import TeamFactory

    other = TeamFactory()
    card = infer_pool.nodes.first().gpus.order_by("index").first()
    start = datetime(2026, 3, 1, tzinfo=UTC)
    SharedCardUse.objects.create(gpu=card, team=team, basis="time-slicing", period_start=start,
                                 period_end=start + timedelta(hours=10), parts_held=2,
                                 parts_per_card=4, source_id="s1")  # fmt: skip
    shared_card_months_changed(start=start, end=start + timedelta(hours=10))
    needs = {(None, MAR): {team.pk, other.pk}}
    before, _ = scoped_usage(needs)
    assert before[(team.pk, None, MAR)][l40s.pk][0] == Decimal(5 * 3600)
    version = BudgetConsumption.objects.get(team=team, month=MAR).usage_version
    SharedCardUse.objects.create(gpu=card, team=other, basis="time-slicing", period_start=start,
                                 period_end=start + timedelta(hours=4), parts_held=1,
                                 parts_per_card=4, source_id="s2")  # fmt: skip
    shared_card_months_changed(start=start, end=start + timedelta(hours=4))
    after, _ = scoped_usage(needs)
    assert after == recomputed(needs)
    assert after[(other.pk, None, MAR)][l40s.pk][0] == Decimal(3600)
    assert BudgetConsumption.objects.get(team=team, month=MAR).usage_version == version + 1


def test_a_write_while_pricing_leaves_the_kept_row_stale(team, a100, monkeypatch):
    """An import commits between the versions' read and the store: the row is kept labelled
    with the version read first, so the next read prices March again and sees the hour."""
    upsert(record(team, a100, basis="used", seconds=3600, start=datetime(2026, 3, 3, tzinfo=UTC),
                  source_id="a"))  # fmt: skip
    real = consumption.usage_lines_by_team

    def racing(**kwargs):
        answer = real(**kwargs)  # priced without the record below
        monkeypatch.setattr(consumption, "usage_lines_by_team", real)
        upsert(record(team, a100, basis="used", seconds=3600,
                      start=datetime(2026, 3, 4, tzinfo=UTC), source_id="b"))  # fmt: skip
        return answer

    monkeypatch.setattr(consumption, "usage_lines_by_team", racing)
    needs = {(None, MAR): {team.pk}}
    assert scoped_usage(needs)[0][(team.pk, None, MAR)][a100.pk] == [Decimal(3600), Decimal(3)]
    assert scoped_usage(needs)[0][(team.pk, None, MAR)][a100.pk] == [Decimal(7200), Decimal(6)]


def test_budget_statuses_read_kept_rows(team, a100):
    """A monthly budget of 10 card-hours: 2 used → 20.0 %, read twice the same."""
    upsert(record(team, a100, basis="used", seconds=7200, start=datetime(2026, 3, 3, tzinfo=UTC),
                  source_id="a"))  # fmt: skip
    budget = Budget.objects.create(team=team, period="month", starts_on=date(2026, 1, 1),
                                   card_hours_limit=Decimal(10))  # fmt: skip
    now = datetime(2026, 3, 20, tzinfo=UTC)
    first = budget_statuses([budget], now=now)[budget.pk]
    again = budget_statuses([budget], now=now)[budget.pk]
    assert first.card_hours.used == again.card_hours.used == Decimal(2)
    assert again.percent == Decimal("20.0")


def test_usage_months_changed_counts_each_write(team):
    """Three writes of March: version 3; February untouched (no row: 0)."""
    from billing.models import UsageMonthVersion

    for _ in range(3):
        usage_months_changed(pairs=[(team.pk, MAR)])
    assert UsageMonthVersion.objects.get(team=team, month=MAR).version == 3
    assert not UsageMonthVersion.objects.filter(team=team, month=FEB).exists()


def test_rate_periods_are_kept_per_price_list_version(a100, django_assert_num_queries):
    """Read once per version: a second read of March at the same version makes no query; a
    card from 15 March draws a new version and March is read again, cut at the 15th (two
    periods, A100 reserved 2.00 then 2.50)."""
    from billing.models import PriceListVersion
    from billing.rate_periods import rate_periods_kept

    version = PriceListVersion.objects.get(pk=1).version
    first = rate_periods_kept(month=MAR, zone=UTC, version=version)
    with django_assert_num_queries(0):
        assert rate_periods_kept(month=MAR, zone=UTC, version=version) is first
    rate_card_create(name="spring", currency="EUR", effective_from=date(2026, 3, 15),
                     gpu_prices={(a100.pk, RateKind.GPU_RESERVED): Decimal("2.50")})  # fmt: skip
    newer = PriceListVersion.objects.get(pk=1).version
    assert newer != version
    periods = rate_periods_kept(month=MAR, zone=UTC, version=newer)
    assert [p.prices.get((RateKind.GPU_RESERVED, a100.pk, "")) for p in periods] == [
        Decimal("2.00"),
        Decimal("2.50"),
    ]
