"""A reservation covers the team's usage in its own pool only, and a part in an allocation
cancelled since is taken back — :mod:`billing.reserved_cover` through the Slurm and Kubernetes
usage imports.

Worked by hand. Team ``nlp``; rate card ``test``: A100 reserved 2.00, used 3.00 EUR per
card-hour; L40S reserved 8.00, used 8.00. Reservation R: 4 A100 in the Slurm pool ``train``
(partition ``train`` of the environment's cluster), 5 Oct 2026 10:00 → 14:00: 4 × 4 = 16
reserved card-hours = 32.00 EUR. Every job and pod below holds 4 A100 (or 2 L40S) 10:00 →
12:00, inside R's window and within its cards: 4 × 2 = 8 A100 card-hours (28,800 card-s).

- job 2 in partition ``other`` (pool ``other``, same cluster): not R's pool, 8 card-h used =
  24.00; statement 32.00 + 24.00 = 56.00 (before: included, 32.00);
- job 11 in partition ``train`` of cluster ``b`` (pool ``train-b``, another cluster, read by
  its own import) beside job 1 in ``train`` at home: job 1 included 8, job 11 used 8 = 24.00;
  statement 56.00 (before: each import gave R's 4 cards to its own job: 8 cards covered by 4,
  32.00);
- a pod on an A100 node of a Kubernetes pool beside job 1: job 1 included 8, the pod used 8 =
  24.00; statement 56.00 (before: the Kubernetes import covered it too, 32.00).

Kubernetes, reservation K: 2 L40S in pool ``infer`` (the environment's cluster, namespace
``team-nlp``), 10:00 → 12:00. Pod p1: 2 L40S on ``inf-01`` (``infer``); pod p2: 2 L40S on
``x-01`` in cluster ``x``'s pool, both 10:00 → 12:00, each 2 × 2 = 4 card-h = 14,400 card-s:
p1 included in K, p2 used (before: p2 first in (cluster, namespace, node) order, ``5`` <
``None``, took K's 2 cards and p1 was used).
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from factories import AllocationFactory, ClusterFactory, PoolFactory, node_with_gpus
from kit import Accounting, job, utc
from prometheus_support import gpu_pod

from billing.choices import ChargeBasis, UsageSource
from billing.models import UsageRecord
from billing.services.prometheus_import import usage_import_kubernetes
from billing.services.prometheus_meters import LEGACY, MeterMap
from billing.services.statements import statement_build
from billing.services.usage_import import usage_import_reservations, usage_import_slurm
from pools.capacity.models import Allocation
from pools.common.choices import AllocationStatus, PricingMethod, Scheduler
from scheduler_adapters.prometheus_fake import FakePrometheus

pytestmark = pytest.mark.django_db

OCT = date(2026, 10, 1)
H = 3600
MONTH = {"start": utc(2026, 10, 1), "end": utc(2026, 11, 1), "now": utc(2026, 11, 2)}
TEN, NOON = utc(2026, 10, 5, 10), utc(2026, 10, 5, 12)


@pytest.fixture
def reservation(db, team, train_pool, a100):
    return AllocationFactory(team=team, pool=train_pool, gpu_model=a100, card_count=4,
                             starts_at=TEN, ends_at=utc(2026, 10, 5, 14),
                             status=AllocationStatus.ENDED)  # fmt: skip


def slurm_parts():
    """``{(job key, basis, allocation id): card-hours}`` of the Slurm records with usage; the
    job key is ``[<cluster>/]<job id>``."""
    rows = UsageRecord.objects.filter(source=UsageSource.SLURM_ACCOUNTING, quantity__gt=0)
    return {(r.source_id.split(":")[1], r.basis, r.allocation_id): r.quantity / H for r in rows}


def statement_lines(team):
    statement = statement_build(team=team, month=OCT, now=MONTH["now"])
    lines = sorted((x.basis, x.quantity, x.amount) for x in statement.lines.all())
    return lines, statement.total_amount


# --- Slurm --------------------------------------------------------------------------------------


def test_a_job_in_another_partition_is_not_covered(reservation, team, rates):
    node_with_gpus(8, hostname="oth-01", pool=PoolFactory(slug="other"))
    usage_import_reservations(**MONTH)
    usage_import_slurm(scheduler=Accounting([job(2, TEN, NOON, {"a100": 4}, partition="other")]),
                       **MONTH)  # fmt: skip
    assert slurm_parts() == {("2", ChargeBasis.USED, None): 8}
    assert statement_lines(team) == (
        [(ChargeBasis.RESERVED, Decimal("16.000000"), Decimal("32.00")),
         (ChargeBasis.USED, Decimal("8.000000"), Decimal("24.00"))],
        Decimal("56.00"),
    )  # fmt: skip


def test_a_pool_of_a_whole_cluster_covers_every_partition_of_it(team, a100):
    """A Slurm pool without a partition is the whole cluster (its cap is on the account, not
    on a partition): its reservation W of 4 A100 covers job 2 in ``other`` — 8 card-h
    included."""
    whole = PoolFactory(slug="whole", slurm_partition="")
    node_with_gpus(8, hostname="oth-01", pool=PoolFactory(slug="other"))
    w = AllocationFactory(team=team, pool=whole, gpu_model=a100, card_count=4, starts_at=TEN,
                          ends_at=NOON, status=AllocationStatus.ENDED)  # fmt: skip
    usage_import_slurm(scheduler=Accounting([job(2, TEN, NOON, {"a100": 4}, partition="other")]),
                       **MONTH)  # fmt: skip
    assert slurm_parts() == {("2", ChargeBasis.INCLUDED, w.pk): 8}


def test_a_job_of_another_cluster_is_not_covered_by_its_own_import(reservation, team, rates):
    b = ClusterFactory(slug="b")
    node_with_gpus(8, hostname="trn-01", pool=PoolFactory(slug="train-b", cluster=b,
                                                          slurm_partition="train"))  # fmt: skip
    usage_import_reservations(**MONTH)
    usage_import_slurm(scheduler=Accounting([job(1, TEN, NOON, {"a100": 4})]), **MONTH)
    usage_import_slurm(scheduler=Accounting([job(11, TEN, NOON, {"a100": 4})]), cluster=b,
                       **MONTH)  # fmt: skip
    assert slurm_parts() == {
        ("1", ChargeBasis.INCLUDED, reservation.pk): 8,
        ("b/11", ChargeBasis.USED, None): 8,
    }
    assert statement_lines(team)[1] == Decimal("56.00")


def test_a_record_the_rule_before_gave_is_corrected_by_importing_again(reservation, team):
    """Imported before pools were matched: job 2 (partition ``other``) 8 card-h included in R
    under ``<key>:alloc<R>``, its own key at 0. Importing again sets R's part to 0 and the own
    key to the 8 card-h used."""
    node_with_gpus(8, hostname="oth-01", pool=PoolFactory(slug="other"))
    jobs = Accounting([job(2, TEN, NOON, {"a100": 4}, partition="other")])
    usage_import_slurm(scheduler=jobs, **MONTH)
    own = UsageRecord.objects.get(source=UsageSource.SLURM_ACCOUNTING)
    UsageRecord.objects.filter(pk=own.pk).update(quantity=0)
    UsageRecord.objects.create(
        team=team, gpu_model=own.gpu_model, allocation=reservation, quantity=8 * H,
        unit=own.unit, basis=ChargeBasis.INCLUDED, month=OCT, period_start=TEN, period_end=NOON,
        source=UsageSource.SLURM_ACCOUNTING, source_id=f"{own.source_id}:alloc{reservation.pk}",
        created_at=MONTH["now"], updated_at=MONTH["now"],
    )  # fmt: skip
    usage_import_slurm(scheduler=jobs, **MONTH)
    assert slurm_parts() == {("2", ChargeBasis.USED, None): 8}
    assert UsageRecord.objects.get(source_id__endswith=f"alloc{reservation.pk}").quantity == 0


# --- Slurm and Kubernetes -----------------------------------------------------------------------


def test_kubernetes_usage_of_the_model_is_not_covered_by_a_slurm_reservation(
    reservation, team, rates
):
    infer_a100 = PoolFactory(slug="infer-a100", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    node_with_gpus(4, hostname="ka-01", pool=infer_a100, scheduler=Scheduler.KUBERNETES)
    usage_import_reservations(**MONTH)
    usage_import_slurm(scheduler=Accounting([job(1, TEN, NOON, {"a100": 4})]), **MONTH)
    usage_import_kubernetes(metrics=FakePrometheus(series=[gpu_pod("p", "ka-01", 4, TEN, NOON)]),
                            **MONTH)  # fmt: skip
    assert slurm_parts() == {("1", ChargeBasis.INCLUDED, reservation.pk): 8}
    pods = UsageRecord.objects.filter(source=UsageSource.KUBERNETES, quantity__gt=0)
    assert [(r.source_id, r.basis, r.allocation_id, r.quantity) for r in pods] == [
        ("k8s:team-nlp:a100_80g_sxm:2026-10-05:used", ChargeBasis.USED, None, Decimal(28800))
    ]
    assert statement_lines(team)[1] == Decimal("56.00")


# --- Kubernetes ---------------------------------------------------------------------------------


@pytest.fixture
def cluster_x(db):
    x = ClusterFactory(slug="x", kind=Scheduler.KUBERNETES, api_url="https://x.example:6443")
    pool = PoolFactory(slug="x-gpu", cluster=x, scheduler=Scheduler.KUBERNETES,
                       slurm_partition="")  # fmt: skip
    node_with_gpus(4, gpu_model="l40s", hostname="x-01", pool=pool, scheduler=Scheduler.KUBERNETES)
    return x


def import_k8s(pods, x):
    usage_import_kubernetes(metrics=FakePrometheus(series=pods), meter=LEGACY,
                            meters=MeterMap(node_clusters={"x-01": {x.pk}}), **MONTH)  # fmt: skip


def k8s_parts():
    rows = UsageRecord.objects.filter(source=UsageSource.KUBERNETES).order_by("source_id")
    return {r.source_id: (r.basis, r.allocation_id, r.quantity) for r in rows}


def test_a_pod_in_another_cluster_is_not_covered(team, infer_pool, l40s, cluster_x):
    k = AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=2,
                          starts_at=TEN, ends_at=NOON, status=AllocationStatus.ENDED)  # fmt: skip
    pods = [
        gpu_pod("p1", "inf-01", 2, TEN, NOON),
        gpu_pod("p2", "x-01", 2, TEN, NOON),
    ]
    import_k8s(pods, cluster_x)
    x = cluster_x.pk
    assert k8s_parts() == {
        f"k8s:team-nlp:l40s:2026-10-05:alloc{k.pk}": (ChargeBasis.INCLUDED, k.pk, Decimal(14400)),
        f"k8s@{x}:team-nlp:l40s:2026-10-05:used": (ChargeBasis.USED, None, Decimal(14400)),
    }


def test_a_kubernetes_part_the_rule_before_gave_is_set_to_0(team, infer_pool, l40s, cluster_x):
    """Imported before pools were matched: p2 (cluster x) included in K under ``k8s@<x>:…:
    alloc<K>``, its day's ``used`` at 0. Importing again sets K's part to 0 and ``used`` to
    p2's 14,400 card-s."""
    k = AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=2,
                          starts_at=TEN, ends_at=NOON, status=AllocationStatus.ENDED)  # fmt: skip
    pods = [gpu_pod("p2", "x-01", 2, TEN, NOON)]
    import_k8s(pods, cluster_x)
    prefix = f"k8s@{cluster_x.pk}:team-nlp:l40s:2026-10-05"
    used = UsageRecord.objects.get(source_id=f"{prefix}:used")
    UsageRecord.objects.filter(pk=used.pk).update(quantity=0)
    UsageRecord.objects.create(
        team=team, gpu_model=l40s, allocation=k, quantity=14400, unit=used.unit,
        basis=ChargeBasis.INCLUDED, month=OCT, period_start=used.period_start,
        period_end=used.period_end, source=UsageSource.KUBERNETES,
        source_id=f"{prefix}:alloc{k.pk}", created_at=MONTH["now"], updated_at=MONTH["now"],
    )  # fmt: skip
    import_k8s(pods, cluster_x)
    assert k8s_parts() == {
        f"{prefix}:alloc{k.pk}": (ChargeBasis.INCLUDED, k.pk, Decimal(0)),
        f"{prefix}:used": (ChargeBasis.USED, None, Decimal(14400)),
    }


def test_a_kubernetes_part_in_a_reservation_cancelled_since_is_set_to_0(team, infer_pool, l40s):
    """p1 in K: 14,400 card-s included; K cancelled, imported again: K's part 0, p1 used."""
    k = AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=2,
                          starts_at=TEN, ends_at=NOON, status=AllocationStatus.ENDED)  # fmt: skip
    metrics = FakePrometheus(series=[gpu_pod("p1", "inf-01", 2, TEN, NOON)])
    usage_import_kubernetes(metrics=metrics, **MONTH)
    key = "k8s:team-nlp:l40s:2026-10-05"
    assert k8s_parts()[f"{key}:alloc{k.pk}"] == (ChargeBasis.INCLUDED, k.pk, Decimal(14400))
    Allocation.objects.filter(pk=k.pk).update(status=AllocationStatus.CANCELLED)
    usage_import_kubernetes(metrics=metrics, **MONTH)
    assert k8s_parts() == {
        f"{key}:alloc{k.pk}": (ChargeBasis.INCLUDED, k.pk, Decimal(0)),
        f"{key}:used": (ChargeBasis.USED, None, Decimal(14400)),
    }


def test_a_day_in_an_on_use_allocation_cancelled_since_is_charged_once(
    team, infer_pool, l40s, rates
):
    """U: 2 L40S priced on use, 10:00 → 12:00; p1 in it: 4 card-h used in U (its day's own
    ``used`` at 0). U cancelled, imported again: 4 card-h × 8.00 = 32.00 (before: U's record
    stayed beside the day's new ``used`` one, 8 card-h, 64.00)."""
    u = AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=2,
                          starts_at=TEN, ends_at=NOON, status=AllocationStatus.ENDED,
                          pricing_method=PricingMethod.USED)  # fmt: skip
    metrics = FakePrometheus(series=[gpu_pod("p1", "inf-01", 2, TEN, NOON)])
    usage_import_kubernetes(metrics=metrics, **MONTH)
    Allocation.objects.filter(pk=u.pk).update(status=AllocationStatus.CANCELLED)
    usage_import_kubernetes(metrics=metrics, **MONTH)
    assert statement_lines(team) == (
        [(ChargeBasis.USED, Decimal("4.000000"), Decimal("32.00"))],
        Decimal("32.00"),
    )


# --- the pure rule ------------------------------------------------------------------------------


def test_a_use_takes_its_own_places_reservation_before_a_whole_clusters():
    """10:00 → 11:00: W (id 1, 2 cards, any partition: a pool of the whole cluster, started
    first), T (id 2, 2 cards, ``train``), on-use U (id 3, ``dev``). Uses in rank order: x 2
    cards in ``train``, y 2 in ``dev``, z 1 in ``train``, v 1 in ``dev``. x takes T's 2 (its
    own place first), y W's 2; z and v find nothing left: z used in none (U is ``dev``'s), v
    used in U. Taking W first for x would have left y 2 card-h charged."""
    from fractions import Fraction

    from billing.reserved_cover import Held, Use, cover

    window = (TEN, utc(2026, 10, 5, 11))
    uses = [
        Use(name, (rank,), *window, Fraction(cards), where)
        for rank, (name, cards, where) in enumerate(
            [("x", 2, "train"), ("y", 2, "dev"), ("z", 1, "train"), ("v", 1, "dev")]
        )
    ]
    reserved = [Held(1, *window, Fraction(2)), Held(2, *window, Fraction(2), "train")]
    got = cover(uses, reserved, [Held(3, *window, where="dev")])
    hours = {k: {p: v.card_seconds / H for p, v in parts.items()} for k, parts in got.items()}
    assert hours == {
        "x": {(2, True): 2},
        "y": {(1, True): 2},
        "z": {(None, False): 1},
        "v": {(3, False): 1},
    }


def test_two_kubernetes_pools_of_one_cluster_cover_as_the_namespace_quota_allows(team, a100, rates):
    """Two Kubernetes pools of the environment's cluster with the same model are one place
    for the cover: the team's namespace ``team-nlp`` and its quota are per cluster, summed over
    both pools (``kubernetes_quota_wanted``), and pods are not pinned to a pool's nodes.

    RA: 2 A100 in pool ``ka`` (node ``ka-01``), RB: 2 A100 in pool ``kb`` (node ``kb-01``),
    both 10:00 → 12:00: quota 4 A100. Pod p: 4 A100 on ``ka-01`` 10:00 → 12:00, which that
    quota admits: 4 × 2 = 8 card-h = 28,800 card-s, 2 cards in each reservation: 14,400
    card-s included in RA and 14,400 in RB, none used. Statement: reserved 2 × 2 + 2 × 2 = 8
    card-h × 2.00 = 16.00, nothing more (a per-pool cover would charge RB's 2 cards again as
    used on ``ka-01``: 4 card-h × 3.00 = 12.00 more, for cards the team's own quota gave it)."""
    pools = {}
    for slug in ("ka", "kb"):
        pools[slug] = PoolFactory(slug=slug, scheduler=Scheduler.KUBERNETES, slurm_partition="")
        node_with_gpus(4, hostname=f"{slug}-01", pool=pools[slug], scheduler=Scheduler.KUBERNETES)
    ra, rb = (
        AllocationFactory(team=team, pool=pools[slug], gpu_model=a100, card_count=2,
                          starts_at=TEN, ends_at=NOON, status=AllocationStatus.ENDED)
        for slug in ("ka", "kb")
    )  # fmt: skip
    usage_import_reservations(**MONTH)
    usage_import_kubernetes(metrics=FakePrometheus(series=[gpu_pod("p", "ka-01", 4, TEN, NOON)]),
                            **MONTH)  # fmt: skip
    day = "k8s:team-nlp:a100_80g_sxm:2026-10-05"
    assert k8s_parts() == {
        f"{day}:alloc{ra.pk}": (ChargeBasis.INCLUDED, ra.pk, Decimal(14400)),
        f"{day}:alloc{rb.pk}": (ChargeBasis.INCLUDED, rb.pk, Decimal(14400)),
    }
    assert statement_lines(team)[1] == Decimal("16.00")
