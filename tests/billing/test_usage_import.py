"""Importers: month splits, idempotency, requeues, running jobs, C10/C24/C28 cases."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from django.test import override_settings
from kit import Accounting, job, utc

from billing.choices import ChargeBasis, UsageFlag, UsageSource
from billing.models import UsageRecord
from billing.sacct import SacctFile
from billing.services.usage_import import usage_import_reservations, usage_import_slurm
from scheduler_adapters.fake import FakeScheduler
from scheduler_adapters.records import JobSpec, JobState

pytestmark = pytest.mark.django_db

OCT, NOV = date(2026, 10, 1), date(2026, 11, 1)
WINDOW = {"start": utc(2026, 10, 1), "end": utc(2026, 12, 1), "now": utc(2026, 12, 2)}


def by_month():
    rows = UsageRecord.objects.order_by("month", "source_id")
    return [(r.month, r.quantity) for r in rows]


def test_job_across_month_end_is_one_card_hour_in_each(team, train_pool):
    # 2 A100 × 23:30 → 00:00 = 2 × 1800 s = 3600 card-s = 1 card-h in October, same in November
    jobs = Accounting([job(7, utc(2026, 10, 31, 23, 30), utc(2026, 11, 1, 1, 30), {"a100": 2})])
    usage_import_slurm(scheduler=jobs, **WINDOW)
    assert by_month() == [(OCT, Decimal(3600)), (NOV, Decimal(3600) * 3)]
    # 00:00 → 01:30 is 1.5 h × 2 = 3 card-h in November (the issue's "1 card-hour" holds for
    # the October side; the November side runs 90 minutes).


def test_job_from_2330_to_0030_is_split_evenly(team, train_pool):
    jobs = Accounting([job(8, utc(2026, 10, 31, 23, 30), utc(2026, 11, 1, 0, 30), {"a100": 2})])
    usage_import_slurm(scheduler=jobs, **WINDOW)
    assert by_month() == [(OCT, Decimal(3600)), (NOV, Decimal(3600))]


def test_same_job_imported_twice_is_charged_once(team, train_pool):
    jobs = Accounting([job(7, utc(2026, 10, 31, 23, 30), utc(2026, 11, 1, 0, 30), {"a100": 2})])
    first = usage_import_slurm(scheduler=jobs, **WINDOW)
    before = list(UsageRecord.objects.order_by("pk").values())
    second = usage_import_slurm(scheduler=jobs, **WINDOW)
    assert (first.records_created, second.records_created, second.records_unchanged) == (2, 0, 2)
    assert list(UsageRecord.objects.order_by("pk").values()) == before  # not even updated_at


def test_requeued_job_counts_each_run_once(team, train_pool):
    # run 1: 10:00 → 10:10 (requeued), run 2: 10:12 → 11:12; 2 cards: 1200 + 7200 card-s
    runs = [
        job(9, utc(2026, 10, 5, 10), utc(2026, 10, 5, 10, 10), {"a100": 2},
            state=JobState.REQUEUED),
        job(9, utc(2026, 10, 5, 10, 12), utc(2026, 10, 5, 11, 12), {"a100": 2}),
    ]  # fmt: skip
    usage_import_slurm(scheduler=Accounting(runs), **WINDOW)
    usage_import_slurm(scheduler=Accounting(runs), **WINDOW)
    assert sorted(r.quantity for r in UsageRecord.objects.all()) == [1200, 7200]


def test_running_job_is_replaced_when_it_ends(team, train_pool):
    """Through the FakeScheduler: metered up to now while running, then replaced, not added."""
    clock = [utc(2026, 10, 10, 8)]
    fake = FakeScheduler({"train": {"a100": 4}}, clock=lambda: clock[0])
    fake.ensure_account("nlp", description="NLP", organization="org")
    fake.ensure_user_association("nlp", "alice", "train")
    job_id = fake.submit_job(JobSpec(account="nlp", user="alice", partition="train",
                                     script="#!/bin/sh\n", gpus=2, gres_type="a100",
                                     time_limit_min=600))  # fmt: skip
    clock[0] = utc(2026, 10, 10, 9)  # running for 1 h: 2 × 3600
    usage_import_slurm(scheduler=fake, start=utc(2026, 10, 10), end=utc(2026, 10, 11), now=clock[0])
    assert [r.quantity for r in UsageRecord.objects.all()] == [7200]
    clock[0] = utc(2026, 10, 10, 11)
    fake.finish_job(job_id)  # ran 3 h: 2 × 10800
    clock[0] = utc(2026, 10, 10, 12)
    report = usage_import_slurm(
        scheduler=fake, start=utc(2026, 10, 10), end=utc(2026, 10, 11), now=clock[0]
    )  # noqa: E501
    assert (report.records_created, report.records_updated) == (0, 1)
    assert [r.quantity for r in UsageRecord.objects.all()] == [21600]


def test_c24_running_job_and_month_boundary(team, tricky_inputs, db):
    from factories import PoolFactory, node_with_gpus

    assert "220.00" in tricky_inputs["C24"]["expected"]
    pool = PoolFactory(slug="h", slurm_partition="h")
    node_with_gpus(8, gpu_model="h100_sxm", hostname="h-01", pool=pool)
    jobs = Accounting([
        job(5001, utc(2024, 1, 31, 22), utc(2024, 2, 1, 3, 30), {"h100": 4}, partition="h"),
        job(5002, utc(2024, 2, 29, 20), None, {"h100": 2}, partition="h"),
    ])  # fmt: skip
    usage_import_slurm(scheduler=jobs, start=utc(2024, 2, 1), end=utc(2024, 3, 1),
                       now=utc(2024, 3, 1, 2))  # fmt: skip
    hours = {}
    for r in UsageRecord.objects.all():
        hours[r.month] = hours.get(r.month, 0) + r.quantity / 3600
    # Jan 2 h × 4 = 8; Feb 3.5 × 4 + 4 × 2 = 22; March (running, up to 02:00) 2 × 2 = 4
    assert hours == {date(2024, 1, 1): 8, date(2024, 2, 1): 22, date(2024, 3, 1): 4}


def test_c10_sacct_rows_typed_untyped_steps_mig_multinode(team, train_pool, tricky_inputs):
    from factories import node_with_gpus

    node_with_gpus(8, gpu_model="h100_sxm", hostname="trn-h", pool=train_pool)
    assert tricky_inputs["C10"]["id"] == "C10"
    text = (
        "JobID|State|Account|Partition|Start|End|ElapsedRaw|AllocTRES\n"
        "1001|COMPLETED|nlp|train|2026-10-02T00:00:00|2026-10-02T02:00:00|7200|billing=64,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=64G,node=1\n"  # noqa: E501
        "1001.batch|COMPLETED|nlp|train|2026-10-02T00:00:00|2026-10-02T02:00:00|7200|cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=64G,node=1\n"  # noqa: E501
        "1001.extern|COMPLETED|nlp|train|2026-10-02T00:00:00|2026-10-02T02:00:00|7200|billing=64,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=64G,node=1\n"  # noqa: E501
        "1002|COMPLETED|nlp|train|2026-10-03T00:00:00|2026-10-03T01:30:00|5400|billing=32,cpu=4,gres/gpu:a100_3g.20gb=1,gres/gpu=1,mem=30G,node=1\n"  # noqa: E501
        "1003|COMPLETED|nlp|train|2026-10-04T00:00:00|2026-10-04T01:00:00|3600|billing=128,cpu=64,gres/gpu:h100=8,gres/gpu=8,mem=1000G,node=2\n"  # noqa: E501
    )
    report = usage_import_slurm(scheduler=SacctFile(text), **WINDOW)
    assert report.jobs_seen == 3  # steps skipped
    hours = {r.source_id.split(":")[1]: r.quantity / 3600 for r in UsageRecord.objects.all()}
    # 1001: 2 × 2 h = 4.0 (not 8 or 24); 1002: 3/7 × 1.5 h = 0.642857 A100; 1003: 8 × 1 h = 8
    assert hours["1001"] == 4
    assert hours["1002"].quantize(Decimal("0.000001")) == Decimal("0.642857")
    assert hours["1003"] == 8
    assert {r.gpu_model.slug for r in UsageRecord.objects.all()} == {"a100_80g_sxm", "h100_sxm"}


def test_c28_zero_missing_negative_durations(team, train_pool, tricky_inputs):
    assert tricky_inputs["C28"]["id"] == "C28"
    jobs = Accounting([
        job(8101, None, utc(2024, 6, 1, 10, 5), {None: 4}, state=JobState.CANCELLED),
        job(8100, utc(2024, 6, 1, 12, 0, 42), utc(2024, 6, 1, 12), {None: 1}),  # skewed clocks
        job(8102, utc(2024, 6, 1, 13), utc(2024, 6, 1, 13), {None: 2}),
    ])  # fmt: skip
    report = usage_import_slurm(scheduler=jobs, start=utc(2024, 6, 1), end=utc(2024, 7, 1),
                                now=utc(2024, 7, 2))  # fmt: skip
    assert report.jobs_seen == 3
    assert report.flagged == 1
    assert [i["code"] for i in report.issues] == ["clock_skew"]
    assert [(r.quantity, r.flag) for r in UsageRecord.objects.all()] == [(0, UsageFlag.CLOCK_SKEW)]
    # untyped gres/gpu charged at the partition's only model (A100)
    assert UsageRecord.objects.get().gpu_model.slug == "a100_80g_sxm"


def test_unknown_account_and_gpu_type_are_reported_not_charged(team, train_pool):
    jobs = Accounting([
        job(1, utc(2026, 10, 2), utc(2026, 10, 2, 1), {"a100": 1}, account="ghost"),
        job(2, utc(2026, 10, 2), utc(2026, 10, 2, 1), {"rtx9999": 1}),
    ])  # fmt: skip
    report = usage_import_slurm(scheduler=jobs, **WINDOW)
    assert sorted(i["code"] for i in report.issues) == ["unknown_account", "unknown_gpu_model"]
    assert not UsageRecord.objects.exists()


def test_jobs_inside_a_reserved_allocation_are_included_not_charged(team, train_pool, a100):
    from factories import AllocationFactory

    from pools.common.choices import AllocationStatus

    AllocationFactory(team=team, pool=train_pool, gpu_model=a100, card_count=4,
                      starts_at=utc(2026, 10, 1), ends_at=utc(2026, 10, 20),
                      status=AllocationStatus.ENDED)  # fmt: skip
    jobs = Accounting(
        [
            job(3, utc(2026, 10, 2), utc(2026, 10, 2, 1), {"a100": 1}),
            job(4, utc(2026, 10, 25), utc(2026, 10, 25, 1), {"a100": 1}),
        ]
    )
    usage_import_slurm(scheduler=jobs, **WINDOW)
    charged = UsageRecord.objects.filter(quantity__gt=0)  # job 3's own key is kept at 0
    assert sorted(charged.values_list("basis", flat=True)) == [
        ChargeBasis.INCLUDED, ChargeBasis.USED]  # fmt: skip


def test_reservations_cards_times_wall_time_per_month(team, train_pool, a100):
    from factories import AllocationFactory

    from pools.common.choices import AllocationStatus

    # 4 cards 30 Oct 12:00 → 2 Nov 12:00: Oct 36 h × 4 = 144 card-h, Nov 36 h × 4 = 144
    allocation = AllocationFactory(team=team, pool=train_pool, gpu_model=a100, card_count=4,
                                   starts_at=utc(2026, 10, 30, 12), ends_at=utc(2026, 11, 2, 12),
                                   status=AllocationStatus.ENDED)  # fmt: skip
    usage_import_reservations(**WINDOW)
    usage_import_reservations(start=utc(2026, 10, 15), end=utc(2026, 11, 15), now=WINDOW["now"])
    assert by_month() == [(OCT, Decimal(144 * 3600)), (NOV, Decimal(144 * 3600))]
    assert UsageRecord.objects.filter(source=UsageSource.RESERVATION).first().source_id == (
        f"alloc:{allocation.pk}:2026-10"
    )


def test_reservation_not_charged_ahead_of_now(team, train_pool, a100):
    from factories import AllocationFactory

    AllocationFactory(team=team, pool=train_pool, gpu_model=a100, card_count=1,
                      starts_at=utc(2026, 10, 1), ends_at=utc(2026, 10, 31))  # fmt: skip
    usage_import_reservations(start=utc(2026, 10, 1), end=utc(2026, 11, 1), now=utc(2026, 10, 2))
    assert by_month() == [(OCT, Decimal(86400))]


@override_settings(BILLING_TIME_ZONE="Europe/Berlin")
def test_dst_day_in_berlin_reservation(team, train_pool, a100):
    from factories import AllocationFactory

    from pools.common.choices import AllocationStatus

    # 26 Oct 2025 00:00 CEST (25 Oct 22:00Z) → 27 Oct 00:00 CET (26 Oct 23:00Z): 25 h × 2 cards
    AllocationFactory(team=team, pool=train_pool, gpu_model=a100, card_count=2,
                      starts_at=datetime(2025, 10, 25, 22, tzinfo=UTC),
                      ends_at=datetime(2025, 10, 26, 23, tzinfo=UTC),
                      status=AllocationStatus.ENDED)  # fmt: skip
    usage_import_reservations(start=utc(2025, 10, 1), end=utc(2025, 11, 1), now=utc(2025, 12, 1))
    assert by_month() == [(date(2025, 10, 1), Decimal(2 * 25 * 3600))]


@override_settings(BILLING_TIME_ZONE="Europe/Berlin")
def test_month_boundary_in_berlin(team, train_pool):
    # 31 Oct 22:30Z = 23:30 CET → 1 Nov 00:30Z = 01:30 CET: 30 min Oct, 90 min Nov, × 2 cards
    jobs = Accounting([job(5, utc(2025, 10, 31, 22, 30), utc(2025, 11, 1, 0, 30), {"a100": 2})])
    usage_import_slurm(scheduler=jobs, start=utc(2025, 10, 1), end=utc(2025, 12, 1),
                       now=utc(2025, 12, 2))  # fmt: skip
    assert by_month() == [(date(2025, 10, 1), Decimal(3600)), (date(2025, 11, 1), Decimal(10800))]


def test_a_reclamation_shrink_does_not_reprice_the_days_before_it(team, train_pool, a100):
    from factories import AllocationFactory

    from pools.common.choices import AllocationStatus, IdleFindingState
    from pools.reclamation.models import IdleFinding

    # 8 cards from 30 Oct 12:00; shrunk to 2 at 31 Oct 22:00 (34 h in); the reclamation undone
    # at 1 Nov 02:00 (back to 8); shrunk again to 2 at 1 Nov 12:00; ended 2 Nov 12:00
    allocation = AllocationFactory(team=team, pool=train_pool, gpu_model=a100, card_count=2,
                                   starts_at=utc(2026, 10, 30, 12), ends_at=utc(2026, 11, 2, 12),
                                   status=AllocationStatus.ENDED)  # fmt: skip
    for reclaimed, closed, state in (
        (utc(2026, 10, 31, 22), utc(2026, 11, 1, 2), IdleFindingState.UNDONE),
        (utc(2026, 11, 1, 12), None, IdleFindingState.RECLAIMED),
    ):
        IdleFinding.objects.create(allocation=allocation, first_seen_at=reclaimed,
                                   last_seen_at=reclaimed, reclaimed_at=reclaimed,
                                   closed_at=closed, state=state, card_count=8,
                                   cards_in_use=2, cards_reclaimed=6)  # fmt: skip
    usage_import_reservations(**WINDOW)
    # October: 8 × 34 h + 2 × 2 h = 276 card-h; November: 2 × 2 h + 8 × 10 h + 2 × 24 h = 132
    assert by_month() == [(OCT, Decimal(276 * 3600)), (NOV, Decimal(132 * 3600))]


# --- issue 18 kind 2: Slurm accounting that does not record GPUs --------------------------------
# skypilot-org/skypilot#10319: a node with GRES gpu:h100:8 whose CfgTRES/AllocTRES carry no GPU
# ("AllocTRES=cpu=64,mem=400G,billing=64") because AccountingStorageTRES lacks gres/gpu, while
# "GresUsed=gpu:h100:5(IDX:0-4)"; nebius/soperator#565: "AccountingStorageTRES =
# cpu,mem,energy,node,billing,fs/disk,vmem,pages" (no gres/gpu).


def test_gpu_partition_jobs_without_any_gpu_tres_are_a_configuration_error(team, train_pool):
    jobs = Accounting([
        job(1, utc(2026, 10, 2), utc(2026, 10, 2, 1), {}),  # train: 8 x A100 in the inventory
        job(2, utc(2026, 10, 3), utc(2026, 10, 3, 2), {}),
        job(3, None, None, {}),  # pending: held no node
    ])  # fmt: skip
    report = usage_import_slurm(scheduler=jobs, **WINDOW)
    first = report.issues[0]
    assert first["code"] == "accounting_without_gpu_tres"
    assert first["detail"].startswith("2 job(s) ran in GPU partition(s) train")
    assert "AccountingStorageTRES lacks gres/gpu" in first["detail"]
    assert not UsageRecord.objects.exists()


def test_one_job_with_gpu_tres_shows_accounting_records_gpus(team, train_pool):
    jobs = Accounting([
        job(1, utc(2026, 10, 2), utc(2026, 10, 2, 1), {}),  # a CPU-only job on a GPU node
        job(2, utc(2026, 10, 2), utc(2026, 10, 2, 1), {"a100": 1}),
    ])  # fmt: skip
    report = usage_import_slurm(scheduler=jobs, **WINDOW)
    assert [i["code"] for i in report.issues] == []
    assert UsageRecord.objects.get().quantity == Decimal("3600.000000")


def test_cpu_partition_jobs_without_gpus_are_no_configuration_error(team, train_pool):
    jobs = Accounting([job(1, utc(2026, 10, 2), utc(2026, 10, 2, 1), {}, partition="cpu")])
    report = usage_import_slurm(scheduler=jobs, **WINDOW)
    assert report.issues == []


def test_an_sacct_file_from_such_a_cluster_reports_the_configuration_error(team, train_pool):
    text = (
        "JobID|State|Account|Partition|Start|End|ElapsedRaw|AllocTRES\n"
        "7001|COMPLETED|nlp|train|2026-10-02T10:00:00|2026-10-02T11:00:00|3600|"
        "billing=64,cpu=64,mem=400G,node=1\n"
    )
    sacct = SacctFile(text)
    issues = [i.as_issue() for i in sacct.issues]
    report = usage_import_slurm(scheduler=sacct, read_issues=issues, **WINDOW)
    assert [i["code"] for i in report.issues] == ["accounting_without_gpu_tres"]
