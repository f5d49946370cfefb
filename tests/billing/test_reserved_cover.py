"""A reserved allocation covers only what it reserved: in time (the part of a job inside its
window) — :mod:`billing.reserved_cover`, through the Slurm usage import.

Worked by hand. Team ``nlp``; reservation R: 4 A100, 5 Oct 2026 10:00 → 14:00 (UTC);
rate card ``test``: A100 reserved 2.00, used 3.00 EUR per card-hour.

- job A: 2 A100, 09:00 → 11:00: 09:00-10:00 before R, 2 × 1 = 2 card-h used;
  10:00-11:00 inside R, 2 × 1 = 2 card-h included;
- job B: 4 A100, 12:00 → 16:00: 12:00-14:00 inside R, 4 × 2 = 8 included;
  14:00-16:00 after R, 4 × 2 = 8 used.

Included 2 + 8 = 10 card-h, used 2 + 8 = 10 card-h. Before, each job was judged at its start:
A (09:00, before R) used for all 4 card-h, B (12:00, in R) included for all 16 — 4 charged
where 10 ran outside the reservation.

Statement: reserved 4 × 4 = 16 card-h × 2.00 = 32.00, used 10 card-h × 3.00 = 30.00,
total 62.00 EUR.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from fractions import Fraction

import pytest
from kit import Accounting, AccountingAt, job, utc

from billing.choices import ChargeBasis
from billing.models import UsageRecord
from billing.reserved_cover import Held, Use, cover
from billing.services.statements import statement_build
from billing.services.usage_import import usage_import_reservations, usage_import_slurm
from pools.common.choices import AllocationStatus

pytestmark = pytest.mark.django_db

OCT = date(2026, 10, 1)
H = 3600
JOBS = [
    job(1, utc(2026, 10, 5, 9), utc(2026, 10, 5, 11), {"a100": 2}),  # A
    job(2, utc(2026, 10, 5, 12), utc(2026, 10, 5, 16), {"a100": 4}),  # B
]
MONTH = {"start": utc(2026, 10, 1), "end": utc(2026, 11, 1), "now": utc(2026, 11, 2)}


@pytest.fixture
def reservation(db, team, train_pool, a100):
    from factories import AllocationFactory

    return AllocationFactory(team=team, pool=train_pool, gpu_model=a100, card_count=4,
                             starts_at=utc(2026, 10, 5, 10), ends_at=utc(2026, 10, 5, 14),
                             status=AllocationStatus.ENDED)  # fmt: skip


def parts():
    """``{(job id, basis, allocation id): card-hours}`` of the records with usage."""
    out = {}
    for r in UsageRecord.objects.filter(source="slurm-accounting", quantity__gt=0):
        out[(int(r.source_id.split(":")[1]), r.basis, r.allocation_id)] = r.quantity / H
    return out


def test_a_job_is_split_at_the_reservations_edges(reservation):
    usage_import_slurm(scheduler=Accounting(JOBS), **MONTH)
    r = reservation.pk
    assert parts() == {
        (1, ChargeBasis.USED, None): 2,
        (1, ChargeBasis.INCLUDED, r): 2,
        (2, ChargeBasis.INCLUDED, r): 8,
        (2, ChargeBasis.USED, None): 8,
    }
    included = UsageRecord.objects.get(source_id=f"job:1:{int(JOBS[0].start.timestamp())}"
                                                 f":a100:2026-10:alloc{r}")  # fmt: skip
    assert (included.period_start, included.period_end) == (utc(2026, 10, 5, 10),
                                                            utc(2026, 10, 5, 11))  # fmt: skip
    after = UsageRecord.objects.get(
        source_id=f"job:2:{int(JOBS[1].start.timestamp())}:a100:2026-10"
    )
    assert (after.period_start, after.period_end) == (utc(2026, 10, 5, 14), utc(2026, 10, 5, 16))


def test_the_statement_charges_what_ran_outside_the_reservation(reservation, team, rates):
    usage_import_reservations(**MONTH)
    usage_import_slurm(scheduler=Accounting(JOBS), **MONTH)
    statement = statement_build(team=team, month=OCT, now=MONTH["now"])
    lines = [(x.basis, x.quantity, x.amount) for x in statement.lines.order_by("position")]
    assert sorted(lines) == [
        (ChargeBasis.RESERVED, Decimal("16.000000"), Decimal("32.00")),
        (ChargeBasis.USED, Decimal("10.000000"), Decimal("30.00")),
    ]
    assert statement.total_amount == Decimal("62.00")


def test_importing_again_or_an_overlapping_window_changes_nothing(reservation):
    usage_import_slurm(scheduler=Accounting(JOBS), **MONTH)
    before = list(UsageRecord.objects.order_by("pk").values())
    again = usage_import_slurm(scheduler=Accounting(JOBS), **MONTH)
    # A: its own key (1 h before R) and R's part; B: R's part and its own key (2 h after)
    assert (again.records_created, again.records_updated, again.records_unchanged) == (0, 0, 4)
    overlapping = usage_import_slurm(scheduler=AccountingAt(JOBS, MONTH["now"]),
                                     start=utc(2026, 10, 5, 10, 30), end=utc(2026, 10, 5, 12, 30),
                                     now=MONTH["now"])  # fmt: skip
    assert (overlapping.records_created, overlapping.records_updated) == (0, 0)
    assert list(UsageRecord.objects.order_by("pk").values()) == before


def test_hourly_imports_while_the_jobs_run_end_as_one_import_of_the_month(reservation):
    """Each hour imported at its end (jobs running then are metered up to it), then nothing
    more: the records are those of one import of the month afterwards."""
    for hour in range(8, 17):
        at = utc(2026, 10, 5, hour + 1)
        usage_import_slurm(scheduler=AccountingAt(JOBS, at), start=utc(2026, 10, 5, hour),
                           end=at, now=at)  # fmt: skip
    hourly = parts()
    usage_import_slurm(scheduler=Accounting(JOBS), **MONTH)
    assert parts() == hourly
    assert sum(hourly.values()) == 2 * 2 + 4 * 4


def test_a_record_of_the_rule_before_is_corrected_in_place(reservation):
    """Imported by the rule before (B judged at its start: all 16 card-h included in R, under
    its own key): importing again sets that key to the 8 card-h after R and adds R's part."""
    usage_import_slurm(scheduler=Accounting(JOBS), **MONTH)
    UsageRecord.objects.filter(allocation=reservation).delete()
    own = UsageRecord.objects.filter(source_id__startswith="job:2:")
    own.update(quantity=16 * H, basis=ChargeBasis.INCLUDED, allocation=reservation,
               period_start=JOBS[1].start, period_end=JOBS[1].end)  # fmt: skip
    fixed = usage_import_slurm(scheduler=Accounting(JOBS), **MONTH)
    assert (fixed.records_created, fixed.records_updated) == (2, 1)  # R's two; B's own
    assert parts()[(2, ChargeBasis.USED, None)] == 8
    assert parts()[(2, ChargeBasis.INCLUDED, reservation.pk)] == 8


def test_a_part_in_an_allocation_cancelled_since_is_set_to_0(reservation):
    from pools.capacity.models import Allocation

    usage_import_slurm(scheduler=Accounting(JOBS), **MONTH)
    Allocation.objects.filter(pk=reservation.pk).update(status=AllocationStatus.CANCELLED)
    usage_import_slurm(scheduler=Accounting(JOBS), **MONTH)
    assert parts() == {(1, ChargeBasis.USED, None): 4, (2, ChargeBasis.USED, None): 16}


# --- the pure rule ------------------------------------------------------------------------------


def test_cover_splits_in_time_and_the_parts_add_up():
    """R (id 7) 10:00-14:00 of 4 cards, on-use U (id 8) 13:00-15:00; one job of 2 cards
    09:00-15:30: 1 h in none, 4 h in R (13:00-14:00 too: R first), 1 h in U, 0.5 h in none."""
    day = (2026, 10, 5)
    use = Use("j", (utc(*day, 9),), utc(*day, 9), utc(*day, 15, 30), Fraction(2))
    got = cover([use], [Held(7, utc(*day, 10), utc(*day, 14), Fraction(4))],
                [Held(8, utc(*day, 13), utc(*day, 15))])["j"]  # fmt: skip
    assert {k: v.card_seconds / H for k, v in got.items()} == {
        (None, False): Fraction(3), (7, True): Fraction(8), (8, False): Fraction(2)}  # fmt: skip
    assert (got[(None, False)].start, got[(None, False)].end) == (utc(*day, 9), utc(*day, 15, 30))
    assert sum(p.card_seconds for p in got.values()) == 2 * Fraction(6.5) * H
