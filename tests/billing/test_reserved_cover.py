"""A reserved allocation covers only what it reserved: in time (the part of a job inside its
window) and in cards (at most its cards at any moment, the jobs started first) —
:mod:`billing.reserved_cover`, through the Slurm usage import.

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
from prometheus_support import gpu_pod

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


# --- cards --------------------------------------------------------------------------------------
# R as above (4 A100, 10:00 → 14:00). Three jobs, 10 cards at once from 11:00 to 12:00:
#
#   C: 2 A100, 09:00 → 12:00   D: 4 A100, 10:00 → 13:00   E: 4 A100, 11:00 → 14:30
#
#   09-10  C 2 (before R)                       C used 2
#   10-11  C 2, D 4: 6 in use, R covers 4       C incl 2, D incl 2, D used 2
#   11-12  C 2, D 4, E 4: 10 in use             C incl 2, D incl 2, D used 2, E used 4
#   12-13  D 4, E 4                             D incl 4, E used 4
#   13-14  E 4                                  E incl 4
#   14-14:30  E 4 (after R)                     E used 4 × 0.5 = 2
#
# C: included 4, used 2 (= 2 × 3 h); D: included 8, used 4 (= 4 × 3 h); E: included 4, used 10
# (= 4 × 3.5 h). Included 16 = R's 4 cards × 4 h; used 16 card-h × 3.00 = 48.00 EUR. By each
# job's start, as before: C used 6, D and E included 12 + 14: 6 card-h charged, not 16.

CARDS = [
    job(3, utc(2026, 10, 5, 9), utc(2026, 10, 5, 12), {"a100": 2}),  # C
    job(4, utc(2026, 10, 5, 10), utc(2026, 10, 5, 13), {"a100": 4}),  # D
    job(5, utc(2026, 10, 5, 11), utc(2026, 10, 5, 14, 30), {"a100": 4}),  # E
]


def cards_parts(r):
    return {
        (3, ChargeBasis.USED, None): 2, (3, ChargeBasis.INCLUDED, r): 4,
        (4, ChargeBasis.USED, None): 4, (4, ChargeBasis.INCLUDED, r): 8,
        (5, ChargeBasis.USED, None): 10, (5, ChargeBasis.INCLUDED, r): 4,
    }  # fmt: skip


def test_a_reservation_covers_at_most_its_cards_the_jobs_started_first(reservation, team, rates):
    usage_import_reservations(**MONTH)
    usage_import_slurm(scheduler=Accounting(CARDS), **MONTH)
    assert parts() == cards_parts(reservation.pk)
    statement = statement_build(team=team, month=OCT, now=MONTH["now"])
    assert sorted((x.basis, x.quantity, x.amount) for x in statement.lines.all()) == [
        (ChargeBasis.RESERVED, Decimal("16.000000"), Decimal("32.00")),
        (ChargeBasis.USED, Decimal("16.000000"), Decimal("48.00")),
    ]


def test_same_start_the_smaller_job_id_is_covered_first(reservation):
    """Jobs 7 and 6, 3 A100 each, both 10:00 → 11:00: job 6 included 3, job 7 included 1 and
    used 2."""
    both = [job(n, utc(2026, 10, 5, 10), utc(2026, 10, 5, 11), {"a100": 3}) for n in (7, 6)]
    usage_import_slurm(scheduler=Accounting(both), **MONTH)
    r = reservation.pk
    assert parts() == {(6, ChargeBasis.INCLUDED, r): 3, (7, ChargeBasis.INCLUDED, r): 1,
                       (7, ChargeBasis.USED, None): 2}  # fmt: skip


def test_hourly_imports_of_capped_jobs_end_as_one_import_of_the_month(reservation):
    """Hour by hour at each hour's end, as beat runs it: the hour 14:00-15:00 reads E alone in
    its window, and C and D beside it from accounting (E's cover 11:00-14:00 depends on them);
    the result is one import of the month's, and importing the month again changes nothing."""
    for hour in range(8, 16):
        at = utc(2026, 10, 5, hour + 1)
        usage_import_slurm(scheduler=AccountingAt(CARDS, at), start=utc(2026, 10, 5, hour),
                           end=at, now=at)  # fmt: skip
    assert parts() == cards_parts(reservation.pk)
    month = usage_import_slurm(scheduler=Accounting(CARDS), **MONTH)
    assert (month.records_created, month.records_updated) == (0, 0)


def test_a_reservation_shrunk_by_a_reclamation_covers_its_cards_then(reservation):
    """R shrunk from 4 to 1 card at 12:00 (a reclamation): 12-13 D included 1, used 3; 13-14 E
    included 1, used 3. D: included 2 + 2 + 1 = 5, used 2 + 2 + 3 = 7; E: included 1, used
    4 + 4 + 3 + 2 = 13; C as before."""
    from pools.common.choices import IdleFindingState
    from pools.reclamation.models import IdleFinding

    at = utc(2026, 10, 5, 12)
    IdleFinding.objects.create(allocation=reservation, first_seen_at=at, last_seen_at=at,
                               reclaimed_at=at, state=IdleFindingState.RECLAIMED, card_count=4,
                               cards_in_use=1, cards_reclaimed=3)  # fmt: skip
    usage_import_slurm(scheduler=Accounting(CARDS), **MONTH)
    r = reservation.pk
    assert parts() == {
        (3, ChargeBasis.USED, None): 2, (3, ChargeBasis.INCLUDED, r): 4,
        (4, ChargeBasis.USED, None): 7, (4, ChargeBasis.INCLUDED, r): 5,
        (5, ChargeBasis.USED, None): 13, (5, ChargeBasis.INCLUDED, r): 1,
    }  # fmt: skip


# --- Kubernetes --------------------------------------------------------------------------------
# Per 60 s step, by the same rule. Reservation R: 2 L40S, 5 Oct 10:00 → 12:00; pod p1 2 cards on
# inf-01 09:00 → 12:00, pod p2 2 cards on inf-02 10:00 → 13:00 (each series 0 at its end):
#   09-10  p1 2 outside R: used 2 card-h       10-12  4 cards, R covers 2: inf-01's (first in
#   12-13  p2 2 outside R: used 2 card-h              name order) included 4, inf-02's used 4
# 5 Oct: alloc<R> included 4 card-h = 14,400 card-s; used 2 + 4 + 2 = 8 card-h = 28,800. Before,
# every step in R was included whatever its cards: included 8, used 4.


def test_kubernetes_steps_are_covered_within_the_reservations_cards(rates, infer_pool, team, l40s):
    from factories import AllocationFactory

    from billing.services.prometheus_import import usage_import_kubernetes
    from scheduler_adapters.prometheus_fake import FakePrometheus

    r = AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=2,
                          starts_at=utc(2026, 10, 5, 10), ends_at=utc(2026, 10, 5, 12),
                          status=AllocationStatus.ENDED)  # fmt: skip
    pods = [gpu_pod("p1", "inf-01", 2, utc(2026, 10, 5, 9), utc(2026, 10, 5, 12)),
            gpu_pod("p2", "inf-02", 2, utc(2026, 10, 5, 10), utc(2026, 10, 5, 13))]  # fmt: skip
    for _ in range(2):  # the second import changes nothing
        usage_import_kubernetes(metrics=FakePrometheus(series=pods), **MONTH)
    rows = UsageRecord.objects.filter(source="kubernetes").order_by("source_id")
    assert [
        (x.source_id.rpartition(":")[2], x.basis, x.allocation_id, x.quantity) for x in rows
    ] == [
        (f"alloc{r.pk}", ChargeBasis.INCLUDED, r.pk, Decimal(14400)),
        ("used", ChargeBasis.USED, None, Decimal(28800)),
    ]


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


def test_cover_fills_two_reservations_in_their_order_then_the_on_use_one():
    """R1 (id 1, 1 card) and R2 (id 2, 2 cards) and on-use U (id 3), all 10:00-11:00; jobs x
    (3 cards, started 09:00) and y (2 cards, started 09:30), 10:00-11:00 counted: x takes R1's
    1 and R2's 2; y finds nothing left: 2 used in U."""
    day = (2026, 10, 5)
    x = Use("x", (utc(*day, 9),), utc(*day, 10), utc(*day, 11), Fraction(3))
    y = Use("y", (utc(*day, 9, 30),), utc(*day, 10), utc(*day, 11), Fraction(2))
    window = (utc(*day, 10), utc(*day, 11))
    got = cover([y, x], [Held(1, *window, Fraction(1)), Held(2, *window, Fraction(2))],
                [Held(3, *window)])  # fmt: skip
    seconds = {k: {p: v.card_seconds / H for p, v in parts.items()} for k, parts in got.items()}
    assert seconds == {"x": {(1, True): 1, (2, True): 2}, "y": {(3, False): 2}}


def test_cover_counts_a_mig_slice_as_its_share_of_a_card():
    """R (id 1) of 1 card, 10:00-11:00; x a 3g slice (3/7 of a card, started 09:00), y 1 card
    (started 09:30), both 10:00-11:00: x included 3/7 card-h, y included 4/7 and used 3/7."""
    day = (2026, 10, 5)
    x = Use("x", (utc(*day, 9),), utc(*day, 10), utc(*day, 11), Fraction(3, 7))
    y = Use("y", (utc(*day, 9, 30),), utc(*day, 10), utc(*day, 11), Fraction(1))
    got = cover([x, y], [Held(1, utc(*day, 10), utc(*day, 11), Fraction(1))], [])
    seconds = {k: {p: v.card_seconds / H for p, v in parts.items()} for k, parts in got.items()}
    assert seconds == {"x": {(1, True): Fraction(3, 7)},
                       "y": {(1, True): Fraction(4, 7), (None, False): Fraction(3, 7)}}  # fmt: skip
