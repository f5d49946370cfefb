"""Kubernetes usage inside an allocation priced on use: charged once, as used card-hours, named
on the allocation, and counted once in the pool's idle cost — as the Slurm import does
(``test_idle_cost_on_use.py``); and a month imported before this rule is corrected in place.

The month, worked out by hand. Pool ``infer`` (Kubernetes): 2 nodes × 4 L40S, all schedulable;
rate card ``test``: L40S reserved 8.00, used 8.00 EUR per card-hour; October 2026 (UTC) is
744 h. The Kubernetes import reads GPU requests every 60 s; each pod's series below reads 0 at
its end, so it is counted exactly from its start to its end (no staleness tail).

- allocation U of team ``nlp``, priced on use: 2 L40S, 5 Oct 00:00 → 6 Oct 12:00, 36 h: held
  2 × 36 = 72 card-hours;
- pod a: 2 cards on ``inf-01``, 5 Oct 10:00 → 15:00, inside U: 2 × 5 = 10 card-hours;
- pod c: 2 cards on ``inf-01``, 6 Oct 10:00 → 14:00: 10:00 → 12:00 inside U (4 card-hours),
  12:00 → 14:00 after U ended (4 card-hours);
- pod b: 1 card on ``inf-02``, 20 Oct 00:00 → 03:00, in no allocation: 3 card-hours.

Records: 5 Oct ``alloc<U>`` 36,000 card-s over 10:00 → 15:00 (its steps); 6 Oct ``alloc<U>``
14,400 over 10:00 → 12:00 and ``used`` 14,400 (the day); 20 Oct ``used`` 10,800.

Idle cost at the reserved rate: capacity 8 × 744 × 8.00 = 47,616.00; allocated 72 × 8.00 =
576.00; used outside allocations pod c's 4 + pod b's 3 = 7 card-hours × 8.00 = 56.00 (U's
records use 2 cards over their steps, its 2 cards: nothing beyond); idle 47,616.00 − 576.00 −
56.00 = 46,984.00; utilisation 632.00 / 47,616.00 = 1.327 % → 1.3. Before (every card-hour
outside reservations counted outside): 10 + 4 + 4 + 3 = 21 × 8.00 = 168.00, idle 46,872.00,
utilisation 744.00 / 47,616.00 = 1.5625 % → 1.6.

Statement: 21 used card-hours × 8.00 = 168.00, before and after; U itself adds nothing.
"""

from __future__ import annotations

import importlib
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.apps import apps
from kit import idle_rows
from prometheus_support import gpu_pod

from billing.choices import ChargeBasis, UsageSource
from billing.models import UsageMonthVersion, UsageRecord
from billing.services.prometheus_import import usage_import_kubernetes
from billing.services.statements import statement_build
from pools.common.choices import AllocationStatus, PricingMethod
from scheduler_adapters.prometheus_fake import FakePrometheus

pytestmark = pytest.mark.django_db

OCT = date(2026, 10, 1)
WINDOW = {"start": datetime(2026, 10, 1, tzinfo=UTC), "end": datetime(2026, 11, 1, tzinfo=UTC),
          "now": datetime(2026, 12, 2, tzinfo=UTC)}  # fmt: skip
MIGRATION = importlib.import_module(
    "billing.migrations.0017_kubernetes_used_records_name_on_use_allocations"
)


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


PODS = [
    gpu_pod("a", "inf-01", 2, utc(2026, 10, 5, 10), utc(2026, 10, 5, 15)),
    gpu_pod("c", "inf-01", 2, utc(2026, 10, 6, 10), utc(2026, 10, 6, 14)),
    gpu_pod("b", "inf-02", 1, utc(2026, 10, 20), utc(2026, 10, 20, 3)),
]


def _import(pods=PODS):
    return usage_import_kubernetes(metrics=FakePrometheus(series=pods), **WINDOW)


@pytest.fixture
def on_use(rates, infer_pool, team, l40s):
    """Allocation U (module docstring), the month's pods imported."""
    from factories import AllocationFactory

    allocation = AllocationFactory(
        team=team, pool=infer_pool, gpu_model=l40s, card_count=2,
        starts_at=utc(2026, 10, 5), ends_at=utc(2026, 10, 6, 12), status=AllocationStatus.ENDED,
        pricing_method=PricingMethod.USED,
    )  # fmt: skip
    _import()
    return allocation


def _records():
    """``(day, where, basis, allocation id, card-seconds, period start, period end)``."""
    rows = UsageRecord.objects.filter(source=UsageSource.KUBERNETES).order_by("source_id")
    return [
        (r.source_id.split(":")[3], r.source_id.split(":")[4], r.basis, r.allocation_id,
         r.quantity, r.period_start, r.period_end)
        for r in rows
    ]  # fmt: skip


def _total(team) -> Decimal:
    return statement_build(team=team, month=OCT, now=WINDOW["now"]).total_amount


def _as_imported_before():
    """The month's records as the import wrote them before it matched allocations priced on
    use: a day's card-seconds outside reservations in one ``…:used`` record over the whole day,
    naming no allocation (5 Oct: 36,000; 6 Oct: 14,400 + 14,400 = 28,800; 20 Oct: 10,800)."""
    for record in UsageRecord.objects.filter(source=UsageSource.KUBERNETES):
        day, _, _ = record.source_id.split(":")[3].partition("@")
        start = datetime.fromisoformat(day).replace(tzinfo=UTC)
        key = f"{record.source_id.rpartition(':')[0]}:used"
        used = UsageRecord.objects.filter(source=record.source, source_id=key).first()
        if used is not None and used.pk != record.pk:
            used.quantity += record.quantity
            used.save()
            record.delete()
        else:
            record.source_id, record.allocation_id = key, None
            record.period_start, record.period_end = start, start + timedelta(days=1)
            record.save()


U = "alloc{}"  # the key's last part for U, formatted with its id


def test_pods_inside_an_on_use_allocation_are_charged_and_name_it(on_use):
    alloc = U.format(on_use.pk)
    assert _records() == [
        ("2026-10-05", alloc, ChargeBasis.USED, on_use.pk, Decimal(36000),
         utc(2026, 10, 5, 10), utc(2026, 10, 5, 15)),
        ("2026-10-06", alloc, ChargeBasis.USED, on_use.pk, Decimal(14400),
         utc(2026, 10, 6, 10), utc(2026, 10, 6, 12)),
        ("2026-10-06", "used", ChargeBasis.USED, None, Decimal(14400),
         utc(2026, 10, 6), utc(2026, 10, 7)),
        ("2026-10-20", "used", ChargeBasis.USED, None, Decimal(10800),
         utc(2026, 10, 20), utc(2026, 10, 21)),
    ]  # fmt: skip


def test_idle_cost_counts_them_once_and_the_statement_charges_them_once(on_use, team):
    assert idle_rows(OCT) == [
        ("infer", Decimal("47616.00"), Decimal("576.00"), Decimal("56.00"), Decimal("46984.00"),
         Decimal("1.3")),
    ]  # fmt: skip
    statement = statement_build(team=team, month=OCT, now=WINDOW["now"])
    lines = [(x.basis, x.quantity, x.amount) for x in statement.lines.all()]
    assert lines == [(ChargeBasis.USED, Decimal("21.000000"), Decimal("168.00"))]
    assert statement.total_amount == Decimal("168.00")


def test_reimporting_changes_nothing(on_use):
    before = list(UsageRecord.objects.order_by("pk").values())
    again = _import()
    assert (again.records_created, again.records_updated, again.records_unchanged) == (0, 0, 4)
    assert list(UsageRecord.objects.order_by("pk").values()) == before


def test_a_month_imported_before_is_corrected_in_place_after_the_migration(on_use, team):
    """Imported the old way (three ``used`` records, idle 46,872.00), migrated, imported again.

    The migration moves 5 Oct's record (the whole day inside U) to ``alloc<U>``, naming U, and
    raises nlp's October usage version; 6 Oct's (U ended at noon) stays ``used``. The re-import
    then updates 5 Oct's record in place (its period becomes its steps'), updates 6 Oct's
    ``used`` to the 14,400 after U ended and adds 6 Oct's ``alloc<U>`` (14,400: a day's usage
    split in two; 14,400 + 14,400 is the old 28,800), and leaves 20 Oct's alone: created 1,
    updated 2, unchanged 1. The idle cost comes right; the statement stays 168.00."""
    expected = _records()
    _as_imported_before()
    assert [r[:5] for r in _records()] == [
        ("2026-10-05", "used", ChargeBasis.USED, None, Decimal(36000)),
        ("2026-10-06", "used", ChargeBasis.USED, None, Decimal(28800)),
        ("2026-10-20", "used", ChargeBasis.USED, None, Decimal(10800)),
    ]
    assert idle_rows(OCT)[0][3:] == (Decimal("168.00"), Decimal("46872.00"), Decimal("1.6"))
    assert _total(team) == Decimal("168.00")
    version = UsageMonthVersion.objects.get(team=team, month=OCT).version

    MIGRATION.used_records_name_on_use_allocations(apps, None)
    assert [r[:5] for r in _records()] == [
        ("2026-10-05", U.format(on_use.pk), ChargeBasis.USED, on_use.pk, Decimal(36000)),
        ("2026-10-06", "used", ChargeBasis.USED, None, Decimal(28800)),
        ("2026-10-20", "used", ChargeBasis.USED, None, Decimal(10800)),
    ]
    assert UsageMonthVersion.objects.get(team=team, month=OCT).version == version + 1
    assert _total(team) == Decimal("168.00")

    fixed = _import()
    assert (fixed.records_created, fixed.records_updated, fixed.records_unchanged) == (1, 2, 1)
    assert _records() == expected
    assert idle_rows(OCT)[0][3:] == (Decimal("56.00"), Decimal("46984.00"), Decimal("1.3"))
    assert _total(team) == Decimal("168.00")


def test_without_the_migration_a_reimport_still_charges_a_day_once(on_use, team):
    """Re-imported without the migration, 5 Oct's usage gets a new ``alloc<U>`` record (36,000)
    and the old ``used`` one, which the import no longer writes, is set to 0 in place (a
    piece's stale record, :func:`billing.services.prometheus_import._k8s_gone_parts`), so its
    10 card-hours are not charged twice (else 168.00 + 10 × 8.00 = 248.00): 168.00."""
    _as_imported_before()
    _import()
    assert [r[:5] for r in _records() if r[0] == "2026-10-05"] == [
        ("2026-10-05", U.format(on_use.pk), ChargeBasis.USED, on_use.pk, Decimal(36000)),
        ("2026-10-05", "used", ChargeBasis.USED, None, Decimal(0)),
    ]
    assert _total(team) == Decimal("168.00")


def test_a_day_partly_inside_keeps_its_used_record_at_zero(on_use, team):
    """Pod c stops at noon instead, as U ends: all of 6 Oct's usage, 2 × 2 = 4 card-hours,
    is inside U. The day is only partly U's, so its ``used`` record is written at 0: a record
    imported before (6 Oct ``used``, 14,400, left by the migration) is set to 0 in place rather
    than charged beside the new ``alloc<U>`` one. Statement: 10 + 4 + 3 = 17 × 8.00 = 136.00."""
    pods = [
        PODS[0],
        gpu_pod("c", "inf-01", 2, utc(2026, 10, 6, 10), utc(2026, 10, 6, 12)),
        PODS[2],
    ]
    UsageRecord.objects.all().delete()
    _import(pods)
    day6 = [r[1:5] for r in _records() if r[0] == "2026-10-06"]
    assert day6 == [
        (U.format(on_use.pk), ChargeBasis.USED, on_use.pk, Decimal(14400)),
        ("used", ChargeBasis.USED, None, Decimal(0)),
    ]
    expected = _records()
    assert _total(team) == Decimal("136.00")

    _as_imported_before()
    MIGRATION.used_records_name_on_use_allocations(apps, None)
    _import(pods)
    assert _records() == expected
    assert _total(team) == Decimal("136.00")


def test_a_reserved_allocation_in_force_still_includes_the_pods(on_use, team, infer_pool, l40s):
    """Team ``nlp`` also holds a reserved allocation R of 2 L40S over 1 → 6 Oct 00:00: pod a
    (5 Oct) is included in R (not charged), as before, rather than charged inside U. The
    reserved rule comes first for Kubernetes as for Slurm (one function)."""
    from factories import AllocationFactory

    reserved = AllocationFactory(
        team=team, pool=infer_pool, gpu_model=l40s, card_count=2,
        starts_at=utc(2026, 10, 1), ends_at=utc(2026, 10, 6), status=AllocationStatus.ENDED,
    )  # fmt: skip
    UsageRecord.objects.all().delete()
    _import()
    day5 = [r[1:5] for r in _records() if r[0] == "2026-10-05"]
    assert day5 == [(f"alloc{reserved.pk}", ChargeBasis.INCLUDED, reserved.pk, Decimal(36000))]


def test_the_migration_backwards_gives_the_old_records(on_use):
    """Backwards (for the import before this rule): every record inside U back to its day's
    ``used`` key — 5 Oct's renamed, 6 Oct's added to that day's ``used`` (14,400 + 14,400) — so
    the old import finds its keys again."""
    MIGRATION.on_use_records_back_to_used(apps, None)
    assert [r[:5] for r in _records()] == [
        ("2026-10-05", "used", ChargeBasis.USED, None, Decimal(36000)),
        ("2026-10-06", "used", ChargeBasis.USED, None, Decimal(28800)),
        ("2026-10-20", "used", ChargeBasis.USED, None, Decimal(10800)),
    ]
