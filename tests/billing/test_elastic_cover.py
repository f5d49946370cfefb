"""An elastic allocation's burst cards cover the usage on them: the burst line bills the cards
held above the floor, so the usage imports include usage up to the cards *held* at each moment
(floor and burst), not only the floor — else a pod or job on the burst cards is charged twice.

Worked by hand. Team ``nlp``; rate card ``test``: L40S reserved 8.00, used 8.00; A100 reserved
2.00, used 3.00 EUR per card-hour; no burst price, so burst is priced as reserved. Allocation E:
floor 2 L40S in the Kubernetes pool ``infer`` (namespace ``team-nlp``), 5 Oct 2026 08:00 → 18:00,
scaled up to 4 cards at 10:00 and back to 2 at 12:00.

- reserved: 2 cards × 10 h = 20 card-h × 8.00 = 160.00;
- burst: (4 − 2) cards × 2 h (10:00 → 12:00) = 4 card-h × 8.00 = 32.00;
- a pod of 4 L40S 10:00 → 12:00: 4 × 2 = 8 card-h (28,800 card-s), all on cards E held then:
  included, no used line; total 160.00 + 32.00 = 192.00 (before: the 4 card-h above the floor
  also used, 32.00 more: 224.00).
"""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest
from factories import AllocationFactory, ClusterFactory, PoolFactory, node_with_gpus
from kit import Accounting, job, utc
from prometheus_support import gpu_pod

from billing.choices import ChargeBasis, RateKind, UsageSource
from billing.models import UsageRecord
from billing.services.prometheus_import import usage_import_kubernetes
from billing.services.prometheus_meters import LEGACY, MeterMap
from billing.services.rates import rate_card_create
from billing.services.statements import statement_build
from billing.services.usage_import import (
    usage_import_elastic_burst,
    usage_import_reservations,
    usage_import_slurm,
)
from pools.common.choices import AllocationStatus, PricingMethod, Scheduler
from pools.elastic.models import ElasticPolicy, ScaleEvent
from scheduler_adapters.prometheus_fake import FakePrometheus

pytestmark = pytest.mark.django_db

OCT = date(2026, 10, 1)
MONTH = {"start": utc(2026, 10, 1), "end": utc(2026, 11, 1), "now": utc(2026, 11, 2)}
T0 = utc(2026, 10, 5, 8)
TEN, NOON = utc(2026, 10, 5, 10), utc(2026, 10, 5, 12)


def elastic(team, pool, model, steps, *, burst_pool=None, pricing=PricingMethod.RESERVED):
    """Floor 2 of ``model`` in ``pool``, 08:00 → 18:00, priced by ``pricing``, scaled at each
    of ``steps``: ``(at, cards held, of them in ``burst_pool``)``."""
    allocation = AllocationFactory(team=team, pool=pool, gpu_model=model, card_count=2,
                                   starts_at=T0, ends_at=T0 + timedelta(hours=10),
                                   status=AllocationStatus.ENDED,
                                   pricing_method=pricing)  # fmt: skip
    policy = ElasticPolicy.objects.create(allocation=allocation, ceiling_cards=10, cards_held=2)
    for at, cards, placed in steps:
        ScaleEvent.objects.create(policy=policy, decided_at=at, effective_at=at,
                                  action="up" if cards > 2 else "down", reason="test",
                                  cards_from=0, cards_to=cards, burst_cards_to=placed,
                                  burst_pool=burst_pool if placed else None)  # fmt: skip
    return allocation


@pytest.fixture
def e(team, infer_pool, l40s):
    return elastic(team, infer_pool, l40s, [(TEN, 4, 0), (NOON, 2, 0)])


def billed(team, pods, **meters):
    """Import the month (reservations, burst, the pods) and return the statement's ``(basis,
    card-hours, amount)`` lines and total."""
    usage_import_reservations(**MONTH)
    usage_import_elastic_burst(**MONTH)
    usage_import_kubernetes(metrics=FakePrometheus(series=pods), **meters, **MONTH)
    return lines(team)


def lines(team):
    statement = statement_build(team=team, month=OCT, now=MONTH["now"])
    found = sorted((x.basis, x.quantity, x.amount) for x in statement.lines.all())
    return found, statement.total_amount


def k8s_parts():
    """``{(basis, allocation id): card-seconds}`` of the Kubernetes records with usage."""
    rows = UsageRecord.objects.filter(source=UsageSource.KUBERNETES, quantity__gt=0)
    return {(r.basis, r.allocation_id): r.quantity for r in rows}


RESERVED_AND_BURST = [
    (ChargeBasis.RESERVED, Decimal(20), Decimal("160.00")),
    (ChargeBasis.BURST, Decimal(4), Decimal("32.00")),
]


def test_a_pod_on_the_burst_cards_is_not_charged_again(team, e, rates):
    assert billed(team, [gpu_pod("p", "inf-01", 4, TEN, NOON)]) == (
        sorted(RESERVED_AND_BURST), Decimal("192.00"),
    )  # fmt: skip
    assert k8s_parts() == {(ChargeBasis.INCLUDED, e.pk): Decimal(28800)}


def test_a_pod_below_the_floor_during_the_burst_changes_nothing(team, e, rates):
    """The pod holds 2 of the 4 cards 10:00 → 12:00: 2 × 2 = 4 card-h (14,400 card-s)
    included; no used line; 192.00 as without it."""
    assert billed(team, [gpu_pod("p", "inf-01", 2, TEN, NOON)]) == (
        sorted(RESERVED_AND_BURST), Decimal("192.00"),
    )  # fmt: skip
    assert k8s_parts() == {(ChargeBasis.INCLUDED, e.pk): Decimal(14400)}


def test_usage_beyond_the_cards_held_is_still_used(team, e, rates):
    """The pod keeps 4 cards until 13:00, an hour after E went back to 2: 10:00 → 12:00 4 × 2
    = 8 card-h and 12:00 → 13:00 2 × 1 = 2 card-h included (36,000 card-s); 2 × 1 = 2 card-h
    (7,200 card-s) used × 8.00 = 16.00; total 192.00 + 16.00 = 208.00."""
    assert billed(team, [gpu_pod("p", "inf-01", 4, TEN, utc(2026, 10, 5, 13))]) == (
        sorted([*RESERVED_AND_BURST, (ChargeBasis.USED, Decimal(2), Decimal("16.00"))]),
        Decimal("208.00"),
    )  # fmt: skip
    assert k8s_parts() == {
        (ChargeBasis.INCLUDED, e.pk): Decimal(36000),
        (ChargeBasis.USED, None): Decimal(7200),
    }


def test_importing_the_month_again_corrects_its_records_in_place(team, infer_pool, l40s, rates):
    """The scale events recorded after the month was first imported (as the import before this
    rule read it: cover up to the floor): the pod's 4 card-h above the floor used. Importing
    again moves them into E, in the same records: included 28,800 card-s, used 0; 192.00."""
    a = elastic(team, infer_pool, l40s, [])
    pods = [gpu_pod("p", "inf-01", 4, TEN, NOON)]
    billed(team, pods)
    assert k8s_parts() == {(ChargeBasis.INCLUDED, a.pk): Decimal(14400),
                           (ChargeBasis.USED, None): Decimal(14400)}  # fmt: skip
    before = dict(UsageRecord.objects.filter(source=UsageSource.KUBERNETES)
                  .values_list("source_id", "pk"))  # fmt: skip
    for at, cards in [(TEN, 4), (NOON, 2)]:
        ScaleEvent.objects.create(policy=a.elastic_policy, decided_at=at, effective_at=at,
                                  action="up" if cards > 2 else "down", reason="test",
                                  cards_from=0, cards_to=cards)  # fmt: skip
    assert billed(team, pods) == (sorted(RESERVED_AND_BURST), Decimal("192.00"))
    assert k8s_parts() == {(ChargeBasis.INCLUDED, a.pk): Decimal(28800)}
    after = dict(UsageRecord.objects.filter(source=UsageSource.KUBERNETES)
                 .values_list("source_id", "pk"))  # fmt: skip
    assert after == before


def test_a_slurm_job_on_the_burst_cards_is_not_charged_again(team, train_pool, a100, rates):
    """One rule for both imports (elastic policies are made on Kubernetes pools only today).
    Elastic A in the Slurm pool ``train``: floor 2 A100, 4 from 10:00 to 12:00. Reserved 2 ×
    10 = 20 card-h × 2.00 = 40.00; burst 2 × 2 = 4 card-h × 2.00 (the reserved price) = 8.00;
    job 1 on 4 A100 10:00 → 12:00: 8 card-h included; total 48.00 (before: 4 card-h used ×
    3.00 = 12.00 more, 60.00)."""
    a = elastic(team, train_pool, a100, [(TEN, 4, 0), (NOON, 2, 0)])
    usage_import_reservations(**MONTH)
    usage_import_elastic_burst(**MONTH)
    usage_import_slurm(scheduler=Accounting([job(1, TEN, NOON, {"a100": 4})]), **MONTH)
    assert lines(team) == (
        [(ChargeBasis.BURST, Decimal(4), Decimal("8.00")),
         (ChargeBasis.RESERVED, Decimal(20), Decimal("40.00"))],
        Decimal("48.00"),
    )  # fmt: skip
    rows = UsageRecord.objects.filter(source=UsageSource.SLURM_ACCOUNTING, quantity__gt=0)
    assert [(r.basis, r.allocation_id, r.quantity) for r in rows] == [
        (ChargeBasis.INCLUDED, a.pk, Decimal(28800))
    ]


def test_a_pod_on_cards_placed_in_a_burst_pool_is_not_charged_again(team, infer_pool, l40s):
    """Burst pool ``rented`` in cluster ``x`` (its own Prometheus), price 2.90 per card-hour.
    E: floor 2 in ``infer``; 10:00 → 12:00 4 cards, 2 of them placed in ``rented`` (home full).
    Reserved 20 card-h × 8.00 = 160.00; home burst (4 − 2 − 2) = 0: no line; burst pool 2 × 2
    = 4 card-h × 2.90 = 11.60. Pod q on 2 L40S of ``x-01`` 10:00 → 12:00: 4 card-h (14,400
    card-s) on the placed cards, included; pod p on 4 L40S of ``inf-01`` at the same time:
    2 × 2 = 4 card-h included (the home cards), 2 × 2 = 4 card-h (14,400 card-s) used × 8.00
    = 32.00 (the placed cards are in ``x``, not at home). Total 160.00 + 11.60 + 32.00 =
    203.60 (before: q's 4 card-h used too, 32.00 more: 235.60)."""
    x = ClusterFactory(slug="x", kind=Scheduler.KUBERNETES, api_url="https://x.example:6443")
    rented = PoolFactory(slug="rented", cluster=x, scheduler=Scheduler.KUBERNETES,
                         slurm_partition="", burst=True)  # fmt: skip
    node_with_gpus(4, gpu_model="l40s", hostname="x-01", pool=rented,
                   scheduler=Scheduler.KUBERNETES)  # fmt: skip
    rate_card_create(
        name="burst", currency="EUR", effective_from=date(2026, 1, 1),
        gpu_prices={(l40s.pk, RateKind.GPU_RESERVED): Decimal("8.00"),
                    (l40s.pk, RateKind.GPU_USED): Decimal("8.00")},
        pool_prices={(RateKind.POOL_BURST, rented.pk, l40s.pk): Decimal("2.90")},
    )  # fmt: skip
    a = elastic(team, infer_pool, l40s, [(TEN, 4, 2), (NOON, 2, 0)], burst_pool=rented)
    pods = [gpu_pod("p", "inf-01", 4, TEN, NOON), gpu_pod("q", "x-01", 2, TEN, NOON)]
    meters = {"meter": LEGACY, "meters": MeterMap(node_clusters={"x-01": {x.pk}})}
    assert billed(team, pods, **meters) == (
        [(ChargeBasis.BURST_POOL, Decimal(4), Decimal("11.60")),
         (ChargeBasis.RESERVED, Decimal(20), Decimal("160.00")),
         (ChargeBasis.USED, Decimal(4), Decimal("32.00"))],
        Decimal("203.60"),
    )  # fmt: skip
    rows = UsageRecord.objects.filter(source=UsageSource.KUBERNETES, quantity__gt=0)
    assert sorted((r.source_id.split(":")[0], r.basis, r.allocation_id, r.quantity)
                  for r in rows) == [
        ("k8s", ChargeBasis.INCLUDED, a.pk, Decimal(14400)),
        ("k8s", ChargeBasis.USED, None, Decimal(14400)),
        (f"k8s@{x.pk}", ChargeBasis.INCLUDED, a.pk, Decimal(14400)),
    ]  # fmt: skip


# ----------------------------------------------------------------- priced on use
# Rate card ``on-use``: L40S reserved 8.00, used 5.00, burst 6.00 EUR per card-hour; burst pool
# ``rented`` (cluster ``x``) 2.90. Allocation O: as E but priced on use (floor 2 L40S in
# ``infer``, 08:00 → 18:00). It pays what it used, once: usage on its home burst cards is used
# at 5.00 and no burst line charges those cards again; cards it placed in ``rented`` are that
# pool's line at 2.90 and the usage on them is included in it.


@pytest.fixture
def rented(l40s):
    """Burst pool ``rented`` in Kubernetes cluster ``x`` (node ``x-01``: 4 L40S) and the
    ``on-use`` rate card."""
    x = ClusterFactory(slug="x", kind=Scheduler.KUBERNETES, api_url="https://x.example:6443")
    pool = PoolFactory(slug="rented", cluster=x, scheduler=Scheduler.KUBERNETES,
                       slurm_partition="", burst=True)  # fmt: skip
    node_with_gpus(4, gpu_model="l40s", hostname="x-01", pool=pool,
                   scheduler=Scheduler.KUBERNETES)  # fmt: skip
    rate_card_create(
        name="on-use", currency="EUR", effective_from=date(2026, 1, 1),
        gpu_prices={(l40s.pk, RateKind.GPU_RESERVED): Decimal("8.00"),
                    (l40s.pk, RateKind.GPU_USED): Decimal("5.00"),
                    (l40s.pk, RateKind.GPU_BURST): Decimal("6.00")},
        pool_prices={(RateKind.POOL_BURST, pool.pk, l40s.pk): Decimal("2.90")},
    )  # fmt: skip
    return pool


def on_use(team, pool, model, steps, **kwargs):
    return elastic(team, pool, model, steps, pricing=PricingMethod.USED, **kwargs)


def burst_quantities(allocation):
    """``{source id: card-seconds}`` of ``allocation``'s burst records."""
    rows = UsageRecord.objects.filter(source=UsageSource.ELASTIC_BURST, allocation=allocation)
    return {r.source_id: r.quantity for r in rows}


def test_an_on_use_pod_on_the_burst_cards_is_billed_once_as_used(team, infer_pool, l40s, rented):
    """O scaled to 4 cards 10:00 → 12:00; pod p on 4 L40S of ``inf-01`` 10:00 → 12:00.
    No reserved line (priced on use). Used: 4 cards × 2 h = 8 card-h (28,800 card-s) in O
    × 5.00 = 40.00. The 2 cards × 2 h = 4 card-h above the floor are not burst too (their
    record kept at 0): total 40.00 (before: burst 4 × 6.00 = 24.00 more, 64.00)."""
    o = on_use(team, infer_pool, l40s, [(TEN, 4, 0), (NOON, 2, 0)])
    assert billed(team, [gpu_pod("p", "inf-01", 4, TEN, NOON)]) == (
        [(ChargeBasis.USED, Decimal(8), Decimal("40.00"))], Decimal("40.00"),
    )  # fmt: skip
    assert k8s_parts() == {(ChargeBasis.USED, o.pk): Decimal(28800)}
    assert burst_quantities(o) == {f"burst:{o.pk}:2026-10": Decimal(0)}


def test_burst_cards_an_on_use_allocation_left_idle_cost_nothing(team, infer_pool, l40s, rented):
    """O scaled to 4 cards 10:00 → 12:00 while pod p keeps 2: used 2 × 2 = 4 card-h (14,400
    card-s) × 5.00 = 20.00, the total (before: the idle burst cards' 4 card-h × 6.00 = 24.00
    more, 44.00)."""
    o = on_use(team, infer_pool, l40s, [(TEN, 4, 0), (NOON, 2, 0)])
    assert billed(team, [gpu_pod("p", "inf-01", 2, TEN, NOON)]) == (
        [(ChargeBasis.USED, Decimal(4), Decimal("20.00"))], Decimal("20.00"),
    )  # fmt: skip
    assert k8s_parts() == {(ChargeBasis.USED, o.pk): Decimal(14400)}


def test_an_on_use_allocation_pays_a_burst_pools_price_for_the_cards_placed_there(
    team, infer_pool, l40s, rented
):
    """O holds 5 cards 10:00 → 12:00, 2 of them placed in ``rented``: at home the floor 2 and
    1 burst card. Pod p on 3 L40S of ``inf-01``, pod q on 2 of ``x-01``, 10:00 → 12:00.
    - used: p 3 × 2 = 6 card-h (21,600 card-s) in O × 5.00 = 30.00;
    - burst pool: 2 × 2 = 4 card-h × 2.90 = 11.60, and q's 4 card-h (14,400 card-s) on those
      cards included in O (billed once, by that line);
    - home burst: (5 − 2 − 2) × 2 = 2 card-h, used by p and billed in its 30.00: record at 0.
    Total 41.60 (before: home burst 2 × 6.00 = 12.00 and q's 4 card-h used × 5.00 = 20.00
    more: 73.60)."""
    o = on_use(team, infer_pool, l40s, [(TEN, 5, 2), (NOON, 2, 0)], burst_pool=rented)
    pods = [gpu_pod("p", "inf-01", 3, TEN, NOON), gpu_pod("q", "x-01", 2, TEN, NOON)]
    x = rented.cluster
    meters = {"meter": LEGACY, "meters": MeterMap(node_clusters={"x-01": {x.pk}})}
    assert billed(team, pods, **meters) == (
        [(ChargeBasis.BURST_POOL, Decimal(4), Decimal("11.60")),
         (ChargeBasis.USED, Decimal(6), Decimal("30.00"))],
        Decimal("41.60"),
    )  # fmt: skip
    rows = UsageRecord.objects.filter(source=UsageSource.KUBERNETES, quantity__gt=0)
    assert sorted((r.source_id.split(":")[0], r.basis, r.allocation_id, r.quantity)
                  for r in rows) == [
        ("k8s", ChargeBasis.USED, o.pk, Decimal(21600)),
        (f"k8s@{x.pk}", ChargeBasis.INCLUDED, o.pk, Decimal(14400)),
    ]  # fmt: skip
    assert burst_quantities(o) == {
        f"burst:{o.pk}:2026-10": Decimal(0),
        f"burst-pool:{o.pk}:{rented.pk}:2026-10": Decimal(14400),
    }


def test_an_on_use_slurm_job_on_the_burst_cards_is_billed_once(team, train_pool, a100, rates):
    """The Slurm import's rule is the same. Elastic O in ``train`` priced on use: floor 2
    A100, 4 from 10:00 to 12:00; job 1 on 4 A100 10:00 → 12:00: 8 card-h (28,800 card-s) used
    in O × 3.00 = 24.00, the total (before: burst 4 card-h × 2.00, the reserved price, = 8.00
    more: 32.00)."""
    o = on_use(team, train_pool, a100, [(TEN, 4, 0), (NOON, 2, 0)])
    usage_import_reservations(**MONTH)
    usage_import_elastic_burst(**MONTH)
    usage_import_slurm(scheduler=Accounting([job(1, TEN, NOON, {"a100": 4})]), **MONTH)
    assert lines(team) == ([(ChargeBasis.USED, Decimal(8), Decimal("24.00"))], Decimal("24.00"))
    rows = UsageRecord.objects.filter(source=UsageSource.SLURM_ACCOUNTING, quantity__gt=0)
    assert [(r.basis, r.allocation_id, r.quantity) for r in rows] == [
        (ChargeBasis.USED, o.pk, Decimal(28800))
    ]


def test_a_token_allocations_burst_cards_are_paid_by_its_tokens(team, infer_pool, l40s, rates):
    """Elastic T priced by tokens: floor 2 L40S, 4 from 10:00 to 12:00; pod p on 4 L40S of
    ``inf-01`` 10:00 → 12:00: 4 × 2 = 8 card-h (28,800 card-s), all on cards T held then,
    included in T. Its tokens pay for its cards, floor and burst alike (no tokens posted here):
    the home burst, (4 − 2) × 2 = 4 card-h, is kept at 0, as for one priced on use. Total 0.00
    (before: burst 4 × 8.00 = 32.00 and the pod's 8 card-h used × 8.00 = 64.00: 96.00)."""
    t = elastic(team, infer_pool, l40s, [(TEN, 4, 0), (NOON, 2, 0)], pricing=PricingMethod.TOKENS)
    assert billed(team, [gpu_pod("p", "inf-01", 4, TEN, NOON)]) == ([], Decimal("0.00"))
    assert k8s_parts() == {(ChargeBasis.INCLUDED, t.pk): Decimal(28800)}
    assert burst_quantities(t) == {f"burst:{t.pk}:2026-10": Decimal(0)}
