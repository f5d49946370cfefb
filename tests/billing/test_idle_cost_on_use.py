"""Jobs inside an allocation priced on use: charged once, as used card-hours, and counted once in
the pool's idle cost — inside the allocation's held time, not again as used outside allocations.

The month, worked out by hand. Pool ``train``: 8 A100 SXM, all schedulable; rate card ``test``:
A100 reserved 2.00, used 3.00 EUR per card-hour; October 2026 (UTC) is 744 h.

- allocation U of team ``nlp``, priced on use (``PricingMethod.USED``): 2 A100, 5 Oct 00:00 →
  7 Oct 00:00, 48 h: held 2 × 48 = 96 card-hours;
- job 1 (inside U): 2 A100, 5 Oct 10:00 → 15:00: 2 × 5 = 10 card-hours;
- job 2 (outside any allocation): 1 A100, 20 Oct 00:00 → 03:00: 1 × 3 = 3 card-hours.

Idle cost, at the reserved rate: capacity 8 × 744 × 2.00 = 11,904.00; allocated 96 × 2.00 =
192.00; used outside allocations job 2 only, 3 × 2.00 = 6.00; idle 11,904.00 − 192.00 − 6.00 =
11,706.00; utilisation (192.00 + 6.00) / 11,904.00 = 1.663… % → 1.7. Counting job 1 a second
time (as before) made used outside 13 × 2.00 = 26.00 and idle 11,686.00.

Statement: both jobs are charged as used card-hours, 13 × 3.00 = 39.00; U itself adds nothing
(priced on use, no reserved record).
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from kit import Accounting, idle_rows, job, utc

from billing.choices import ChargeBasis
from billing.models import UsageRecord
from billing.services.statements import statement_build
from billing.services.usage_import import usage_import_reservations, usage_import_slurm
from pools.common.choices import AllocationStatus, PricingMethod

pytestmark = pytest.mark.django_db

OCT = date(2026, 10, 1)
WINDOW = {"start": utc(2026, 10, 1), "end": utc(2026, 11, 1), "now": utc(2026, 12, 2)}
JOBS = [
    job(11, utc(2026, 10, 5, 10), utc(2026, 10, 5, 15), {"a100": 2}),
    job(12, utc(2026, 10, 20), utc(2026, 10, 20, 3), {"a100": 1}),
]


@pytest.fixture
def on_use(rates, train_pool, team, a100):
    """Allocation U (module docstring), its month's reservations and jobs imported."""
    from factories import AllocationFactory

    allocation = AllocationFactory(
        team=team, pool=train_pool, gpu_model=a100, card_count=2,
        starts_at=utc(2026, 10, 5), ends_at=utc(2026, 10, 7), status=AllocationStatus.ENDED,
        pricing_method=PricingMethod.USED,
    )  # fmt: skip
    usage_import_reservations(**WINDOW)
    usage_import_slurm(scheduler=Accounting(JOBS), **WINDOW)
    return allocation


def _records():
    """``(job id, basis, allocation id, card-seconds)`` of the records with usage (a job's own
    key is kept at 0 when all of it ran inside allocations)."""
    return sorted(
        ((r.source_id.split(":")[1], r.basis, r.allocation_id, r.quantity)
         for r in UsageRecord.objects.filter(quantity__gt=0)),
        key=lambda r: (r[0], r[2] or 0),
    )  # fmt: skip


def test_a_job_inside_an_on_use_allocation_is_charged_and_names_it(on_use):
    assert _records() == [
        ("11", ChargeBasis.USED, on_use.pk, Decimal(10 * 3600)),
        ("12", ChargeBasis.USED, None, Decimal(3 * 3600)),
    ]


def test_idle_cost_counts_a_job_inside_an_on_use_allocation_once(on_use):
    assert idle_rows(OCT) == [
        ("train", Decimal("11904.00"), Decimal("192.00"), Decimal("6.00"), Decimal("11706.00"),
         Decimal("1.7")),
    ]  # fmt: skip


def test_the_statement_charges_each_job_once(on_use, team):
    statement = statement_build(team=team, month=OCT, now=WINDOW["now"])
    lines = [(x.basis, x.quantity, x.amount) for x in statement.lines.all()]
    assert lines == [(ChargeBasis.USED, Decimal("13.000000"), Decimal("39.00"))]
    assert statement.total_amount == Decimal("39.00")


def test_reimporting_changes_nothing_and_fixes_a_month_imported_before(on_use, team):
    """Imported again: every record unchanged (job 1's own key at 0 and its part in U, job 2's).
    A month imported before jobs were matched to allocations priced on use has job 1's 10
    card-hours under its own key without the allocation (counted outside: idle 11,686.00);
    importing the month again moves them to ``…:alloc<U>`` (one record updated to 0, one
    added), the idle cost comes right and the statement stays 39.00."""
    again = usage_import_slurm(scheduler=Accounting(JOBS), **WINDOW)
    assert (again.records_created, again.records_updated, again.records_unchanged) == (0, 0, 3)

    UsageRecord.objects.filter(allocation=on_use).delete()
    UsageRecord.objects.filter(source_id__startswith="job:11:").update(quantity=10 * 3600)
    assert idle_rows(OCT)[0][3:5] == (Decimal("26.00"), Decimal("11686.00"))
    before = statement_build(team=team, month=OCT, now=WINDOW["now"]).total_amount

    fixed = usage_import_slurm(scheduler=Accounting(JOBS), **WINDOW)
    assert (fixed.records_created, fixed.records_updated, fixed.records_unchanged) == (1, 1, 1)
    assert _records()[0] == ("11", ChargeBasis.USED, on_use.pk, Decimal(10 * 3600))
    assert idle_rows(OCT)[0][3:5] == (Decimal("6.00"), Decimal("11706.00"))
    after = statement_build(team=team, month=OCT, now=WINDOW["now"]).total_amount
    assert before == after == Decimal("39.00")


def test_a_reserved_allocation_in_force_at_the_same_time_covers_its_cards_only(
    on_use, team, train_pool, a100
):
    """Team ``nlp`` also holds a reserved allocation R of 1 A100 over 1 → 10 Oct: of job 1's
    2 cards (5 Oct 10:00 → 15:00) R covers 1, included 1 × 5 = 5 card-hours (not charged);
    the other card is charged inside U, 5 card-hours used naming it."""
    from factories import AllocationFactory

    reserved = AllocationFactory(
        team=team, pool=train_pool, gpu_model=a100, card_count=1,
        starts_at=utc(2026, 10, 1), ends_at=utc(2026, 10, 10), status=AllocationStatus.ENDED,
    )  # fmt: skip
    usage_import_slurm(scheduler=Accounting(JOBS), **WINDOW)
    assert _records() == [
        ("11", ChargeBasis.USED, on_use.pk, Decimal(5 * 3600)),
        ("11", ChargeBasis.INCLUDED, reserved.pk, Decimal(5 * 3600)),
        ("12", ChargeBasis.USED, None, Decimal(3 * 3600)),
    ]


@pytest.mark.parametrize(
    "other",
    [
        pytest.param({"account": "vision"}, id="another team"),
        pytest.param({"gpus": {"l40s": 2}}, id="another GPU model"),
        pytest.param({"start": utc(2026, 10, 7)}, id="started as the allocation ended"),
    ],
)
def test_a_job_not_inside_the_allocation_names_none(on_use, other, l40s):
    from factories import TeamFactory

    TeamFactory(slug="vision", name="Vision")
    start = other.get("start", utc(2026, 10, 5, 10))
    outside = job(13, start, start + (JOBS[0].end - JOBS[0].start),
                  other.get("gpus", {"a100": 2}), account=other.get("account", "nlp"))  # fmt: skip
    usage_import_slurm(scheduler=Accounting([outside]), **WINDOW)
    record = UsageRecord.objects.get(source_id__contains=":13:")
    assert (record.basis, record.allocation_id) == (ChargeBasis.USED, None)
    assert record.quantity == 2 * 5 * 3600


def test_a_pool_scoped_reading_counts_the_used_hours_charged_inside_its_allocation(on_use, team):
    """What a budget for pool ``train`` counts (:func:`billing.charges.usage_lines_by_team`
    with the pool): job 1's 10 used card-hours at 3.00 = 30.00, tied to U in ``train``; job 2
    ran in no allocation and has no pool."""
    from billing.charges import usage_lines_by_team

    lines, _ = usage_lines_by_team(month=OCT, pool_id=on_use.pool_id)
    assert [(x.basis, x.quantity, x.amount) for x in lines[team.pk]] == [
        (ChargeBasis.USED, Decimal("10.000000"), Decimal("30.00"))
    ]


def test_what_jobs_use_beyond_the_allocations_cards_is_used_outside(on_use, team):
    """Two more jobs of ``nlp`` start inside U (2 A100, 5 Oct 00:00 → 7 Oct 00:00):

    - job 13: 1 A100, 5 Oct 12:00 → 14:00, beside job 1's 2 cards (10:00 → 15:00): 3 cards in
      use for 2 h, 1 beyond U's 2: 1 × 2 = 2 card-hours beyond;
    - job 14: 2 A100, 6 Oct 22:00 → 7 Oct 02:00: 2 h inside U, then 2 h after it ended:
      2 × 2 = 4 card-hours beyond.

    Job 14's 2 h after U are its own record, in no allocation; job 13's hour beyond U's cards
    is inside U's window, so it names U (the idle cost finds it beyond the cards).
    Used outside allocations: job 2's 3 + 2 + 4 = 9 card-hours × 2.00 = 18.00; idle
    11,904.00 − 192.00 − 18.00 = 11,694.00; utilisation 210.00 / 11,904.00 = 1.76 % → 1.8.
    Charged: 3 + 10 + 2 + 8 = 23 used card-hours × 3.00 = 69.00."""
    more = [
        job(13, utc(2026, 10, 5, 12), utc(2026, 10, 5, 14), {"a100": 1}),
        job(14, utc(2026, 10, 6, 22), utc(2026, 10, 7, 2), {"a100": 2}),
    ]
    usage_import_slurm(scheduler=Accounting(JOBS + more), **WINDOW)
    assert _records() == [
        ("11", ChargeBasis.USED, on_use.pk, Decimal(10 * 3600)),
        ("12", ChargeBasis.USED, None, Decimal(3 * 3600)),
        ("13", ChargeBasis.USED, on_use.pk, Decimal(2 * 3600)),
        ("14", ChargeBasis.USED, None, Decimal(2 * 2 * 3600)),
        ("14", ChargeBasis.USED, on_use.pk, Decimal(2 * 2 * 3600)),
    ]
    assert idle_rows(OCT) == [
        ("train", Decimal("11904.00"), Decimal("192.00"), Decimal("18.00"), Decimal("11694.00"),
         Decimal("1.8")),
    ]  # fmt: skip
    assert statement_build(team=team, month=OCT, now=WINDOW["now"]).total_amount == Decimal("69.00")


def test_jobs_of_an_allocation_no_longer_charged_are_used_outside(on_use):
    """U cancelled after the import: its held time is not allocated any more, so job 1's 10
    card-hours count outside again: (10 + 3) × 2.00 = 26.00; idle 11,904.00 − 26.00 =
    11,878.00; utilisation 26.00 / 11,904.00 = 0.22 % → 0.2."""
    from pools.capacity.generation import allocations_changed
    from pools.capacity.models import Allocation

    Allocation.objects.filter(pk=on_use.pk).update(status=AllocationStatus.CANCELLED)
    allocations_changed()
    assert idle_rows(OCT) == [
        ("train", Decimal("11904.00"), Decimal("0.00"), Decimal("26.00"), Decimal("11878.00"),
         Decimal("0.2")),
    ]  # fmt: skip
