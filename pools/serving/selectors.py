"""Reading stored rollups: an allocation's series for a chart, the newest values of many
allocations (constant queries whatever their number), whether the rollups are stale, and the
sums efficiency is computed from. Pages and the API read these, never Prometheus."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.db.models import Count, Exists, F, Max, OuterRef, Q, Sum
from django.db.models.functions import TruncDay

from pools.capacity.models import Allocation
from pools.serving.choices import Resolution
from pools.serving.efficiency import Usage
from pools.serving.fold import ROW_FIELDS, SIGNAL_FIELDS, fold
from pools.serving.models import (
    ServedModel,
    ServingCalibrationDay,
    ServingRollup,
    ServingRollupRun,
)
from pools.serving.precision import signal_rounded, signals_rounded

# A chart's span: how far back, and the point it draws (24 h of 5-minute rows, 7 d of hours).
SPANS = {"24h": (timedelta(hours=24), 300), "7d": (timedelta(days=7), 3600)}
STALE_AFTER = timedelta(minutes=15)  # three missed passes


@dataclass(frozen=True)
class RollupState:
    """How fresh the stored values are: the newest bucket's end, its age at ``now``, whether it
    is stale (older than :data:`STALE_AFTER`, or none yet), and the newest pass's error."""

    newest_end: datetime | None
    age: timedelta | None
    stale: bool
    error: str
    unmatched_count: int
    unmatched: list

    @property
    def age_minutes(self) -> int | None:
        return None if self.age is None else int(self.age.total_seconds() // 60)


def serving_state(*, now: datetime) -> RollupState:
    """Two queries: the newest 5-minute bucket, and the newest pass."""
    newest = ServingRollup.objects.filter(bucket_seconds=Resolution.FIVE_MINUTES).aggregate(
        newest=Max("bucket_start")
    )["newest"]
    run = ServingRollupRun.objects.order_by("-started_at").first()
    end = newest + timedelta(seconds=Resolution.FIVE_MINUTES) if newest else None
    age = now - end if end else None
    return RollupState(
        newest_end=end,
        age=age,
        stale=age is None or age > STALE_AFTER,
        error=run.error if run and not run.ok else "",
        unmatched_count=run.unmatched_count if run and run.ok else 0,
        unmatched=run.unmatched if run and run.ok else [],
    )


def serving_current(*, allocation_ids: Iterable[int], state: RollupState) -> dict[int, dict]:
    """The newest bucket's row of each allocation (allocation id -> its fields, signals rounded
    to :data:`pools.serving.precision.PLACES`); allocations without a row there are absent
    (unknown). One query."""
    if state.newest_end is None:
        return {}
    start = state.newest_end - timedelta(seconds=Resolution.FIVE_MINUTES)
    rows = ServingRollup.objects.filter(
        allocation_id__in=list(allocation_ids),
        bucket_seconds=Resolution.FIVE_MINUTES,
        bucket_start=start,
    ).values("allocation_id", "bucket_start", *ROW_FIELDS)
    return {row["allocation_id"]: signals_rounded(row) for row in rows}


def serving_series(*, allocation_id: int, span: str, now: datetime) -> list[dict]:
    """Points of one allocation over ``span`` (:data:`SPANS`), oldest first: each a dict of
    ``at`` (bucket start), ``seconds`` (the time its rows cover: counts over it, not over the
    step, where buckets are missing) and the signal fields (rounded to
    :data:`pools.serving.precision.PLACES`). 7 d folds 5-minute rows into hours
    (:func:`~pools.serving.fold.fold`); hours already compacted are read as they are."""
    length, step = SPANS[span]
    rows = (
        ServingRollup.objects.filter(allocation_id=allocation_id, bucket_start__gte=now - length)
        .order_by("bucket_start", "bucket_seconds")
        .values("bucket_start", *ROW_FIELDS)
    )
    groups: dict[datetime, list[dict]] = defaultdict(list)
    for row in rows:
        start = row["bucket_start"]
        key = start - timedelta(seconds=int(start.timestamp()) % step)
        groups[key].append(row)
    points = []
    for at, group in sorted(groups.items()):
        folded = group[0] if len(group) == 1 else fold(group, step)
        seconds = sum(row["bucket_seconds"] for row in group)
        points.append(
            {
                "at": at,
                "seconds": seconds,
                **{name: signal_rounded(name, folded.get(name)) for name in SIGNAL_FIELDS},
            }
        )
    return points


def serving_usage(
    *, allocation_ids: Iterable[int], start: datetime, end: datetime, by_day: bool = False
) -> dict:
    """Sums over the rollups in ``[start, end)`` for efficiency (:class:`Usage`), per
    allocation id, or per (allocation id, UTC day) with ``by_day``. One query."""
    hours = F("cards_held") * F("bucket_seconds")
    tokens_known = Q(generation_tokens__isnull=False)
    keys = ["allocation_id"]
    qs = ServingRollup.objects.filter(
        allocation_id__in=list(allocation_ids), bucket_start__gte=start, bucket_start__lt=end
    )
    if by_day:
        qs = qs.annotate(day=TruncDay("bucket_start", tzinfo=UTC))
        keys.append("day")
    rows = qs.values(*keys).annotate(
        held_s=Sum(hours),
        reporting_s=Sum(F("cards_reporting") * F("bucket_seconds")),
        busy_s=Sum(F("cards_busy") * F("bucket_seconds")),
        token_s=Sum(hours, filter=tokens_known),
        input_tokens=Sum("prompt_tokens"),
        output_tokens=Sum("generation_tokens", filter=tokens_known),
        buckets=Count("id"),
    )
    out = {}
    for row in rows:
        key = row["allocation_id"] if not by_day else (row["allocation_id"], row["day"].date())
        out[key] = usage_from_sums(row)
    return out


def usage_from_sums(row: dict) -> Usage:
    """Card-seconds and token sums (as :func:`serving_usage` reads them) as :class:`Usage`."""

    def card_hours(seconds) -> Decimal:
        return (Decimal(str(seconds or 0)) / 3600).quantize(Decimal("0.001"))

    def tokens(value) -> int | None:
        return None if value is None else round(value)

    return Usage(
        held_card_hours=card_hours(row["held_s"]),
        reporting_card_hours=card_hours(row["reporting_s"]),
        busy_card_hours=None if row["busy_s"] is None else card_hours(row["busy_s"]),
        token_card_hours=card_hours(row["token_s"]),
        input_tokens=tokens(row["input_tokens"]),
        output_tokens=tokens(row["output_tokens"]),
    )


def merge_usage(items: Iterable[Usage]) -> Usage | None:
    """Several :class:`Usage` added up (a team, pool or GPU model); ``None`` when empty."""
    items = list(items)
    if not items:
        return None

    def total(name):
        values = [getattr(u, name) for u in items if getattr(u, name) is not None]
        return sum(values) if values else None

    return Usage(
        held_card_hours=total("held_card_hours"),
        reporting_card_hours=total("reporting_card_hours"),
        busy_card_hours=total("busy_card_hours"),
        token_card_hours=total("token_card_hours"),
        input_tokens=total("input_tokens"),
        output_tokens=total("output_tokens"),
    )


def serving_stored(*, allocation_id: int) -> bool:
    """Whether any rollup of the allocation is stored (the Serving page's empty state: never
    served, not yet started, or only other series). One probe of the rollups' index."""
    return ServingRollup.objects.filter(allocation_id=allocation_id).exists()


def serving_allocation_list(*, user):
    """Allocations ``user`` may see that have any stored rollup, oldest window first (the API's
    list), reading only what the list writes: the allocation's own columns and the team, pool
    and GPU model slugs (a GPU model row is some 40 columns, a request another 20: reading them
    for a page of 50 cost more than the page's other queries together). "Has a rollup" is a
    join on :class:`~pools.serving.models.ServingCoverage`: the page count is then a join of
    two small tables, not a probe of the rollups per allocation (10 ms of a 24 ms page at
    2,000 allocations)."""
    return (
        Allocation.objects.visible_to(user)
        .filter(serving_coverage__isnull=False)
        .select_related("team", "pool", "gpu_model")
        .only("id", "card_count", "starts_at", "team__slug", "pool__slug", "gpu_model__slug")
        .order_by("starts_at", "id")
    )


def serving_allocation_one(*, user):
    """The allocations ``user`` may see that have any stored rollup, for reading one by id
    (the API's detail and its actions): asked of the rollups themselves, one probe."""
    rolled_up = ServingRollup.objects.filter(allocation_id=OuterRef("pk"))
    return (
        Allocation.objects.visible_to(user)
        .filter(Exists(rolled_up))
        .select_related("team", "pool", "gpu_model")
        .only("id", "card_count", "starts_at", "team__slug", "pool__slug", "gpu_model__slug")
        .order_by("starts_at", "id")
    )


def allocations_served(*, start: datetime, end: datetime):
    """Allocations with any rollup in ``[start, end)``, with team, pool and GPU model joined."""
    rolled = ServingRollup.objects.filter(
        allocation_id=OuterRef("pk"), bucket_start__gte=start, bucket_start__lt=end
    )
    return (
        Allocation.objects.filter(Exists(rolled))
        .select_related("team", "pool", "gpu_model")
        .order_by("id")
    )


def serving_calibration(*, allocation_id: int, all_days: bool = False) -> dict | None:
    """Measured against sized for one allocation, as the calibration beat stored it:
    ``{"served": ServedModel, "latest": the newest ServingCalibrationDay or None, "days": count}``
    and, with ``all_days``, ``"days_list"`` newest first; ``None`` when the allocation does not
    say what it serves. Two queries."""
    served = ServedModel.objects.filter(allocation_id=allocation_id).first()
    if served is None:
        return None
    days = list(ServingCalibrationDay.objects.filter(allocation_id=allocation_id).order_by("-day"))
    out = {"served": served, "latest": days[0] if days else None, "days": len(days)}
    if all_days:
        out["days_list"] = days
    return out
