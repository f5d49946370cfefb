"""Demo billing data: a clearly fake rate card, six months of usage for every demo team, drafts
of the closed months, and this month's usage so far. This month has no statement, as in a real
deployment until :func:`~billing.services.statements.statements_close_month` drafts it on the
1st: its cost page shows the live preview ("not drafted yet"), and ``demo_clock`` keeps accruing
its reserved card-hours (:func:`demo_usage_accrue`), so the cost so far moves.

Usage goes through the real importers: reservations from (demo, already ended) allocations, and
generated Slurm-like job records through :func:`usage_import_slurm`; token usage through
:func:`usage_tokens_ingest`. Seeded, so two runs give the same data; safe to run twice.
"""

from __future__ import annotations

import random
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from billing.budgets.models import Budget
from billing.budgets.selectors import budget_statuses
from billing.budgets.services import budget_create, budget_update, rate_card_currency
from billing.choices import RateKind, ShareBasis
from billing.conf import billing_zone
from billing.models import RateCard, SharedCardUse
from billing.pricing import local_midnight, month_of, next_month, previous_month
from billing.services.extra_charges import extra_charges_import
from billing.services.rates import rate_card_create
from billing.services.statements import statement_build
from billing.services.tokens import usage_tokens_ingest
from billing.services.usage_import import (
    usage_import_elastic_burst,
    usage_import_reservations,
    usage_import_slurm,
)
from billing.services.versions import shared_card_months_changed
from billing.tokenflow.demo import demo_agent_tasks_load
from pools.capacity.lifecycle import RUNNING_STATUSES
from pools.capacity.models import Allocation, CapacityRequest
from pools.capacity.request_fields import RequestFields
from pools.capacity.services.requests import capacity_request_create
from pools.common.choices import AllocationStatus, PricingMethod, RequestStatus, WorkloadKind
from pools.inventory.models import Gpu, GpuModel, Pool
from pools.tenancy.models import Team
from pools.tenancy.selectors import pool_admin_users, team_member_users
from scheduler_adapters.records import JobRecord, JobState

DAY = timedelta(days=1)
DEMO_CARD = "Demo prices — not real"
# EUR per card-hour (reserved, on use): H800 > A100 > L40S > RTX 4090, demo values only.
GPU_PRICES = {
    "h800_sxm": ("2.80", "3.40"),
    "a100_80g_sxm": ("1.90", "2.30"),
    "a100_80g_pcie": ("1.70", "2.10"),
    "l40s": ("0.95", "1.20"),
    "rtx4090": ("0.45", "0.60"),
    "rtx4090d": ("0.42", "0.55"),
}
SERVED = "qwen2.5-14b-instruct"
# (team, pool, model, cards, first day, days, pricing) — reservations each month
RESERVATIONS = [
    ("vision", "train-slurm", "a100_80g_sxm", 8, 3, 18, PricingMethod.RESERVED),
    ("nlp", "infer-k8s", "l40s", 4, 1, 31, PricingMethod.RESERVED),
    ("platform", "dev-4090", "rtx4090", 2, 5, 20, PricingMethod.USED),
]
# (account, partition, gres type, max cards, jobs a month)
JOB_MIX = [
    ("nlp", "train", "h800", 8, 40),
    ("vision", "train", "a100", 4, 60),
    ("vision", "train", "h800", 8, 12),
    ("platform", "dev", "rtx4090", 2, 80),
]


# The jobs that run inside nlp's running Slurm allocations (load_demo's): its vLLM server on the
# four A100 of the fine-tune allocation (its serving page shows it busy) and its retriever
# evaluation on the four RTX 4090 (the live idle finding's). (pool, partition, gres type, job
# name). Running since the allocation started, so accounting meters them to the import and the
# team dashboard's card-hours used inside allocations are not 0 while the serving pages show
# the same cards busy.
INSIDE_JOBS = [
    ("train-slurm", "train", "a100", "nlp-vllm-serve"),
    ("dev-4090", "dev", "rtx4090", "nlp-retriever-eval"),
]

# Issue 35 (seed 004 §5.2: rented capacity is billed per card-hour with storage and network on
# top): the rented burst pool's L40S card-hour, shared storage per GB-month, egress per GB
# (the burst pool's dearer: a cloud's internet egress).
BURST_POOL = "burst-cloud"
BURST_L40S_PRICE = Decimal("2.90")
STORAGE_PRICE, EGRESS_PRICE, BURST_EGRESS_PRICE = Decimal("0.02"), Decimal("0.05"), Decimal("0.09")
# (team, pool slug or "", charge, GB) every month: storage held all month, egress sent in it
EXTRA_CHARGES = [
    ("vision", "", "storage", 2000),
    ("nlp", "", "storage", 500),
    ("vision", "", "egress", 150),
    ("nlp", "", "egress", 80),
]


def _pool_prices() -> dict:
    prices = {(RateKind.STORAGE_GB_MONTH, None, None): STORAGE_PRICE,
              (RateKind.EGRESS_GB, None, None): EGRESS_PRICE}  # fmt: skip
    burst = Pool.objects.filter(slug=BURST_POOL).first()
    l40s = GpuModel.objects.filter(slug="l40s").first()
    if burst is not None and l40s is not None:
        prices[(RateKind.POOL_BURST, burst.pk, l40s.pk)] = BURST_L40S_PRICE
        prices[(RateKind.EGRESS_GB, burst.pk, None)] = BURST_EGRESS_PRICE
    return prices


def _extra_charges(month: date, zone, now: datetime) -> None:
    """The month's storage and egress (:data:`EXTRA_CHARGES`) through the CSV importer; in the
    current month (to ``now``) also the burst pool's: the data set the burst replicas read
    (300 GB) and their answers' egress (120 GB)."""
    start = local_midnight(month, zone)
    end = min(local_midnight(next_month(month), zone), now)
    if end <= start:
        return
    rows = [(team, pool, charge, gb) for team, pool, charge, gb in EXTRA_CHARGES]
    if end == now:
        rows += [("vision", BURST_POOL, "storage", 300), ("vision", BURST_POOL, "egress", 120)]
    text = "team,pool,charge,quantity,start,end\n" + "".join(
        f"{team},{pool},{charge},{gb},{start.isoformat()},{end.isoformat()}\n"
        for team, pool, charge, gb in rows
    )
    extra_charges_import(text=text, now=now)


def _rate_card(start: date) -> None:
    if RateCard.objects.filter(name=DEMO_CARD).exists():
        return
    models = {m.slug: m.pk for m in GpuModel.objects.filter(slug__in=GPU_PRICES)}
    gpu_prices = {}
    for slug, (reserved, used) in GPU_PRICES.items():
        if slug in models:
            gpu_prices[(models[slug], RateKind.GPU_RESERVED)] = Decimal(reserved)
            gpu_prices[(models[slug], RateKind.GPU_USED)] = Decimal(used)
    rate_card_create(
        name=DEMO_CARD, currency="EUR", effective_from=start, gpu_prices=gpu_prices,
        token_prices={(SERVED, RateKind.TOKEN_INPUT): Decimal("0.20"),
                      (SERVED, RateKind.TOKEN_CACHED_INPUT): Decimal("0.05"),
                      (SERVED, RateKind.TOKEN_OUTPUT): Decimal("0.60")},
        pool_prices=_pool_prices(),
    )  # fmt: skip


def _allocations(month: date, zone) -> None:
    admin = pool_admin_users().first()
    teams = {t.slug: t for t in Team.objects.all()}
    pools = {p.slug: p for p in Pool.objects.all()}
    models = {m.slug: m for m in GpuModel.objects.all()}
    for team, pool, model, cards, first_day, days, pricing in RESERVATIONS:
        if team not in teams or pool not in pools or admin is None:
            continue
        starts = local_midnight(month.replace(day=first_day), zone)
        ends = min(starts + timedelta(days=days), local_midnight(next_month(month), zone))
        why = f"demo billing {month:%Y-%m} {team} {model}"
        if CapacityRequest.objects.filter(justification=why).exists():
            continue
        kind = WorkloadKind.TRAINING if pools[pool].scheduler == "slurm" else WorkloadKind.INFERENCE
        fields = dict(team=teams[team], pool=pools[pool], gpu_model=models[model],
                      card_count=cards, starts_at=starts, ends_at=ends)  # fmt: skip
        # asked two days and approved a day before the window opens, as a team plans ahead
        asked = starts - 2 * DAY
        request = CapacityRequest.objects.create(
            **fields, requested_by=admin, workload_kind=kind, justification=why,
            status=RequestStatus.APPROVED, decided_by=admin, decided_at=starts - DAY,
            submitted_at=asked,
        )  # fmt: skip
        CapacityRequest.objects.filter(pk=request.pk).update(created_at=asked)  # auto_now_add
        granted = Allocation.objects.create(**fields, request=request, pricing_method=pricing,
                                            status=AllocationStatus.ENDED)  # fmt: skip
        Allocation.objects.filter(pk=granted.pk).update(created_at=starts - DAY)  # at the decision


SHARED_CARD_REPLICAS = 4
# (team, replicas held, first day, last day, hour from, hour to) on every day of the range
SHARED_CARD_PODS = [("nlp", 2, 1, 20, 8, 20), ("vision", 1, 5, 25, 0, 12)]


def _shared_card(month: date, zone) -> None:
    """Issue 36: one L40S of the Kubernetes inference pool time-sliced into
    :data:`SHARED_CARD_REPLICAS` replicas (device plugin ``sharing.timeSlicing``), shared by
    ``nlp`` (2 replicas, days 1-20, 08:00-20:00) and ``vision`` (1 replica, days 5-25,
    00:00-12:00); the rest of the month is the card's idle remainder."""
    gpu = (
        Gpu.objects.filter(node__pool__slug="infer-k8s", gpu_model__slug="l40s")
        .order_by("-node__hostname", "index")
        .first()
    )
    teams = {t.slug: t for t in Team.objects.filter(slug__in=[p[0] for p in SHARED_CARD_PODS])}
    if gpu is None:
        return
    for team, held, first, last, hour_from, hour_to in SHARED_CARD_PODS:
        if team not in teams:
            continue
        for day in range(first, last + 1):
            midnight = local_midnight(month.replace(day=day), zone)
            SharedCardUse.objects.get_or_create(
                source_id=f"demo-ts:{gpu.pk}:{team}:{month:%Y-%m}-{day:02d}",
                defaults=dict(gpu=gpu, team=teams[team], basis=ShareBasis.TIME_SLICING,
                              period_start=midnight + timedelta(hours=hour_from),
                              period_end=midnight + timedelta(hours=hour_to), parts_held=held,
                              parts_per_card=SHARED_CARD_REPLICAS),
            )  # fmt: skip
    start = local_midnight(month, zone)
    shared_card_months_changed(start=start, end=start + timedelta(days=1))


def _jobs(month: date, zone, rng: random.Random, first_id: int) -> list[JobRecord]:
    start, end = local_midnight(month, zone), local_midnight(next_month(month), zone)
    span = int((end - start).total_seconds())
    records, job_id = [], first_id
    for account, partition, gres, max_cards, count in JOB_MIX:
        for _ in range(count):
            job_id += 1
            began = start + timedelta(seconds=rng.randrange(span))
            hours = rng.choice([0.25, 0.5, 1, 2, 4, 8, 12, 24, 48])
            ended = began + timedelta(hours=hours, seconds=rng.randrange(600))
            cards = rng.choice([c for c in (1, 2, 4, 8) if c <= max_cards])
            records.append(JobRecord(
                job_id=job_id, name=f"{account}-run-{job_id}", account=account, user=account,
                partition=partition, state=JobState.COMPLETED, state_reason=None,
                gpus_requested={gres: cards}, gpus_allocated={gres: cards},
                submit=began, start=began, end=ended,
                elapsed_s=int((ended - began).total_seconds()),
            ))  # fmt: skip
    return records


def _inside_jobs(first_id: int) -> list[JobRecord]:
    """One running job per :data:`INSIDE_JOBS` entry, on all the cards of nlp's running
    allocation in that pool, from the allocation's start (none where there is no such
    allocation)."""
    records = []
    for offset, (pool, partition, gres, name) in enumerate(INSIDE_JOBS):
        allocation = (
            Allocation.objects.filter(
                team__slug="nlp", pool__slug=pool, status__in=RUNNING_STATUSES
            )
            .order_by("starts_at", "pk")
            .first()
        )
        if allocation is None:
            continue
        records.append(JobRecord(
            job_id=first_id + offset, name=name, account="nlp", user="nlp",
            partition=partition, state=JobState.RUNNING, state_reason=None,
            gpus_requested={gres: allocation.card_count},
            gpus_allocated={gres: allocation.card_count},
            submit=allocation.starts_at, start=allocation.starts_at, end=None, elapsed_s=None,
        ))  # fmt: skip
    return records


class _Records:
    def __init__(self, records):
        self.records = records

    def jobs_from_accounting(self, start, end, *, accounts=None):
        return tuple(self.records)


def _tokens(month: date, zone, rng: random.Random) -> None:
    start = local_midnight(month, zone)
    records = []
    for n in range(400):
        prompt = rng.randrange(200_000, 4_000_000)
        records.append({
            "idempotency_key": f"demo-{month:%Y-%m}-{n}", "team": "nlp", "served_model": SERVED,
            "prompt_tokens": prompt, "cached_tokens": prompt * rng.randrange(0, 70) // 100,
            "completion_tokens": rng.randrange(20_000, 600_000),
            "timestamp": (start + timedelta(hours=n * 1.7)).isoformat(),
        })  # fmt: skip
    usage_tokens_ingest(records=records)


def demo_billing_load(*, months: int = 6, now: datetime | None = None) -> list:
    """Rate card, usage for the last ``months`` months and draft statements for each (every
    team's), and this month's usage so far, undrafted (its cost page previews it). Returns the
    drafts, oldest month first."""
    now = now or timezone.now()
    zone = billing_zone()
    last = previous_month(month_of(now, zone))
    month_list = [last]
    for _ in range(months - 1):
        month_list.insert(0, previous_month(month_list[0]))
    rng = random.Random(20261101)
    statements = []
    with transaction.atomic():
        _rate_card(month_list[0])
        for index, month in enumerate(month_list):
            _allocations(month, zone)
            window = {"start": local_midnight(month, zone),
                      "end": local_midnight(next_month(month), zone), "now": now}  # fmt: skip
            usage_import_reservations(**window)
            usage_import_slurm(scheduler=_Records(_jobs(month, zone, rng, 100_000 * (index + 1))),
                               **window)  # fmt: skip
            _tokens(month, zone, rng)
            _shared_card(month, zone)
            _extra_charges(month, zone, now)
        demo_agent_tasks_load(now=now, served=SERVED)  # its own seed: the rest stays as it was
        for month in month_list:
            for team in Team.objects.order_by("slug"):
                statements.append(statement_build(team=team, month=month, now=now))
        # This month's reserved card-hours so far, as the hourly import has accrued them in a
        # real deployment: the cost so far on My teams and the team dashboard reads them (and
        # the demo budget below is set against them too).
        this_month = local_midnight(month_of(now, zone), zone)
        if now > this_month:
            usage_import_reservations(start=this_month, end=now, now=now)
        # the elastic allocation's burst (home and burst pool) and this month's storage and
        # egress: vision's draft for this month shows their lines (issue 35)
        burst_from = min(this_month, now - timedelta(days=4))
        usage_import_elastic_burst(start=burst_from, end=now, now=now)
        _extra_charges(month_of(now, zone), zone, now)
        if month_of(burst_from, zone) != month_of(now, zone):  # last month's burst days
            statements.append(
                statement_build(team=Team.objects.get(slug="vision"), month=month_of(burst_from,
                                zone), now=now)
            )  # fmt: skip
        _near_budget(now, zone, rng)
    return statements


def demo_usage_accrue(*, now: datetime | None = None) -> int:
    """This month's reserved card-hours and elastic burst to ``now``, imported as beat's hourly
    ``usage_import_task`` would (each allocation's month is one record, updated in place), so
    the demo's cost so far and month preview move while it runs; ``demo_clock`` calls it on
    every tick (``settings.DEMO_CLOCK_USAGE``). Returns the records created or updated."""
    now = now or timezone.now()
    start = local_midnight(month_of(now, billing_zone()), billing_zone())
    if now <= start:
        return 0
    reserved = usage_import_reservations(start=start, end=now, now=now)
    burst = usage_import_elastic_burst(start=start, end=now, now=now)
    return sum(r.records_created + r.records_updated for r in (reserved, burst))


NEAR_BUDGET_SHARE = Decimal("0.85")
"""The demo team ``nlp`` has used this share of its monthly budget (issue #32: a team near its
budget, so the banner and the 80 % alert show)."""


def _near_budget(now: datetime, zone, rng: random.Random) -> None:
    """This month's finished ``nlp`` jobs so far (the Slurm importer, as every month), and a
    monthly card-hour and money budget set so that they are :data:`NEAR_BUDGET_SHARE` of it,
    needing a pool admin beyond it. Nothing when it exists or no pool admin does."""
    team = Team.objects.filter(slug="nlp").first()
    admin = pool_admin_users().first()
    if team is None or admin is None or Budget.objects.filter(team=team).exists():
        return
    month = month_of(now, zone)
    jobs = [j for j in _jobs(month, zone, rng, 900_000) if j.account == "nlp" and j.end <= now]
    jobs += _inside_jobs(990_000)
    if jobs:
        usage_import_slurm(scheduler=_Records(jobs), start=local_midnight(month, zone), end=now,
                           now=now)  # fmt: skip
    budget = budget_create(
        actor=admin, team=team, period="month", starts_on=month, card_hours_limit=Decimal(1),
        money_limit=Decimal(1), currency=rate_card_currency(month), rollover="carry",
        rollover_cap_percent=Decimal(20), enforcement="needs_admin",
    )  # fmt: skip
    status = budget_statuses([budget], now=now)[budget.pk]
    hours, money = status.card_hours.used, status.money.used or Decimal(0)
    budget_update(
        budget=budget, actor=admin,
        card_hours_limit=max(hours / NEAR_BUDGET_SHARE, Decimal(100)).quantize(Decimal(1)),
        money_limit=max(money / NEAR_BUDGET_SHARE, Decimal(100)).quantize(Decimal(1)),
    )  # fmt: skip
    member = team_member_users(team_id=team.pk).first()
    pool = Pool.objects.filter(slug="infer-k8s").first()
    if member is not None and pool is not None:  # 4 L40S for 2 days: beyond what is left
        start = now.replace(second=0, microsecond=0) + timedelta(minutes=30)
        capacity_request_create(actor=member, fields=RequestFields(
            team=team, workload_kind=WorkloadKind.INFERENCE, card_count=4,
            starts_at=start, ends_at=start + timedelta(days=2), pool=pool,
            gpu_model=GpuModel.objects.get(slug="l40s"),
            justification="Load test of the chat assistant before launch.",
        ))  # fmt: skip
