"""The serving rollup: one pass every 5 minutes (beat ``serving-rollup``) reads every family of
signals for every open allocation from Prometheus (six instant queries per Prometheus, whatever
the number of allocations) and stores one :class:`~pools.serving.models.ServingRollup` per
allocation; an hourly compaction keeps 5-minute rows for ``SERVING_ROLLUP_5M_DAYS`` (35) days,
then one row per hour for ``SERVING_ROLLUP_HOURLY_MONTHS`` (13) months.

A pass that cannot read Prometheus (not configured, a timeout, a refused query) writes no
rollup: the last ones stay and the pages say how old they are (``selectors.serving_state``).
Each allocation is read from its cluster's Prometheus (``Cluster.prometheus_url``, blank =
``PROMETHEUS_URL``), each Prometheus once a pass; one that cannot be read leaves only its
allocations' last rollups in place, and the pass's error names it.
Running a pass twice for one bucket writes nothing new (one row per allocation and bucket).
"""

from __future__ import annotations

import calendar
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.forms.models import model_to_dict
from django.utils import timezone
from django.utils.module_loading import import_string

from pools.capacity.lifecycle import APPLIED_STATUSES
from pools.capacity.models import Allocation
from pools.clusters.adapters import by_metrics_url, metrics_adapter, metrics_url
from pools.common.choices import Scheduler
from pools.serving.choices import Resolution
from pools.serving.fold import ROW_FIELDS, fold
from pools.serving.models import ServingCoverage, ServingRollup, ServingRollupRun
from pools.serving.rollup import Unmatched, allocation_values, held_at, place_targets
from scheduler_adapters.errors import SchedulerError
from scheduler_adapters.prometheus import cyclic_gc_paused
from scheduler_adapters.serving_metrics import (
    WINDOW_S,
    Answers,
    answers_from_series,
    serving_answers,
)

UNMATCHED_LISTED = 200  # a run lists at most this many unmatched targets (all are counted)


def bucket_floor(moment: datetime, seconds: int = WINDOW_S) -> datetime:
    """The start of the ``seconds``-long bucket holding ``moment`` (UTC-aligned)."""
    epoch = int(moment.timestamp())
    return datetime.fromtimestamp(epoch - epoch % seconds, tz=UTC)


def _open_allocations(start: datetime, end: datetime) -> list[Allocation]:
    return list(
        Allocation.objects.filter(status__in=APPLIED_STATUSES)
        .overlapping(start, end)
        .select_related("team", "pool__cluster")
        .only(
            "id",
            "card_count",
            "starts_at",
            "ends_at",
            "scheduler_binding",
            "team__slug",
            "pool__scheduler",
            "pool__cluster",
            "pool__cluster__prometheus_url",
        )
    )


def _namespace(allocation: Allocation) -> str | None:
    """The Kubernetes namespace an allocation serves in (its binding's, else ``team-<slug>``,
    what :mod:`pools.capacity.services.scheduler_binding` creates); ``None`` on Slurm."""
    if allocation.pool.scheduler != Scheduler.KUBERNETES:
        return None
    return (allocation.scheduler_binding or {}).get("namespace") or f"team-{allocation.team.slug}"


def serving_rollup_pass(*, now: datetime | None = None, metrics=None) -> ServingRollupRun:
    """Roll up the 5-minute bucket that ended last before ``now`` (module docstring).

    Rows: every open Kubernetes allocation (all ``None`` with ``missing`` filled when nothing
    answered: unknown, not idle), and every other open allocation a labelled series placed.
    Each allocation is read from its pool's cluster's Prometheus (``Cluster.prometheus_url``,
    blank or no cluster = ``PROMETHEUS_URL``): every family once per Prometheus, its answers
    placed among that Prometheus's allocations only. ``metrics`` (an adapter, tests) stands for
    every allocation's. A Prometheus not set or not read writes no rows for its allocations
    (their last rollup stays; ``run.error`` names it) and the others are still rolled up; the
    run fails (``ok`` false) only when none was read."""
    now = now or timezone.now()
    end = bucket_floor(now)
    start = end - timedelta(seconds=WINDOW_S)
    run = ServingRollupRun(bucket_start=start, started_at=now)
    allocations = _open_allocations(start, end)
    run.allocations = len(allocations)
    read, errors = _read_answers(run, allocations, end, metrics)
    run.error = "; ".join(errors)
    if not read:
        return _failed(run, run.error)
    rows, unmatched, unlabelled = _pass_rows(read, start)
    with transaction.atomic():
        # ignore_conflicts: a pass running at the same moment may have written some rows
        ServingRollup.objects.bulk_create(rows, ignore_conflicts=True, batch_size=1000)
        serving_coverage_note(rows)
        run.rollups = len(rows)
        run.unmatched_count = len(unmatched) + unlabelled
        run.unmatched = [u.as_dict() for u in unmatched[:UNMATCHED_LISTED]]
        run.ok = True
        run.finished_at = timezone.now()
        run.save()
    return run


def _pass_rows(
    read: list[tuple[list[Allocation], Answers]], start: datetime
) -> tuple[list[ServingRollup], list[Unmatched], int]:
    """The bucket's new rows of each group from its own Prometheus's answers (allocations
    already rolled up for ``start`` left out), what matched none, and the unlabelled count."""
    done = set(
        ServingRollup.objects.filter(
            bucket_seconds=Resolution.FIVE_MINUTES, bucket_start=start
        ).values_list("allocation_id", flat=True)
    )
    rows: list[ServingRollup] = []
    unmatched: list[Unmatched] = []
    unlabelled = 0
    for group, answers in read:
        todo = [a for a in group if a.pk not in done]
        found, missed = _bucket_rows(todo, answers, start, _held_timelines(todo))
        rows += found
        unmatched += missed
        unlabelled += answers.unlabelled
    return rows, unmatched, unlabelled


def _read_answers(
    run: ServingRollupRun, allocations: list[Allocation], end: datetime, metrics
) -> tuple[list[tuple[list[Allocation], Answers]], list[str]]:
    """Every family at ``end`` from each Prometheus for its allocations (grouped by their
    pool's cluster's, :func:`~pools.clusters.adapters.by_metrics_url`; ``metrics`` stands for
    all): ``[(group, answers)]`` of those read, and why the others were not; adds the requests
    sent to ``run.queries``."""
    groups = (
        {"": allocations}
        if metrics is not None
        else by_metrics_url(allocations, lambda a: a.pool.cluster) or {metrics_url(): []}
    )
    read: list[tuple[list[Allocation], Answers]] = []
    errors: list[str] = []
    for url, group in groups.items():
        adapter = metrics if metrics is not None else metrics_adapter(url=url) if url else None
        if adapter is None:
            errors.append(
                "PROMETHEUS_URL is not set: serving signals are unknown."
                if len(groups) == 1
                else f"PROMETHEUS_URL is not set: the serving signals of {len(group)} "
                "allocation(s) whose cluster names no Prometheus are unknown."
            )
            continue
        try:
            answers, queries = serving_answers(adapter, at=end, busy_pct=settings.SERVING_BUSY_PCT)
        except SchedulerError as exc:
            stays = "" if len(groups) == 1 else f" of {len(group)} allocation(s)"
            errors.append(f"Prometheus could not be read, the last rollup{stays} stays: {exc}")
            continue
        finally:
            if adapter is not metrics:
                adapter.close()
        run.queries += queries
        read.append((group, answers))
    return read, errors


def _held_timelines(allocations: list[Allocation]) -> dict[int, list[tuple[float, int]]]:
    """The elastic allocations' cards held over time, from the function
    ``settings.SERVING_HELD_TIMELINES`` names (``pools.elastic`` is serving's peer, so it is
    handed over by name; ``{}`` without one: every allocation holds its ``card_count``)."""
    provider = getattr(settings, "SERVING_HELD_TIMELINES", "")
    if not provider or not allocations:
        return {}
    return import_string(provider)(allocation_ids=[a.pk for a in allocations])


def _bucket_rows(
    allocations: list[Allocation],
    answers: Answers,
    start: datetime,
    timelines: Mapping[int, list[tuple[float, int]]] | None = None,
) -> tuple[list[ServingRollup], list[Unmatched]]:
    """One bucket's rows: every open Kubernetes allocation, and any other that a labelled
    series placed (Slurm without one is not serving); what matched none. ``cards_held`` is the
    allocation's ``card_count``, or for an elastic one (``timelines``) the cards its scale
    events say it held at the bucket's middle (a scale event moves at most half a bucket, 2.5
    minutes, of card-time to the neighbouring count)."""
    timelines = timelines or {}
    middle = start.timestamp() + WINDOW_S / 2
    namespaces = {a.pk: ns for a in allocations if (ns := _namespace(a))}
    placed, unmatched = place_targets(
        answers, open_ids=[a.pk for a in allocations], namespaces=namespaces
    )
    with cyclic_gc_paused():  # thousands of rows of small objects, no cycles
        rows = [
            _row(
                allocation,
                placed.get(allocation.pk),
                start,
                held=_held(timelines, allocation, middle),
            )
            for allocation in allocations
        ]
    return [row for row in rows if row is not None], unmatched


def _held(timelines, allocation: Allocation, at: float) -> int:
    timeline = timelines.get(allocation.pk)
    held = held_at(timeline, at) if timeline else None
    return allocation.card_count if held is None else held


def _row(
    allocation: Allocation, targets, start: datetime, *, held: int | None = None
) -> ServingRollup | None:
    """One allocation's row, or ``None`` for a Slurm allocation no labelled series placed."""
    if targets is None and _namespace(allocation) is None:
        return None
    held = allocation.card_count if held is None else held
    values = allocation_values(targets or [], held=held)
    return ServingRollup(
        allocation_id=allocation.pk,
        bucket_seconds=Resolution.FIVE_MINUTES,
        bucket_start=start,
        cards_held=held,
        engine="+".join(values.engines),
        missing=values.missing,
        notes=values.notes,
        **values.fields,
    )


def serving_rollup_replay(*, recorded: Iterable[tuple[datetime, Mapping]]) -> int:
    """Store rollups from recorded answers instead of asking Prometheus: ``recorded`` holds
    ``(bucket start, {family: [Series]})`` pairs (what :func:`serving_answers` would have been
    given), each rolled up exactly as a pass rolls up its bucket, against the allocations open
    in that bucket (pieces of one bucket's answers are joined first). For the demo and the
    benchmark; buckets already stored are kept. Returns
    the rows written."""
    by_bucket: dict[datetime, list] = defaultdict(list)
    for start, results in recorded:  # answers of one bucket may come in several pieces
        for series in results.values():
            by_bucket[start].extend(series)
    if not by_bucket:
        return 0
    window = timedelta(seconds=WINDOW_S)
    candidates = _open_allocations(min(by_bucket), max(by_bucket) + window)
    timelines = _held_timelines(candidates)
    rows: list[ServingRollup] = []
    for start, series in sorted(by_bucket.items()):
        open_now = [a for a in candidates if a.starts_at < start + window and a.ends_at > start]
        answers = answers_from_series({"recorded": series})
        rows.extend(_bucket_rows(open_now, answers, start, timelines)[0])
    with transaction.atomic():
        ServingRollup.objects.bulk_create(rows, ignore_conflicts=True, batch_size=2000)
        serving_coverage_note(rows)
    return len(rows)


def serving_coverage_note(rows: Iterable[ServingRollup]) -> int:
    """Mark the allocations of ``rows`` as rolled up (:class:`ServingCoverage`, first bucket
    kept); call it in the transaction that stores them. Two queries: the allocations already
    marked, then one INSERT of the others (none on an ordinary pass). Returns those added."""
    first: dict[int, datetime] = {}
    for row in rows:
        if row.allocation_id not in first or row.bucket_start < first[row.allocation_id]:
            first[row.allocation_id] = row.bucket_start
    known = set(
        ServingCoverage.objects.filter(allocation_id__in=list(first)).values_list(
            "allocation_id", flat=True
        )
    )
    new = [
        ServingCoverage(allocation_id=a, first_bucket=b) for a, b in first.items() if a not in known
    ]
    ServingCoverage.objects.bulk_create(new, ignore_conflicts=True, batch_size=2000)
    return len(new)


def _failed(run: ServingRollupRun, error: str) -> ServingRollupRun:
    run.error = error
    run.finished_at = timezone.now()
    run.save()
    return run


# ------------------------------------------------------------------------------ compaction


def months_before(moment: datetime, months: int) -> datetime:
    """``moment`` the same day ``months`` calendar months earlier (the last day of a shorter
    month)."""
    index = moment.year * 12 + moment.month - 1 - months
    year, month = index // 12, index % 12 + 1
    return moment.replace(
        year=year, month=month, day=min(moment.day, calendar.monthrange(year, month)[1])
    )


def serving_rollup_compact(*, now: datetime | None = None) -> dict[str, int]:
    """5-minute rows older than the retention become hourly rows (:func:`hourly_row`), in
    whole hours; hourly rows older than theirs are deleted. Safe to run twice: an hour already
    compacted has no 5-minute rows left."""
    now = now or timezone.now()
    cutoff = bucket_floor(now - timedelta(days=settings.SERVING_ROLLUP_5M_DAYS), 3600)
    old = ServingRollup.objects.filter(
        bucket_seconds=Resolution.FIVE_MINUTES, bucket_start__lt=cutoff
    ).order_by("allocation_id", "bucket_start")
    groups: dict[tuple[int, datetime], list[ServingRollup]] = defaultdict(list)
    for row in old.iterator(chunk_size=5000):
        groups[(row.allocation_id, bucket_floor(row.bucket_start, 3600))].append(row)
    hourly = [
        ServingRollup(
            allocation_id=allocation_id,
            bucket_seconds=Resolution.HOUR,
            bucket_start=hour,
            **fold([model_to_dict(r, fields=ROW_FIELDS) for r in rows], Resolution.HOUR),
        )
        for (allocation_id, hour), rows in groups.items()
    ]
    with transaction.atomic():
        ServingRollup.objects.bulk_create(hourly, ignore_conflicts=True, batch_size=1000)
        folded, _ = old.delete()
        expired, _ = ServingRollup.objects.filter(
            bucket_seconds=Resolution.HOUR,
            bucket_start__lt=months_before(now, settings.SERVING_ROLLUP_HOURLY_MONTHS),
        ).delete()
        rolled_up = ServingRollup.objects.filter(allocation_id=OuterRef("allocation_id"))
        ServingCoverage.objects.filter(~Exists(rolled_up)).delete()
        runs, _ = ServingRollupRun.objects.filter(
            started_at__lt=now - timedelta(days=settings.SERVING_ROLLUP_5M_DAYS)
        ).delete()
    return {"hourly": len(hourly), "folded": folded, "expired": expired, "runs": runs}
