"""Usage importers: reservations, Slurm accounting, token batches. Each is idempotent.

Every record lies inside one billing month (usage is split at month starts in the billing
time zone) and has a key that does not depend on the import window, so importing the same or an
overlapping window again finds the same keys: unchanged records are left alone, records of a
running job metered further are updated in place, nothing is counted twice.

Keys (``source_id``):

- reservation: ``alloc:<allocation id>:<YYYY-MM>`` — cards × wall time of the allocation within
  that month, clipped to "now" (never charged ahead);
- Slurm: ``job:<job id>:<run start, epoch s>:<GRES type>:<YYYY-MM>`` — a requeued job's runs
  have different starts, so each run counts once; a running job is metered up to "now" and its
  record replaced when it is seen again, finished;
- tokens: ``<idempotency key>:<unit>``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Protocol

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from billing.choices import ChargeBasis, UsageFlag, UsageSource, UsageUnit
from billing.conf import billing_zone
from billing.locks import billing_lock, usage_source_lock_name
from billing.models import UsageImport, UsageRecord
from billing.pricing import (
    UnusableInterval,
    meter_interval,
    mig_share,
    month_of,
    split_at_months,
)
from billing.services.versions import usage_months_changed
from pools.capacity.arithmetic import clip
from pools.capacity.lifecycle import CHARGED_STATUSES
from pools.capacity.models import Allocation, overlap_q
from pools.clusters.models import Cluster
from pools.common.choices import CredentialKind, PricingMethod
from pools.elastic.metering import burst_card_seconds
from pools.elastic.models import ElasticPolicy
from pools.elastic.selectors import burst_pool_timelines, held_timelines
from pools.inventory.gpu_names import normalise_model_key
from pools.inventory.models import Gpu, GpuModelAlias, Node, Pool, node_cluster_id
from pools.reclamation.card_timeline import card_changes, card_pieces
from pools.tenancy.models import Team
from scheduler_adapters.records import JobRecord

_COMPARED = ("quantity", "period_start", "period_end", "basis", "allocation_id", "flag",
             "gpu_model_id", "team_id", "month", "other_reading_start",
             "other_reading_end", "pool_id")  # fmt: skip


class AccountingSource(Protocol):
    """What the Slurm importer needs of an adapter (a subset of ``SchedulerAdapter``)."""

    def jobs_from_accounting(
        self, start: datetime, end: datetime, *, accounts: Sequence[str] | None = None
    ) -> tuple[JobRecord, ...]: ...


@dataclass
class ImportReport:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    jobs_seen: int = 0
    flagged: int = 0
    issues: list[dict[str, Any]] = field(default_factory=list)


def usage_records_upsert(records: list[UsageRecord], report: ImportReport, now: datetime) -> None:
    """Insert new keys, update changed ones, leave equal ones untouched (not even updated_at).

    Call inside ``transaction.atomic()``: it takes each source's lock first, so an import of
    the same source running at the same time waits, then counts the other's records as
    unchanged or updated instead of inserting them twice.
    """
    if not records:
        return
    by_key: dict[tuple[str, str], UsageRecord] = {}
    for record in records:
        by_key[(record.source, record.source_id)] = record
    existing: dict[tuple[str, str], UsageRecord] = {}
    sources = {source for source, _ in by_key}
    for source in sorted(sources):  # one order, so two imports never wait for each other
        billing_lock(usage_source_lock_name(source))
    for source in sources:
        ids = [sid for s, sid in by_key if s == source]
        for chunk_start in range(0, len(ids), 5000):
            chunk = ids[chunk_start : chunk_start + 5000]
            for row in UsageRecord.objects.filter(source=source, source_id__in=chunk):
                existing[(row.source, row.source_id)] = row
    new, changed = [], []
    touched: set[tuple[int, date]] = set()  # (team, month) before an update moves a record
    for key, record in by_key.items():
        old = existing.get(key)
        if old is None:
            record.created_at = record.updated_at = now
            new.append(record)
        elif any(getattr(old, f) != getattr(record, f) for f in _COMPARED):
            touched.add((old.team_id, old.month))
            for name in _COMPARED:
                setattr(old, name, getattr(record, name))
            old.updated_at = now
            changed.append(old)
        else:
            report.unchanged += 1
    UsageRecord.objects.bulk_create(new, batch_size=2000)
    UsageRecord.objects.bulk_update(changed, [*_COMPARED, "updated_at"], batch_size=2000)
    usage_months_changed(pairs=touched | {(r.team_id, r.month) for r in new + changed})
    report.created += len(new)
    report.updated += len(changed)


def usage_import_save(
    source: str, start: datetime, end: datetime, report: ImportReport
) -> UsageImport:
    return UsageImport.objects.create(
        source=source,
        window_start=start,
        window_end=end,
        records_created=report.created,
        records_updated=report.updated,
        records_unchanged=report.unchanged,
        jobs_seen=report.jobs_seen,
        flagged=report.flagged,
        issues=report.issues,
    )


def usage_window_check(start: datetime, end: datetime) -> None:
    if timezone.is_naive(start) or timezone.is_naive(end):
        raise ValueError("the window needs aware datetimes")
    if end <= start:
        raise ValueError("the window must end after it starts")


# --------------------------------------------------------------------------- reservations


@transaction.atomic
def usage_import_reservations(
    *, start: datetime, end: datetime, now: datetime | None = None
) -> UsageImport:
    """Card-seconds of every allocation priced "reserved" for each month of ``[start, end)``.

    Quantity per month = cards × seconds of ``[allocation start, min(end, now))`` inside the
    month, with the cards held at each moment (:mod:`pools.reclamation.card_timeline`: a reclamation
    shrink does not reprice the days before it), so overlapping windows yield the same records.
    An allocation of MIG slices counts each slice as its share of a card
    (:attr:`pools.capacity.models.Allocation.card_share`, ``g``/7: the share a Slurm job's MIG
    GRES is metered at, :func:`billing.pricing.mig_share`), so 7 × ``1g.10gb`` for an hour is
    one card-hour.
    """
    usage_window_check(start, end)
    now = now or timezone.now()
    zone = billing_zone()
    report = ImportReport()
    records = []
    allocations = (
        Allocation.objects.filter(
            pricing_method=PricingMethod.RESERVED, status__in=CHARGED_STATUSES
        )
        .overlapping(start, min(end, now))
        .select_related("gpu_model")
        .order_by("id")
    )
    changes = card_changes(a.pk for a in allocations)
    for allocation in allocations:
        held = clip(allocation.starts_at, allocation.ends_at, allocation.starts_at, now)
        if held is None:
            continue
        pieces = card_pieces(allocation, changes.get(allocation.pk, ()))
        for month, piece_start, piece_end in split_at_months(*held, zone):
            if clip(piece_start, piece_end, start, end) is not None:
                records.append(_reserved_record(allocation, pieces, month, piece_start, piece_end))
    usage_records_upsert(records, report, now)
    return usage_import_save(UsageSource.RESERVATION, start, end, report)


def _reserved_record(
    allocation: Allocation, pieces: list, month: date, start: datetime, end: datetime
) -> UsageRecord:
    """The reserved card-seconds record of ``allocation`` over its ``month``'s piece ``[start,
    end)`` (pure): the cards of each of ``pieces`` (:func:`card_pieces`: cards held from
    ``start`` to ``end``) × their seconds inside the piece, × the allocation's card share,
    rounded to 6 places; keyed ``alloc:<id>:<YYYY-MM>``."""
    unit_seconds = sum(
        piece.cards * int((span[1] - span[0]).total_seconds())
        for piece in pieces
        if (span := clip(piece.start, piece.end, start, end)) is not None
    )
    share = allocation.card_share
    return UsageRecord(
        team_id=allocation.team_id,
        gpu_model_id=allocation.gpu_model_id,
        allocation_id=allocation.id,
        quantity=(Decimal(unit_seconds * share.numerator) / share.denominator).quantize(
            Decimal("0.000001")
        ),
        unit=UsageUnit.CARD_SECONDS,
        basis=ChargeBasis.RESERVED,
        month=month,
        period_start=start,
        period_end=end,
        source=UsageSource.RESERVATION,
        source_id=f"alloc:{allocation.id}:{month:%Y-%m}",
    )


@transaction.atomic
def _burst_records(
    allocation: Allocation,
    timeline: Any,
    placed: dict[int, Any],
    *,
    month: date,
    start: datetime,
    end: datetime,
) -> list[UsageRecord]:
    """One allocation's burst records of one month's piece ``[start, end)`` (pure): one per
    burst pool its cards were placed in (basis ``burst-pool``, that pool's card-seconds of the
    ``placed`` timelines by pool id), then the home burst (basis ``burst``: the card-seconds
    above the floor less those placed, never below 0); keyed per allocation, pool and month."""

    def record(seconds: float, basis: str, source_id: str, pool_id: int | None = None):
        return UsageRecord(
            team_id=allocation.team_id,
            gpu_model_id=allocation.gpu_model_id,
            allocation_id=allocation.id,
            pool_id=pool_id,
            quantity=Decimal(round(seconds)),
            unit=UsageUnit.CARD_SECONDS,
            basis=basis,
            month=month,
            period_start=start,
            period_end=end,
            source=UsageSource.ELASTIC_BURST,
            source_id=source_id,
        )

    span = {"start": start.timestamp(), "end": end.timestamp()}
    seconds = burst_card_seconds(timeline, floor_cards=allocation.card_count, **span)
    records = []
    for pool_id, pool_timeline in sorted(placed.items()):
        pool_seconds = burst_card_seconds(pool_timeline, floor_cards=0, **span)
        seconds -= pool_seconds
        key = f"burst-pool:{allocation.id}:{pool_id}:{month:%Y-%m}"
        records.append(record(pool_seconds, ChargeBasis.BURST_POOL, key, pool_id))
    key = f"burst:{allocation.id}:{month:%Y-%m}"
    records.append(record(max(0.0, seconds), ChargeBasis.BURST, key))
    return records


@transaction.atomic
def usage_import_elastic_burst(
    *, start: datetime, end: datetime, now: datetime | None = None
) -> UsageImport:
    """Burst card-seconds of every elastic allocation for each month of ``[start, end)``: the
    cards held above the floor over time, from its scale events (each takes effect at its
    ``effective_at``; :func:`pools.elastic.metering.burst_card_seconds`), inside
    ``[allocation start, min(end, now))``. Keyed per allocation and month, so re-importing an
    overlapping window replaces the same records. The floor is billed by its pricing method
    (reserved card-hours by default); burst is its own line, priced at the rate card's burst
    price or, without one, its reserved price.

    Cards placed in a burst pool (issue 35: the events' ``burst_cards_to`` in their
    ``burst_pool``) are their own records, basis ``burst-pool`` with that ``pool``, priced at
    the rate card's price for that pool; the home burst record keeps the rest (they are
    always above the floor, so the home burst is the total above the floor less them)."""
    usage_window_check(start, end)
    now = now or timezone.now()
    zone = billing_zone()
    report = ImportReport()
    records = []
    policies = (
        ElasticPolicy.objects.filter(
            overlap_q(start, min(end, now), via="allocation"),
            allocation__status__in=CHARGED_STATUSES,
        )
        .select_related("allocation")
        .order_by("allocation_id")
    )
    timelines = held_timelines(allocation_ids=[p.allocation_id for p in policies])
    placed = burst_pool_timelines(allocation_ids=[p.allocation_id for p in policies])
    for policy in policies:
        allocation = policy.allocation
        held = clip(allocation.starts_at, allocation.ends_at, allocation.starts_at, now)
        if held is None:
            continue
        for month, piece_start, piece_end in split_at_months(*held, zone):
            if clip(piece_start, piece_end, start, end) is not None:
                records += _burst_records(
                    allocation, timelines[allocation.pk], placed.get(allocation.pk, {}),
                    month=month, start=piece_start, end=piece_end,
                )  # fmt: skip
    usage_records_upsert(records, report, now)
    return usage_import_save(UsageSource.ELASTIC_BURST, start, end, report)


# --------------------------------------------------------------------------- Slurm


class UsageCatalogue:
    """Resolves Slurm accounts to teams and GRES types to GPU models, loaded once per import."""

    def __init__(
        self, pools: QuerySet[Pool] | None = None, nodes: QuerySet[Node] | None = None
    ) -> None:
        """``pools`` and ``nodes``: those of the cluster the jobs ran in (default: all; node
        names are unique per cluster only, so another cluster's partitions do not count)."""
        self.alias = dict(GpuModelAlias.objects.values_list("key", "gpu_model_id"))
        self.slugs = dict(
            (normalise_model_key(slug), model_id)
            for slug, model_id in GpuModelAlias.objects.values_list(
                "gpu_model__slug", "gpu_model_id"
            )
        )
        self._load_partitions(pools, nodes)
        self.model_slug = dict(GpuModelAlias.objects.values_list("gpu_model_id", "gpu_model__slug"))
        self.teams = {slug: team_id for team_id, slug in Team.objects.values_list("id", "slug")}
        self._load_reservations()
        self.accounts = dict(self.teams)
        for team_id, binding in Allocation.objects.values_list("team_id", "scheduler_binding"):
            account = (binding or {}).get("account")
            if isinstance(account, str):
                self.accounts.setdefault(account, team_id)

    def _load_partitions(self, pools: QuerySet[Pool] | None, nodes: QuerySet[Node] | None) -> None:
        """Set ``pool_models`` (``{partition: {GPU model id}}`` of the GPUs of the pools of
        ``pools`` that have a Slurm partition) and ``gpu_partitions`` (the partitions whose
        nodes advertise GPUs, recognised or not: those pools' and the ones ``nodes`` with GPUs
        list); ``None`` stands for all pools / nodes."""
        self.pool_models: dict[str, set[int]] = defaultdict(set)
        partition_of = dict(
            (Pool.objects.all() if pools is None else pools)
            .exclude(slurm_partition="")
            .values_list("id", "slurm_partition")
        )
        for pool_id, model_id in (
            Gpu.objects.filter(node__pool_id__in=partition_of, gpu_model__isnull=False)
            .values_list("node__pool_id", "gpu_model_id")
            .distinct()
        ):
            self.pool_models[partition_of[pool_id]].add(model_id)
        # Partitions whose nodes advertise GPUs (GRES in the inventory), recognised or not.
        self.gpu_partitions = {
            partition_of[pool_id]
            for pool_id in Gpu.objects.filter(node__pool_id__in=partition_of)
            .values_list("node__pool_id", flat=True)
            .distinct()
        }
        for partitions in (
            (Node.objects.all() if nodes is None else nodes)
            .filter(gpus__isnull=False)
            .values_list("partitions", flat=True)
            .distinct()
        ):
            self.gpu_partitions.update(p for p in partitions or () if isinstance(p, str))

    def _load_reservations(self) -> None:
        """Set ``reserved`` and ``on_use``: ``{(team id, GPU model id): [(starts, ends,
        allocation id)]}`` of the charged allocations of whole cards priced by reserved
        card-hours and on use, in start order."""
        self.reserved: dict[tuple[int, int], list[tuple[datetime, datetime, int]]] = defaultdict(
            list
        )
        self.on_use: dict[tuple[int, int], list[tuple[datetime, datetime, int]]] = defaultdict(list)
        windows = {PricingMethod.RESERVED: self.reserved, PricingMethod.USED: self.on_use}
        # a reservation of whole cards covers jobs on whole cards (MIG jobs are charged as used)
        for a in (
            Allocation.objects.whole_cards()
            .filter(pricing_method__in=list(windows), status__in=CHARGED_STATUSES)
            .only("id", "team_id", "gpu_model_id", "starts_at", "ends_at", "pricing_method")
            .order_by("starts_at", "id")
        ):
            windows[a.pricing_method][(a.team_id, a.gpu_model_id)].append(
                (a.starts_at, a.ends_at, a.id)
            )

    def gpu_model(self, gres_type: str | None, partition: str | None) -> int | None:
        """A typed GRES matches an alias exactly, else the one model of the partition's pool
        whose slug starts with it (``a100`` → ``a100_80g_sxm``); an untyped GRES is the
        partition's GPU model when its pool has exactly one."""
        in_pool = self.pool_models.get(partition or "", set())
        if gres_type is None:
            return next(iter(in_pool)) if len(in_pool) == 1 else None
        key = normalise_model_key(gres_type)
        if key in self.alias:
            return self.alias[key]
        candidates = {
            m for m in in_pool if normalise_model_key(self.model_slug.get(m, "")).startswith(key)
        }
        return candidates.pop() if len(candidates) == 1 else None

    def covering(self, team_id: int, model_id: int, at: datetime) -> tuple[int | None, str]:
        """``(allocation id or None, basis)`` of usage of the team's cards of ``model_id`` at
        ``at``: the one rule both schedulers' imports follow (Slurm per job, Kubernetes per
        step). ``included`` in the team's reserved allocation of that model in force at ``at``
        (not charged again); else ``used`` (charged), naming the team's allocation of that model
        priced on use in force then, if any (its held time is already the pool's allocated
        time: the idle cost does not count the usage again as used outside allocations,
        :func:`billing.selectors._used_outside_costs`); else ``used`` in none.

        In force: from the allocation's start taken to the whole second (Slurm keeps whole
        seconds, so a job started at 12:00:05 is inside an allocation from 12:00:05.6) until its
        end; of two in force, the first to start (:meth:`_load_reservations`' order)."""
        reserved = _in_force(self.reserved.get((team_id, model_id), ()), at)
        if reserved is not None:
            return reserved[2], ChargeBasis.INCLUDED
        on_use = _in_force(self.on_use.get((team_id, model_id), ()), at)
        return (None if on_use is None else on_use[2]), ChargeBasis.USED

    def on_use_throughout(
        self, team_id: int, model_id: int, start: datetime, end: datetime
    ) -> int | None:
        """The team's allocation of ``model_id`` priced on use in force at every moment of
        ``[start, end)``, or ``None``: the one in force at ``start`` (as :meth:`covering`
        picks it) when it lasts until ``end``. Any earlier-started one is over by ``start``,
        so this one is the first in force all along."""
        window = _in_force(self.on_use.get((team_id, model_id), ()), start)
        return window[2] if window is not None and end <= window[1] else None


def _in_force(
    windows: Iterable[tuple[datetime, datetime, int]], at: datetime
) -> tuple[datetime, datetime, int] | None:
    """The first of ``windows`` (``(starts, ends, allocation id)``) holding ``at``, its start
    taken to the whole second."""
    for window in windows:
        starts, ends, _ = window
        if starts.replace(microsecond=0) <= at < ends:
            return window
    return None


def _gpu_shares(job: JobRecord) -> list[tuple[str | None, str | None, Decimal]]:
    """``(key, gres type of the full card, cards)`` per GRES entry; MIG slices become their share
    of a full card (C10: 1 × ``a100_3g.20gb`` = 3/7 of an A100)."""
    shares = []
    for gres_type, count in sorted(job.gpus_allocated.items(), key=lambda kv: str(kv[0])):
        if not count:
            continue
        mig = mig_share(gres_type) if gres_type else None
        if mig:
            base, fraction = mig
            cards = Decimal(count) * fraction.numerator / fraction.denominator
            shares.append((gres_type, base, cards))
        else:
            shares.append((gres_type, gres_type, Decimal(count)))
    return shares


def usage_import_slurm(
    *,
    scheduler: AccountingSource,
    start: datetime,
    end: datetime,
    now: datetime | None = None,
    read_issues: Sequence[dict[str, Any]] = (),
    cluster: Cluster | None = None,
) -> UsageImport:
    """Card-seconds of every job run in ``[start, end)`` from Slurm accounting.

    ``cluster`` is the Slurm cluster ``scheduler`` reads (``None``: the environment's): GRES
    types resolve among its pools' partitions only, and outside the environment's cluster a
    job's key names the cluster (``job:<ClusterName>/<job id>:…``), since two clusters number
    their jobs alike.

    Each run is metered over ``[start, end or now)`` (running jobs up to now), split at month
    starts, per GRES type: cards × seconds. Jobs inside a reserved allocation of the same team
    and GPU model are recorded as ``included`` (not charged again); all others as ``used``,
    those inside an allocation priced on use naming it (:meth:`UsageCatalogue.covering`, at
    each month's piece's start).
    Problems (unknown account or GPU type, clock skew) are listed in the report; clock skew is
    also kept as a 0 record flagged for review. ``read_issues`` (lines of an accounting file
    that were rejected or noted while reading it) head the report's issues.
    """
    usage_window_check(start, end)
    now = now or timezone.now()
    jobs = scheduler.jobs_from_accounting(start, end)
    zone = billing_zone()
    catalogue = UsageCatalogue(
        _pools_of(cluster), Node.objects.filter(cluster_id=node_cluster_id(cluster))
    )
    prefix = "" if cluster is None or cluster.from_environment else f"{cluster.slurm_cluster_name}/"
    report = ImportReport(issues=list(read_issues))
    records: list[UsageRecord] = []
    for job in jobs:
        report.jobs_seen += 1
        records += _job_records(job, now, catalogue, zone, prefix, report)
    problem = accounting_gpu_tres_problem(jobs, catalogue.gpu_partitions)
    if problem is not None:
        report.issues.insert(0, problem)
    with transaction.atomic():
        usage_records_upsert(records, report, now)
        return usage_import_save(UsageSource.SLURM_ACCOUNTING, start, end, report)


def _job_records(
    job: JobRecord,
    now: datetime,
    catalogue: UsageCatalogue,
    zone,
    prefix: str,
    report: ImportReport,
) -> list[UsageRecord]:
    """The records of one Slurm ``job``, metered over ``[start, end or now)`` (a running job
    up to ``now``) in billing months of ``zone``, keys prefixed by ``prefix`` (the cluster's,
    :func:`_job_key`). A job that cannot be metered gives none, but clock skew is reported
    (``clock_skew``, flagged) and kept as 0 records (:func:`_skew_records`) when its account
    is a team's and it started; a job of no team's account is reported
    (``unknown_account``)."""
    team_id = catalogue.accounts.get(job.account or "")
    run_end = job.end if job.end is not None else (now if job.start is not None else None)
    try:
        meter_interval(job.start, run_end)
    except UnusableInterval as problem:
        if problem.code != "clock_skew":
            return []
        report.flagged += 1
        report.issues.append({"job_id": job.job_id, "code": problem.code,
                              "detail": problem.reason})  # fmt: skip
        if team_id is not None and job.start is not None:
            return _skew_records(job, team_id, catalogue, zone, prefix)
        return []
    if team_id is None:
        report.issues.append({"job_id": job.job_id, "code": "unknown_account",
                              "detail": f"account {job.account!r} is no team's"})  # fmt: skip
        return []
    records = []
    for key, gres_type, cards in _gpu_shares(job):
        model_id = catalogue.gpu_model(gres_type, job.partition)
        if model_id is None:
            report.issues.append({"job_id": job.job_id, "code": "unknown_gpu_model",
                                  "detail": f"GRES type {key!r} in partition "
                                            f"{job.partition!r} matches no model"})  # fmt: skip
            continue
        for month, piece_start, piece_end in split_at_months(job.start, run_end, zone):
            record = _job_piece_record(job, team_id, model_id, cards, key, catalogue,
                                       (month, piece_start, piece_end), prefix)  # fmt: skip
            report.flagged += _flag_other_reading(record, job, run_end)
            records.append(record)
    return records


def _job_piece_record(
    job: JobRecord,
    team_id: int,
    model_id: int,
    cards: Decimal,
    key: str | None,
    catalogue: UsageCatalogue,
    piece: tuple[date, datetime, datetime],
    prefix: str,
) -> UsageRecord:
    """The card-seconds record of ``cards`` of one GRES entry (``key``, :func:`_gpu_shares`)
    of ``job`` over one month's ``piece`` (``(month, start, end)``), its allocation and basis
    those of the piece's start (:meth:`UsageCatalogue.covering`)."""
    month, piece_start, piece_end = piece
    piece_seconds = int((piece_end - piece_start).total_seconds())
    allocation_id, basis = catalogue.covering(team_id, model_id, piece_start)
    return UsageRecord(
        team_id=team_id,
        gpu_model_id=model_id,
        allocation_id=allocation_id,
        quantity=(cards * piece_seconds).quantize(Decimal("0.000001")),
        unit=UsageUnit.CARD_SECONDS,
        basis=basis,
        month=month,
        period_start=piece_start,
        period_end=piece_end,
        source=UsageSource.SLURM_ACCOUNTING,
        source_id=_job_key(job, key, month, prefix),
    )


def accounting_gpu_tres_problem(
    jobs: Sequence[JobRecord], gpu_partitions: set[str]
) -> dict[str, Any] | None:
    """A configuration error when the cluster's accounting does not record GPUs, else ``None``.

    Slurm puts a GRES into job TRES only when ``AccountingStorageTRES`` (slurm.conf) lists it
    (``gres/gpu``); without it GPUs are scheduled normally and nodes still advertise them, but
    every job's ``AllocTRES`` lacks ``gres/gpu`` and would bill 0 card-hours. The sign: jobs ran
    in partitions whose nodes have GPUs, and not one job of the window carries GPU TRES. That is
    reported once for the import (code ``accounting_without_gpu_tres``) instead of silent zeros.
    """
    ran = [j for j in jobs if j.start is not None and (j.partition or "") in gpu_partitions]
    if not ran or any(j.gpus_allocated for j in jobs):
        return None
    partitions = sorted({j.partition or "" for j in ran})
    return {
        "code": "accounting_without_gpu_tres",
        "detail": (
            f"{len(ran)} job(s) ran in GPU partition(s) {', '.join(partitions)} and none carries "
            "gres/gpu in its allocated TRES: Slurm accounting does not record GPUs "
            "(AccountingStorageTRES lacks gres/gpu in slurm.conf). Nothing was billed for "
            "GPUs; add gres/gpu (and the typed gres/gpu:<type>) and re-import"
        ),
    }


def _flag_other_reading(record: UsageRecord, job: JobRecord, run_end: datetime) -> int:
    """Flag ``record`` ``ambiguous_time`` with its period under the other reading when its
    start is the job's start, or its end the job's end, and that wall time happened twice
    without an elapsed time to settle it (:attr:`JobRecord.start_other_reading`). Returns 1
    when flagged, else 0. The first reading stays the one billed."""
    other_start = job.start_other_reading if record.period_start == job.start else None
    other_end = job.end_other_reading if record.period_end == run_end else None
    if other_start is None and other_end is None:
        return 0
    record.flag = UsageFlag.AMBIGUOUS_TIME
    record.other_reading_start = other_start or record.period_start
    record.other_reading_end = other_end or record.period_end
    return 1


def _pools_of(cluster: Cluster | None) -> QuerySet[Pool]:
    """The pools whose partitions a cluster's jobs ran in: ``cluster``'s, or for ``None`` /
    the environment's every pool not in a cluster kept as data."""
    if cluster is None or cluster.from_environment:
        return Pool.objects.filter(
            Q(cluster__isnull=True) | Q(cluster__credential_kind=CredentialKind.ENVIRONMENT)
        )
    return Pool.objects.filter(cluster=cluster)


def _job_key(job: JobRecord, gres_key: str | None, month, prefix: str = "") -> str:
    return f"job:{prefix}{job.job_id}:{int(job.start.timestamp())}:{gres_key or '-'}:{month:%Y-%m}"


def _skew_records(
    job: JobRecord, team_id: int, catalogue: UsageCatalogue, zone, prefix: str
) -> Iterable[UsageRecord]:  # noqa: E501
    month = month_of(job.start, zone)
    for key, gres_type, _cards in _gpu_shares(job) or [(None, None, Decimal(0))]:
        yield UsageRecord(
            team_id=team_id,
            gpu_model_id=catalogue.gpu_model(gres_type, job.partition),
            quantity=Decimal(0),
            unit=UsageUnit.CARD_SECONDS,
            basis=ChargeBasis.USED,
            month=month,
            period_start=job.start,
            period_end=job.start,
            source=UsageSource.SLURM_ACCOUNTING,
            source_id=_job_key(job, key, month, prefix),
            flag=UsageFlag.CLOCK_SKEW,
        )
