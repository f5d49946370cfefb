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
  record replaced when it is seen again, finished. That key holds the month's usage in no
  allocation (kept at 0 when there is none); the part inside an allocation of the team and GPU
  model is ``<that key>:alloc<allocation id>`` (:func:`usage_import_slurm`);
- tokens: ``<idempotency key>:<unit>``.

What covers what (one method per allocation, every card-hour charged once, by that method;
:mod:`billing.reserved_cover`): an allocation priced by reserved card-hours is charged its
cards × wall time here (the reservation import); one priced by tokens is charged its tokens
(:mod:`billing.services.tokens`, the Prometheus vLLM counters) and nothing here. The usage of
the team's jobs and pods inside either's window and place, within its cards, is ``included``
(kept, shown, never charged); beyond its cards, outside its window or place, it is ``used``
(charged at the on-use price), naming the allocation priced on use it ran in, if any
(:data:`COVERING`, :class:`UsageCatalogue`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any, Protocol

from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q, QuerySet
from django.db.models.fields.json import KT
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
from billing.reserved_cover import Held, Part, PartKey, Use, cover
from billing.services.versions import usage_months_changed
from pools.capacity.arithmetic import clip
from pools.capacity.lifecycle import CHARGED_STATUSES
from pools.capacity.models import Allocation, overlap_q
from pools.clusters.models import Cluster
from pools.common.choices import CredentialKind, PricingMethod, Scheduler
from pools.elastic.metering import burst_card_seconds
from pools.elastic.models import ElasticPolicy
from pools.elastic.selectors import burst_pool_timelines, held_timelines
from pools.inventory.gpu_names import normalise_model_key
from pools.inventory.models import (
    Gpu,
    GpuModelAlias,
    Node,
    Pool,
    node_cluster_id,
    pool_node_cluster_id,
)
from pools.reclamation.card_timeline import CardPiece, card_changes, card_pieces
from pools.tenancy.models import Team
from scheduler_adapters.records import JobRecord

_COMPARED = ("quantity", "period_start", "period_end", "basis", "allocation_id", "flag",
             "gpu_model_id", "team_id", "month", "other_reading_start",
             "other_reading_end", "pool_id")  # fmt: skip

COVERING = (PricingMethod.RESERVED, PricingMethod.TOKENS)
"""The pricing methods that pay for an allocation's cards by something other than their usage:
reserved card-hours (the cards held) and tokens (what its served models process). The usage
inside such an allocation's window and place, within its cards, is ``included``: kept for
showback, never charged again as used card-hours (:mod:`billing.reserved_cover`)."""


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
    """Card-seconds of every allocation priced "reserved" for each month of ``[start, end)``
    (one priced by tokens or on use has no record here: it pays for its tokens or its usage).

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
    above the floor less those placed, never below 0; 0 for an allocation priced on use, whose
    usage on those cards is its ``used`` records, or by tokens, whose tokens pay for them:
    :func:`usage_import_elastic_burst`); keyed per allocation, pool and month."""

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
    if allocation.pricing_method != PricingMethod.RESERVED:
        seconds = 0.0  # kept at 0, so a month imported before is corrected in place
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
    always above the floor, so the home burst is the total above the floor less them).

    An allocation priced **on use** pays what it used, once (the rate card has a reserved and an
    on-use price; DESIGN.md): its pods' and jobs' card-seconds in its home pool are ``used``
    records naming it, at the on-use price, whether they ran on the floor or on burst cards,
    so its home burst record is kept at 0 — charging the cards above the floor as burst too
    would bill the same card-hours twice, and burst cards it left idle cost it nothing, as
    idle floor cards do not. Cards it placed in a burst pool keep that pool's price (a rented
    pool is paid for the hours its cards are taken, used or not): the ``burst-pool`` record
    bills them held, and the usage imports include the usage on them in the allocation
    (:meth:`UsageCatalogue.held`), so those used card-hours are billed once, by that line.

    An allocation priced by **tokens** pays for its cards by its tokens, floor and burst alike:
    its home burst record is kept at 0 too, and the usage on all the cards it holds is
    ``included`` (:data:`COVERING`); cards it placed in a burst pool keep that pool's price, as
    for one priced on use."""
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
        allocation id)]}`` of the charged allocations of whole cards whose own price pays for
        their cards (:data:`COVERING`: reserved card-hours or tokens; their usage within their
        cards is ``included``) and of those priced on use, in start order (each with
        ``elastic``: it has an elastic policy); and each one's :class:`Place`."""
        self.reserved: dict[tuple[int, int], list[tuple[datetime, datetime, int]]] = defaultdict(
            list
        )
        self.on_use: dict[tuple[int, int], list[tuple[datetime, datetime, int]]] = defaultdict(list)
        windows = {method: self.reserved for method in COVERING}
        windows[PricingMethod.USED] = self.on_use
        self._allocations: dict[int, Allocation] = {}
        self._places: dict[int, Place] = {}
        self._held: dict[tuple, tuple[list[Held], list[Held]]] = {}
        self._pool_places: dict[int, PoolPlace] = {}
        # a reservation of whole cards covers jobs on whole cards (MIG jobs are charged as used)
        for a in _covering_allocations(list(windows)):
            windows[a.pricing_method][(a.team_id, a.gpu_model_id)].append(
                (a.starts_at, a.ends_at, a.id)
            )
            self._allocations[a.id] = a
            self._places[a.id] = Place.of(
                a.place_scheduler,
                a.place_cluster,
                partition=a.place_partition,
                namespace=a.place_namespace or f"team-{a.team_slug}",
            )

    def held(
        self, pairs: Iterable[tuple[int, int]], *, scheduler: str, cluster: int | None
    ) -> dict[tuple[int, int], tuple]:
        """``{(team id, GPU model id): (reserved, on use)}`` for ``pairs`` (``reserved``: those
        priced by reserved card-hours or tokens, :data:`COVERING`): the
        :class:`~billing.reserved_cover.Held` of the team's allocations of that model in the
        pools of ``scheduler`` in ``cluster`` (:func:`node_cluster_id`'s key: ``None`` for the
        environment's), each with its place's ``where`` (:class:`Place`), in
        :meth:`_load_reservations`' order, each from its start taken to the whole second; a
        reservation's cards as it held them over time (reclamation,
        :func:`pools.reclamation.card_timeline.card_pieces`; an elastic one's cards above its
        floor too, billed as burst, those placed in a burst pool in that pool's place:
        :func:`_held_pieces`), so usage on cards billed as held is not charged again. An
        elastic allocation priced on use covers nothing at home (its usage there is what it
        pays, :func:`usage_import_elastic_burst`) but the cards it placed in a burst pool,
        billed held at that pool's price, cover the usage on them there: those follow the
        reservations. Loaded once per pair and place (one query for the card changes of the
        pairs not loaded yet, three for the scale events of the elastic ones, one for their
        burst pools)."""
        scope = (scheduler, cluster)
        wanted = [p for p in set(pairs) if (p, scope) not in self._held]
        ids = [i for p in wanted for _, _, i in self.reserved.get(p, ())]
        on_use_ids = [i for p in wanted for _, _, i in self.on_use.get(p, ())]
        elastic = [i for i in ids + on_use_ids if self._allocations[i].elastic]
        changes = card_changes(set(ids + elastic)) if ids or elastic else {}
        timelines = held_timelines(allocation_ids=elastic) if elastic else {}
        placed = burst_pool_timelines(allocation_ids=elastic) if elastic else {}
        self._load_pool_places({pool for pools in placed.values() for pool in pools})
        found = (changes, timelines, placed)
        for pair in wanted:
            reserved = [
                h for _, _, i in self.reserved.get(pair, ())
                for h in self._cards_held(i, scope, found)
            ]  # fmt: skip
            reserved += [
                h for _, _, i in self.on_use.get(pair, ()) if self._allocations[i].elastic
                for h in self._cards_held(i, scope, found, placed_only=True)
            ]  # fmt: skip
            on_use = [
                Held(i, s.replace(microsecond=0), e, where=self._places[i].where)
                for s, e, i in self.on_use.get(pair, ())
                if self._places[i].scope == scope
            ]
            self._held[(pair, scope)] = (reserved, on_use)
        return {p: self._held[(p, scope)] for p in pairs}

    def _cards_held(
        self, allocation_id: int, scope: tuple, found: tuple, *, placed_only: bool = False
    ) -> list[Held]:
        """The :class:`Held` of one allocation's cards in ``scope`` (:meth:`held`), from
        ``found``: ``(card changes, elastic timelines, burst pool timelines)`` by allocation
        id; ``placed_only``: those it placed in burst pools only."""
        changes, timelines, placed = found
        a = self._allocations[allocation_id]
        pieces = card_pieces(a, changes.get(allocation_id, ()))
        out = []
        for start, end, cards, pool_id in _held_pieces(
            pieces, timelines.get(allocation_id, ()), a.card_count, placed.get(allocation_id, {})
        ):
            if pool_id is None and placed_only:
                continue
            place = self._places[allocation_id]
            if pool_id is not None:
                place = self._pool_places[pool_id].of_team(a.team_slug)
            if place.scope != scope:
                continue
            if start == a.starts_at:
                start = start.replace(microsecond=0)
            out.append(Held(allocation_id, start, end, Fraction(cards), place.where))
        return out

    def _load_pool_places(self, pool_ids: set[int]) -> None:
        """Add to ``_pool_places`` the burst pools of ``pool_ids`` not loaded yet (one query)."""
        wanted = pool_ids - set(self._pool_places)
        for pool in Pool.objects.filter(pk__in=wanted).select_related("cluster"):
            self._pool_places[pool.pk] = PoolPlace(
                pool.scheduler, node_cluster_id(pool.cluster), pool.slurm_partition
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

    def on_use_throughout(
        self,
        team_id: int,
        model_id: int,
        start: datetime,
        end: datetime,
        *,
        scheduler: str,
        cluster: int | None,
    ) -> int | None:
        """The team's allocation of ``model_id`` priced on use in the pools of ``scheduler`` in
        ``cluster`` (as :meth:`held`) in force at every moment of ``[start, end)``, or
        ``None``: the first to start of those in force at ``start``, its start taken to the
        whole second, when it lasts until ``end``. Any earlier-started one is over by
        ``start``, so this one is the first in force all along."""
        windows = [
            w
            for w in self.on_use.get((team_id, model_id), ())
            if self._places[w[2]].scope == (scheduler, cluster)
        ]
        window = _in_force(windows, start)
        return window[2] if window is not None and end <= window[1] else None


def _covering_allocations(methods: list[str]) -> QuerySet[Allocation]:
    """The charged allocations of whole cards priced by ``methods``, in start order, with
    the columns of their place (``place_scheduler``, ``place_cluster``: the pool's cluster
    key, ``place_partition``, ``place_namespace``: the binding's, ``team_slug``) and
    ``elastic`` (it has an elastic policy) — read as columns, not the pool, cluster and team
    rows."""
    return (
        Allocation.objects.whole_cards()
        .filter(pricing_method__in=methods, status__in=CHARGED_STATUSES)
        .only(
            "id", "team_id", "gpu_model_id", "starts_at", "ends_at", "pricing_method", "card_count"
        )  # fmt: skip
        .annotate(
            place_scheduler=F("pool__scheduler"),
            place_cluster=pool_node_cluster_id("pool"),
            place_partition=F("pool__slurm_partition"),
            place_namespace=KT("scheduler_binding__namespace"),
            team_slug=F("team__slug"),
            elastic=Exists(ElasticPolicy.objects.filter(allocation_id=OuterRef("pk"))),
        )
        .order_by("starts_at", "id")
    )


def _held_pieces(
    pieces: Sequence[CardPiece],
    timeline: Sequence[tuple[float, int]],
    floor: int,
    placed: dict[int, list[tuple[float, int]]],
) -> list[tuple[datetime, datetime, int, int | None]]:
    """``(start, end, cards, burst pool id or None)``: where a reservation's cards were over
    its window (pure). ``pieces``: its cards as reclamation left them
    (:func:`~pools.reclamation.card_timeline.card_pieces`); an elastic one's ``timeline``
    (:func:`~pools.elastic.selectors.held_timelines`: ``(unix s, cards held from then on)``,
    empty for one that is not elastic) adds the cards held above its ``floor``, billed as burst
    (:func:`usage_import_elastic_burst`), less those ``placed`` in burst pools
    (:func:`~pools.elastic.selectors.burst_pool_timelines`: pool id -> the same steps, 0
    before the first), which are pieces of their pool (``None``: home). Cut at every change;
    home pieces of 0 cards kept (as reclamation's), burst pool ones left out."""
    if not pieces:
        return []
    steps = [_steps(timeline), *(_steps(s) for s in placed.values())]
    lo, hi = pieces[0].start, pieces[-1].end
    cuts = {p.start for p in pieces} | {p.end for p in pieces}
    cuts.update(at for times, _ in steps for at in times if lo < at < hi)
    out: list[tuple[datetime, datetime, int, int | None]] = []
    ordered = sorted(cuts)
    for start, end in zip(ordered, ordered[1:], strict=False):
        base = next(p.cards for p in pieces if p.start <= start < p.end)
        held, *there = (_step_at(*s, start) for s in steps)
        burst = max(0, (floor if held is None else held) - floor)
        cards = [(base + max(0, burst - sum(c or 0 for c in there)), None)]
        cards += [(c, pool) for c, pool in zip(there, placed, strict=True) if c]
        for count, pool in cards:
            last = next((i for i in range(len(out) - 1, -1, -1) if out[i][3] == pool), None)
            if last is not None and out[last][1] == start and out[last][2] == count:
                out[last] = (out[last][0], end, count, pool)
            else:
                out.append((start, end, count, pool))
    return out


def _steps(timeline: Sequence[tuple[float, int]]) -> tuple[list[datetime], list[int]]:
    return [datetime.fromtimestamp(at, UTC) for at, _ in timeline], [c for _, c in timeline]


def _step_at(times: list[datetime], values: list[int], at: datetime) -> int | None:
    """The value of the step function ``(times, values)`` at ``at``; ``None`` before it."""
    index = bisect_right(times, at) - 1
    return values[index] if index >= 0 else None


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


@dataclass(frozen=True)
class PoolPlace:
    """A burst pool's ``scheduler``, cluster key (as :class:`Place`) and Slurm ``partition``:
    the place of the cards an elastic allocation placed there, for its team
    (:meth:`of_team`)."""

    scheduler: str
    cluster: int | None
    partition: str

    def of_team(self, slug: str) -> Place:
        """Kubernetes: the team's namespace there, where the cards placed in it are its quota
        (:func:`pools.elastic.services._burst_pool_apply`)."""
        return Place.of(self.scheduler, self.cluster, partition=self.partition,
                        namespace=f"team-{slug}")  # fmt: skip


@dataclass(frozen=True)
class Place:
    """Where an allocation's cards are, as the usage imports see usage: ``scheduler`` and
    ``cluster`` (the pool's; ``None`` for the environment's, as :func:`node_cluster_id`) make
    its ``scope``, the one import that reads its usage; ``where`` the place inside it (a Slurm
    partition, ``None`` for a pool of a whole cluster; a Kubernetes namespace)."""

    scheduler: str
    cluster: int | None
    where: str | None

    @property
    def scope(self) -> tuple[str, int | None]:
        return self.scheduler, self.cluster

    @classmethod
    def of(cls, scheduler: str, cluster: int | None, *, partition: str, namespace: str) -> Place:
        """The place of an allocation in a pool of ``scheduler`` in ``cluster``: a Slurm pool's
        ``partition`` (its account's GrpTRES is on that partition; blank: on the account, the
        whole cluster); a Kubernetes pool's ``namespace``, its scheduler binding's, else
        ``team-<slug>`` (where the team's quota is applied,
        :mod:`pools.capacity.services.scheduler_binding`)."""
        if scheduler == Scheduler.KUBERNETES:
            return cls(scheduler, cluster, namespace)
        return cls(scheduler, cluster, partition or None)


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
    starts, per GRES type: cards × seconds. Each month's piece is cut at the edges of the team's
    allocations of that GPU model in the pool the job ran in — the Slurm pool of ``cluster``
    with the job's partition, or one of the whole cluster (no partition) — never another
    pool's or cluster's (:mod:`billing.reserved_cover`): its card-seconds inside an
    allocation priced by reserved card-hours or by tokens (:data:`COVERING`) and within its
    cards are ``included`` (paid by its reservation or its tokens, not charged again), keyed
    ``<piece key>:alloc<id>``; when the team's jobs of the model in force at a moment hold more
    cards than its reservations then, the jobs started last are beyond them (read from
    accounting beside the window when they ran outside it, :func:`_pieces_beside`, so hourly
    imports give one import of the month's records). Card-seconds not covered inside an
    allocation priced on use are ``used`` and name it (same key shape); the rest
    are ``used`` in none, under the piece's own key, written even at 0 so that a record
    imported under an earlier rule (the whole piece by its start) is corrected in place. A
    ``…:alloc<id>`` record of a seen piece the rule no longer gives (the allocation cancelled;
    imported before allocations were matched to their pool, one of another pool) is set to 0
    (:func:`_gone_parts`).
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
    pieces: list[_Piece] = []
    for job in jobs:
        report.jobs_seen += 1
        found, skew = _job_pieces(job, now, catalogue, zone, prefix, report)
        pieces += found
        records += skew
    key = node_cluster_id(cluster)
    beside = _pieces_beside(scheduler, pieces, catalogue, (start, end, now, zone, prefix, key))
    records += _piece_records(pieces, catalogue, report, beside, cluster=key)
    problem = accounting_gpu_tres_problem(jobs, catalogue.gpu_partitions)
    if problem is not None:
        report.issues.insert(0, problem)
    with transaction.atomic():
        records += _gone_parts(pieces, {r.source_id for r in records})
        usage_records_upsert(records, report, now)
        return usage_import_save(UsageSource.SLURM_ACCOUNTING, start, end, report)


@dataclass(frozen=True)
class _Piece:
    """``cards`` of one GRES entry of one job run over one month's piece ``[start, end)``;
    ``key`` its record's source id (:func:`_job_key`), ``rank`` the job's precedence for a
    reservation's cards (:mod:`billing.reserved_cover`: started first, then the smaller job
    id, then GRES key); covered by the reservations of its job's partition."""

    job: JobRecord
    run_end: datetime
    team_id: int
    model_id: int
    cards: Decimal
    key: str
    rank: tuple
    month: date
    start: datetime
    end: datetime

    @property
    def use(self) -> Use:
        """This piece as :mod:`billing.reserved_cover` counts it, in its job's partition."""
        return Use(self.key, self.rank, self.start, self.end, Fraction(self.cards),
                   self.job.partition or None)  # fmt: skip


def _job_pieces(
    job: JobRecord,
    now: datetime,
    catalogue: UsageCatalogue,
    zone,
    prefix: str,
    report: ImportReport,
) -> tuple[list[_Piece], list[UsageRecord]]:
    """``(pieces, clock-skew records)`` of one Slurm ``job``, metered over ``[start, end or
    now)`` (a running job up to ``now``) in billing months of ``zone``, keys prefixed by
    ``prefix`` (the cluster's, :func:`_job_key`). A job that cannot be metered gives none, but
    clock skew is reported (``clock_skew``, flagged) and kept as 0 records
    (:func:`_skew_records`) when its account is a team's and it started; a job of no team's
    account is reported (``unknown_account``), a GRES type of no model ``unknown_gpu_model``."""
    team_id = catalogue.accounts.get(job.account or "")
    run_end = job.end if job.end is not None else (now if job.start is not None else None)
    try:
        meter_interval(job.start, run_end)
    except UnusableInterval as problem:
        if problem.code != "clock_skew":
            return [], []
        report.flagged += 1
        report.issues.append({"job_id": job.job_id, "code": problem.code,
                              "detail": problem.reason})  # fmt: skip
        if team_id is not None and job.start is not None:
            return [], list(_skew_records(job, team_id, catalogue, zone, prefix))
        return [], []
    if team_id is None:
        report.issues.append({"job_id": job.job_id, "code": "unknown_account",
                              "detail": f"account {job.account!r} is no team's"})  # fmt: skip
        return [], []
    pieces = []
    job_id = str(job.job_id)
    for key, gres_type, cards in _gpu_shares(job):
        model_id = catalogue.gpu_model(gres_type, job.partition)
        if model_id is None:
            report.issues.append({"job_id": job.job_id, "code": "unknown_gpu_model",
                                  "detail": f"GRES type {key!r} in partition "
                                            f"{job.partition!r} matches no model"})  # fmt: skip
            continue
        rank = (job.start, len(job_id), job_id, key or "")
        for month, piece_start, piece_end in split_at_months(job.start, run_end, zone):
            pieces.append(_Piece(job, run_end, team_id, model_id, cards,
                                 _job_key(job, key, month, prefix), rank, month, piece_start,
                                 piece_end))  # fmt: skip
    return pieces, []


def _pieces_beside(
    scheduler: AccountingSource, pieces: list[_Piece], catalogue: UsageCatalogue, read: tuple
) -> list[_Piece]:
    """The pieces of the jobs not read for the window that ran beside ``pieces`` while a
    reservation of their team and model was in force: those share its cards, the earlier
    started first, so a job's cover depends on every job in force with it
    (:mod:`billing.reserved_cover`), and a job seen in an hour's window may have run for days.
    ``read``: ``(window start, window end, now, zone, key prefix, cluster key)``.

    Read from accounting over the stretch of the pieces inside a reservation, for their teams'
    accounts only; nothing is read when that stretch lies inside the window (its jobs were
    read). Only the cover at the times of ``pieces`` is taken from them: their own records are
    written when an import's window reads them."""
    start, end, now, zone, prefix, cluster = read
    held = catalogue.held({(p.team_id, p.model_id) for p in pieces}, scheduler=Scheduler.SLURM,
                          cluster=cluster)  # fmt: skip
    capped = [
        p for p in pieces
        if any(h.start < p.end and p.start < h.end and h.serves(p.use)
               for h in held[(p.team_id, p.model_id)][0])
    ]  # fmt: skip
    if not capped:
        return []
    lo, hi = min(p.start for p in capped), max(p.end for p in capped)
    if start <= lo and hi <= end:
        return []
    teams = {p.team_id for p in capped}
    accounts = sorted(account for account, team in catalogue.accounts.items() if team in teams)
    seen = {(p.job.job_id, p.job.start) for p in pieces}
    quiet = ImportReport()  # their problems are reported by the imports that read them
    beside = []
    for job in scheduler.jobs_from_accounting(lo, hi, accounts=accounts):
        if (job.job_id, job.start) not in seen:
            beside += _job_pieces(job, now, catalogue, zone, prefix, quiet)[0]
    return beside


def _piece_records(
    pieces: list[_Piece],
    catalogue: UsageCatalogue,
    report: ImportReport,
    beside=(),
    *,
    cluster: int | None = None,
) -> list[UsageRecord]:
    """The records of ``pieces`` (jobs of the Slurm ``cluster``, :func:`node_cluster_id`'s
    key): each cut by its team's allocations of its GPU model in the Slurm pools of that
    cluster and covered within the reservations' cards in its partition
    (:func:`billing.reserved_cover.cover`, over the pieces of the team and model that overlap
    one, with those ``beside`` them: :func:`_pieces_beside`, not written); flags ambiguous wall
    times (:func:`_flag_other_reading`)."""
    groups: dict[tuple[int, int], list[_Piece]] = defaultdict(list)
    for piece in pieces:
        groups[(piece.team_id, piece.model_id)].append(piece)
    others: dict[tuple[int, int], list[_Piece]] = defaultdict(list)
    for piece in beside:
        others[(piece.team_id, piece.model_id)].append(piece)
    held = catalogue.held(groups, scheduler=Scheduler.SLURM, cluster=cluster)
    records = []
    for pair, group in groups.items():
        reserved, on_use = held[pair]
        windows = [*reserved, *on_use]
        inside = [
            p for p in group + others.get(pair, [])
            if any(h.start < p.end and p.start < h.end and h.serves(p.use) for h in windows)
        ]  # fmt: skip
        parts = cover([p.use for p in inside], reserved, on_use)
        for piece in group:
            for record in _part_records(piece, parts.get(piece.key)):
                report.flagged += _flag_other_reading(record, piece.job, piece.run_end)
                records.append(record)
    return records


def _part_records(piece: _Piece, parts: dict[PartKey, Part] | None) -> list[UsageRecord]:
    """The card-seconds records of one ``piece`` from its ``parts`` (``None``: in no
    allocation, all of it used): its own key for the part in no allocation (at 0, over the
    piece, when none), ``<key>:alloc<id>`` for each allocation's, each over its stretch,
    quantities rounded to 6 places."""
    if parts is None:
        parts = {(None, False): Part(Fraction(piece.cards) * _seconds(piece.start, piece.end),
                                     piece.start, piece.end)}  # fmt: skip
    parts.setdefault((None, False), Part(Fraction(0), piece.start, piece.end))
    records = []
    for (allocation_id, included), part in sorted(parts.items(), key=lambda kv: kv[0][0] or 0):
        quantity = Decimal(part.card_seconds.numerator) / part.card_seconds.denominator
        key = piece.key if allocation_id is None else f"{piece.key}{ALLOC}{allocation_id}"
        records.append(
            UsageRecord(
                team_id=piece.team_id,
                gpu_model_id=piece.model_id,
                allocation_id=allocation_id,
                quantity=quantity.quantize(Decimal("0.000001")),
                unit=UsageUnit.CARD_SECONDS,
                basis=ChargeBasis.INCLUDED if included else ChargeBasis.USED,
                month=piece.month,
                period_start=part.start,
                period_end=part.end,
                source=UsageSource.SLURM_ACCOUNTING,
                source_id=key,
            )
        )
    return records


def _seconds(start: datetime, end: datetime) -> Fraction:
    return Fraction((end - start) // timedelta(microseconds=1), 1_000_000)


ALLOC = ":alloc"
"""What a Slurm piece's key is followed by, then the allocation id, for its part in one."""


def _gone_parts(pieces: list[_Piece], written: set[str]) -> list[UsageRecord]:
    """The stored ``<piece key>:alloc<id>`` records of ``pieces`` that ``written`` (this
    import's keys) no longer has — the allocation was cancelled, or its window moved off the
    job — at 0, so the usage is not counted beside the piece's new records. One query."""
    if not pieces:
        return []
    keys = {p.key for p in pieces}
    stale = []
    for row in UsageRecord.objects.filter(
        source=UsageSource.SLURM_ACCOUNTING,
        team_id__in={p.team_id for p in pieces},
        month__in={p.month for p in pieces},
        source_id__contains=ALLOC,
        quantity__gt=0,
    ).order_by("id"):
        if row.source_id in written or row.source_id.rpartition(ALLOC)[0] not in keys:
            continue
        row.pk, row.quantity = None, Decimal(0)
        stale.append(row)
    return stale


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
