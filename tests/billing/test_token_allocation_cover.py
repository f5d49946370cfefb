"""An allocation priced by tokens pays for its tokens only: the card-hours of its pods and jobs
inside its window, place and cards are ``included`` (shown, never charged), as inside a
reservation (:mod:`billing.reserved_cover`); usage beyond its cards is charged as used.

Worked by hand. Team ``nlp``; rate card ``test``: L40S used 8.00, A100 used 3.00 EUR per
card-hour; served model ``qwen`` input 2.00, cached input 0.50, output 8.00 EUR per million
tokens. October 2026 (UTC).

Kubernetes, allocation T priced by tokens: 2 L40S in pool ``infer`` (namespace ``team-nlp``),
5 Oct 00:00 → 7 Oct 00:00. Its served model's tokens, posted by the gateway on 5 Oct 12:00:
3,000,000 prompt tokens of which 1,000,000 cached, 500,000 completion tokens:
2,000,000 × 2.00 / 1e6 = 4.00 + 1,000,000 × 0.50 / 1e6 = 0.50 + 500,000 × 8.00 / 1e6 = 4.00
= 8.50 EUR.

- pod s: 2 L40S on ``inf-01``, 5 Oct 10:00 → 15:00, inside T and within its cards:
  2 × 5 = 10 card-hours = 36,000 card-s, included. Statement 8.50 (before: also
  10 × 8.00 = 80.00 used, 88.50: the same cards paid twice);
- pod w: 3 L40S on ``inf-02``, 6 Oct 10:00 → 12:00: 2 cards inside T (2 × 2 = 4 card-hours =
  14,400 card-s, included), the third beyond its cards (1 × 2 = 2 card-hours = 7,200 card-s,
  used: 16.00). Statement 8.50 + 16.00 = 24.50 (before: 6 × 8.00 = 48.00 + 8.50 = 56.50);
- T bound to namespace ``nlp-serve`` instead: pod s (``team-nlp``) is not in T's place, so
  it is used: 80.00 + 8.50 = 88.50.

Slurm, allocation S priced by tokens: 2 A100 in pool ``train`` (partition ``train``),
5 Oct 10:00 → 14:00. Job 1: 2 A100 10:00 → 12:00, inside S: 2 × 2 = 4 card-hours = 14,400
card-s, included; job 2: 1 A100 11:00 → 12:00, started after job 1 so beyond S's 2 cards:
1 card-hour = 3,600 card-s used = 3.00. Statement 3.00 + 8.50 = 11.50 (before: 5 × 3.00 =
15.00 + 8.50 = 23.50). The reservation import writes nothing for S (not reserved).
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from factories import AllocationFactory, UsageRecordFactory
from kit import Accounting, idle_rows, job, utc
from prometheus_support import gpu_pod

from billing.choices import ChargeBasis, UsageSource
from billing.models import UsageRecord
from billing.services.prometheus_import import usage_import_kubernetes
from billing.services.statements import statement_build
from billing.services.tokens import usage_tokens_ingest
from billing.services.usage_import import usage_import_reservations, usage_import_slurm
from pools.common.choices import AllocationStatus, PricingMethod
from scheduler_adapters.prometheus_fake import FakePrometheus

pytestmark = pytest.mark.django_db

OCT = date(2026, 10, 1)
MONTH = {"start": utc(2026, 10, 1), "end": utc(2026, 11, 1), "now": utc(2026, 11, 2)}
POD_S = gpu_pod("s", "inf-01", 2, utc(2026, 10, 5, 10), utc(2026, 10, 5, 15))
POD_W = gpu_pod("w", "inf-02", 3, utc(2026, 10, 6, 10), utc(2026, 10, 6, 12))
TOKENS_AMOUNT = Decimal("8.50")


@pytest.fixture
def tokens(team, rates):
    """T's served model's tokens (module docstring): 8.50 EUR."""
    result = usage_tokens_ingest(records=[{
        "idempotency_key": "serve-1", "team": "nlp", "served_model": "qwen",
        "prompt_tokens": 3_000_000, "cached_tokens": 1_000_000, "completion_tokens": 500_000,
        "timestamp": "2026-10-05T12:00:00+00:00",
    }])  # fmt: skip
    assert (result.accepted, result.rejected) == (1, [])


def _token_allocation(team, pool, gpu_model, start, end, **fields):
    return AllocationFactory(team=team, pool=pool, gpu_model=gpu_model, card_count=2,
                             starts_at=start, ends_at=end, status=AllocationStatus.ENDED,
                             pricing_method=PricingMethod.TOKENS, **fields)  # fmt: skip


@pytest.fixture
def on_k8s(team, infer_pool, l40s, tokens):
    """T (module docstring)."""
    return _token_allocation(team, infer_pool, l40s, utc(2026, 10, 5), utc(2026, 10, 7))


def _import_k8s(*pods):
    return usage_import_kubernetes(metrics=FakePrometheus(series=list(pods)), **MONTH)


def _k8s_records():
    """``(day, key's last part, basis, allocation id, card-seconds)`` in key order."""
    rows = UsageRecord.objects.filter(source=UsageSource.KUBERNETES).order_by("source_id")
    return [(r.source_id.split(":")[3], r.source_id.split(":")[4], r.basis, r.allocation_id,
             r.quantity) for r in rows]  # fmt: skip


def _statement(team):
    statement = statement_build(team=team, month=OCT, now=MONTH["now"])
    lines = [(x.basis, x.unit, x.quantity, x.amount) for x in statement.lines.order_by("position")]
    return lines, statement.total_amount


TOKEN_LINES = [
    (ChargeBasis.TOKENS, "input-tokens", Decimal(2_000_000), Decimal("4.00")),
    (ChargeBasis.TOKENS, "cached-input-tokens", Decimal(1_000_000), Decimal("0.50")),
    (ChargeBasis.TOKENS, "output-tokens", Decimal(500_000), Decimal("4.00")),
]


def test_a_pod_inside_a_token_allocation_is_paid_by_its_tokens_only(on_k8s, team):
    _import_k8s(POD_S)
    assert _k8s_records() == [
        ("2026-10-05", f"alloc{on_k8s.pk}", ChargeBasis.INCLUDED, on_k8s.pk, Decimal(36000)),
    ]
    # 10 card-hours included (not charged) + the tokens' 8.50; before: 80.00 more
    assert _statement(team) == (TOKEN_LINES, TOKENS_AMOUNT)
    # idle cost at the reserved rate: capacity 8 × 744 h × 8.00 = 47,616.00; T held 2 × 48 h
    # = 96 card-hours × 8.00 = 768.00; nothing used outside allocations (before: pod s's
    # 10 × 8.00 = 80.00, counted beside T's held time); idle 47,616.00 − 768.00 = 46,848.00;
    # utilisation 768.00 / 47,616.00 = 1.61 % → 1.6 (before 848.00 / 47,616.00 → 1.8)
    assert idle_rows(OCT) == [
        ("infer", Decimal("47616.00"), Decimal("768.00"), Decimal("0.00"), Decimal("46848.00"),
         Decimal("1.6")),
    ]  # fmt: skip


def test_usage_beyond_its_cards_is_charged_as_used(on_k8s, team):
    _import_k8s(POD_W)
    assert _k8s_records() == [
        ("2026-10-06", f"alloc{on_k8s.pk}", ChargeBasis.INCLUDED, on_k8s.pk, Decimal(14400)),
        ("2026-10-06", "used", ChargeBasis.USED, None, Decimal(7200)),
    ]
    lines, total = _statement(team)
    # 1 card × 2 h = 2 card-hours × 8.00 = 16.00, then the tokens: 16.00 + 8.50 = 24.50
    assert lines == [(ChargeBasis.USED, "card-hours", Decimal(2), Decimal("16.00")), *TOKEN_LINES]
    assert total == Decimal("24.50")


def test_a_month_imported_before_is_replaced_and_reimporting_changes_nothing(on_k8s, team):
    """Imported before the rule: 5 Oct's 36,000 card-s were one ``used`` record (charged,
    80.00). Importing again sets it to 0 in place and adds T's ``included`` record (created 1,
    updated 1): nothing is counted twice; a further import finds T's record unchanged (the
    ``used`` one, at 0, is not written again) and changes nothing."""
    used = UsageRecordFactory(
        team=team, gpu_model=on_k8s.gpu_model, quantity=Decimal(36000), basis=ChargeBasis.USED,
        source=UsageSource.KUBERNETES, source_id="k8s:team-nlp:l40s:2026-10-05:used",
        month=OCT, period_start=utc(2026, 10, 5), period_end=utc(2026, 10, 6),
    )  # fmt: skip
    assert _statement(team)[1] == Decimal("88.50")  # 80.00 + 8.50: the double charge

    first = _import_k8s(POD_S)
    assert (first.records_created, first.records_updated) == (1, 1)
    assert _k8s_records() == [
        ("2026-10-05", f"alloc{on_k8s.pk}", ChargeBasis.INCLUDED, on_k8s.pk, Decimal(36000)),
        ("2026-10-05", "used", ChargeBasis.USED, None, Decimal(0)),
    ]
    used.refresh_from_db()
    assert used.quantity == 0  # the same record, not a second one
    assert _statement(team) == (TOKEN_LINES, TOKENS_AMOUNT)

    before = list(UsageRecord.objects.order_by("pk").values())
    again = _import_k8s(POD_S)
    assert (again.records_created, again.records_updated, again.records_unchanged) == (0, 0, 1)
    assert list(UsageRecord.objects.order_by("pk").values()) == before


def test_a_token_allocation_in_another_namespace_does_not_cover_this_ones_pods(
    team, infer_pool, l40s, tokens
):
    other = _token_allocation(team, infer_pool, l40s, utc(2026, 10, 5), utc(2026, 10, 7),
                              scheduler_binding={"namespace": "nlp-serve"})  # fmt: skip
    _import_k8s(POD_S)
    assert _k8s_records() == [("2026-10-05", "used", ChargeBasis.USED, None, Decimal(36000))]
    # 10 card-hours × 8.00 = 80.00 + 8.50 = 88.50
    assert _statement(team)[1] == Decimal("88.50")
    # its own namespace's pod is covered
    UsageRecord.objects.filter(source=UsageSource.KUBERNETES).delete()
    _import_k8s(gpu_pod("s", "inf-01", 2, utc(2026, 10, 5, 10), utc(2026, 10, 5, 15),
                        namespace="nlp-serve"))  # fmt: skip
    covered = UsageRecord.objects.filter(source=UsageSource.KUBERNETES, allocation=other)
    assert [(r.basis, r.quantity) for r in covered] == [(ChargeBasis.INCLUDED, Decimal(36000))]


def test_slurm_jobs_inside_a_token_allocation_are_included_beyond_its_cards_used(
    team, train_pool, a100, tokens
):
    allocation = _token_allocation(team, train_pool, a100, utc(2026, 10, 5, 10),
                                   utc(2026, 10, 5, 14))  # fmt: skip
    jobs = [
        job(1, utc(2026, 10, 5, 10), utc(2026, 10, 5, 12), {"a100": 2}),
        job(2, utc(2026, 10, 5, 11), utc(2026, 10, 5, 12), {"a100": 1}),
    ]
    usage_import_slurm(scheduler=Accounting(jobs), **MONTH)
    usage_import_reservations(**MONTH)
    rows = UsageRecord.objects.filter(quantity__gt=0).exclude(source=UsageSource.TOKEN_API)
    assert sorted((r.source_id.split(":")[1], r.basis, r.allocation_id, r.quantity)
                  for r in rows) == [
        ("1", ChargeBasis.INCLUDED, allocation.pk, Decimal(14400)),
        ("2", ChargeBasis.USED, None, Decimal(3600)),
    ]  # fmt: skip
    lines, total = _statement(team)
    # job 2's 1 card-hour × 3.00 = 3.00, then the tokens: 3.00 + 8.50 = 11.50
    assert lines == [(ChargeBasis.USED, "card-hours", Decimal(1), Decimal("3.00")), *TOKEN_LINES]
    assert total == Decimal("11.50")
