"""The calibration pass: every allocation that declares what it serves
(:class:`~pools.serving.models.ServedModel`) gets one
:class:`~pools.serving.models.ServingCalibrationDay` per UTC day of rollups in the window, and
the days are gathered into one :class:`~pools.sizing.models.CalibrationRecord` per (served
model, GPU model, engine, precision, driver group). Run by beat, never in a request."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.db import transaction

from pools.capacity.models import PlacedCards
from pools.inventory.models import Node, pool_node_cluster_id
from pools.serving.calibration import compare, day_measure, median_or_none
from pools.serving.models import ServedModel, ServingCalibrationDay, ServingRollup
from pools.sizing import SizingInputError
from pools.sizing.engines import engine_profile
from pools.sizing.gpus import GPU_SPEC_FIELDS, GpuSpec, gpu_spec_from_fields
from pools.sizing.inputs import model_arch
from pools.sizing.memory import precision_parse
from pools.sizing.models import CalibrationRecord
from pools.sizing.plan import estimate_replica
from pools.sizing.presets import model_preset

ROLLUP_FIELDS = (
    "cards_held",
    "bucket_seconds",
    "generation_tokens",
    "prompt_tokens",
    "requests_running",
    "requests_finished",
)


def _driver_branches(allocation_ids: list[int]) -> dict[int, int | None]:
    """Allocation id -> the driver branch of the nodes its cards are on; ``None`` when they
    span several driver groups or none is known. A placed card's node is the one of that name
    in the allocation's pool's cluster (names are unique per cluster only). Two queries."""
    placed = list(
        PlacedCards.objects.filter(allocation_id__in=allocation_ids)
        .annotate(node_cluster=pool_node_cluster_id("allocation__pool"))
        .values_list("allocation_id", "node_cluster", "hostname")
    )
    hosts = {h for _, _, h in placed}
    branch_of = {
        (cluster_id, hostname): branch
        for cluster_id, hostname, branch in Node.objects.filter(hostname__in=hosts).values_list(
            "cluster_id", "hostname", "driver_group__branch"
        )
    }
    branches: dict[int, set] = defaultdict(set)
    for allocation_id, cluster_id, host in placed:
        branches[allocation_id].add(branch_of.get((cluster_id, host)))
    return {
        a: (next(iter(b)) if len(b) == 1 else None) for a, b in branches.items()
    }  # fmt: skip


def _key_names(served: ServedModel) -> tuple[str, str]:
    """The served precision and engine as the sizing engine names them (``fp16`` -> ``FP16``,
    ``trt-llm`` -> ``tensorrt-llm``), so records match estimates; as written when unknown."""
    try:
        precision = precision_parse(served.precision).name
    except SizingInputError:
        precision = served.precision
    try:
        engine = engine_profile(served.engine).name
    except SizingInputError:
        engine = served.engine
    return precision, engine


def _model(served: ServedModel):
    """The architecture sized: the linked estimate's (a preset or its custom architecture),
    else the catalogue preset the admin named."""
    if served.estimate is not None:
        return model_arch(served.estimate.inputs)
    return model_preset(served.model_id)


def _sized(served: ServedModel, measure, gpu_spec) -> tuple[float | None, object, str]:
    """The sizing engine's output tok/s per card at each bucket's concurrency (whole sequences
    per replica, at least 1), weighted by the buckets' card-seconds
    (:mod:`pools.serving.calibration`), at the day's mean lengths; the error band is that of
    the concurrency holding most card-seconds. ``(None, None, why)`` when it cannot be made."""
    if measure.input_tokens is None or measure.output_tokens is None:
        return None, None, "no finished requests: the mean lengths are unknown"
    weighted, total, band, heaviest = 0.0, 0.0, None, -1.0
    for sequences, card_seconds in measure.concurrency_card_seconds or (
        (max(1, round(measure.concurrency)), 1.0),
    ):
        try:
            estimate = estimate_replica(
                model=_model(served),
                gpu=gpu_spec,
                precision=served.precision,
                kv_cache_dtype=served.kv_cache_dtype or None,
                tp=served.tp,
                input_tokens=measure.input_tokens,
                output_tokens=measure.output_tokens,
                concurrency=sequences,
                engine=served.engine,
            )
        except SizingInputError as exc:
            return None, None, str(exc)[:300]
        if estimate.output_tok_s_total is None:
            return None, None, "the model does not fit on these cards"
        weighted += estimate.output_tok_s_total / served.tp * card_seconds
        total += card_seconds
        if card_seconds > heaviest:
            band, heaviest = estimate.band, card_seconds
    return weighted / total, band, ""


def _rollup_rows_by_day(
    allocation_ids: list[int], start: datetime, end: datetime
) -> dict[int, dict[date, list[dict]]]:
    """The 5-minute serving rollups of ``[start, end)`` per allocation and UTC day."""
    rows_by_day: dict[int, dict[date, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for row in ServingRollup.objects.filter(
        allocation_id__in=allocation_ids, bucket_start__gte=start, bucket_start__lt=end
    ).values("allocation_id", "bucket_start", *ROLLUP_FIELDS):
        day = row["bucket_start"].astimezone(UTC).date()
        rows_by_day[row["allocation_id"]][day].append(row)
    return rows_by_day


def _served_days(
    s: ServedModel, rows_by_day: dict[date, list[dict]], spec: GpuSpec
) -> list[ServingCalibrationDay]:
    """One served model's calibration days (pure): per UTC day with a measure
    (:func:`day_measure`), the measured and sized output tok/s per card, the sizing's error
    band and where the measure falls in it (:func:`compare`)."""
    days = []
    for day, rows in sorted(rows_by_day.items()):
        measure = day_measure(rows, tp=s.tp)
        if measure is None:
            continue
        sized, band, note = _sized(s, measure, spec)
        low = band.low_factor if band else None
        high = band.high_factor if band else None
        result = None if sized is None else compare(
            measured=measure.tok_s_per_card, sized=sized, low_factor=low, high_factor=high
        )  # fmt: skip
        days.append(
            ServingCalibrationDay(
                allocation_id=s.allocation_id, day=day, concurrency=measure.concurrency,
                measured_tok_s_per_card=measure.tok_s_per_card, sized_tok_s_per_card=sized,
                band_low_factor=low, band_high_factor=high,
                ratio=result.ratio if result else None,
                position=result.position if result else "", note=note,
            )
        )  # fmt: skip
    return days


def _calibration_records(
    grouped: dict[tuple, list[ServingCalibrationDay]], now: datetime
) -> list[CalibrationRecord]:
    """One record per (model, GPU model, engine, precision, driver branch): its days, its
    allocations, and the medians of the measured tok/s per card and of measured / sized."""
    return [
        CalibrationRecord(
            model_id=key[0],
            gpu_model_id=key[1],
            engine=key[2],
            precision=key[3],
            driver_branch=key[4],
            days=len(group),
            allocations=len({d.allocation_id for d in group}),
            median_tok_s_per_card=median_or_none(d.measured_tok_s_per_card for d in group),
            median_ratio=median_or_none(d.ratio for d in group),
            updated_at=now,
        )
        for key, group in grouped.items()
    ]


def calibration_refresh(*, now: datetime) -> dict:
    """Rewrite the calibration days of the last ``SERVING_ROLLUP_5M_DAYS`` days and the
    records built from them; returns counts ``{"days", "records"}``. Steps: the rollups by
    day (:func:`_rollup_rows_by_day`), each served model's days (:func:`_served_days`), the
    records (:func:`_calibration_records`), both tables replaced in one transaction."""
    window_days = settings.SERVING_ROLLUP_5M_DAYS
    start = datetime.combine(now.date() - timedelta(days=window_days - 1), datetime.min.time(), UTC)
    served = list(ServedModel.objects.select_related("allocation__gpu_model", "estimate"))
    ids = [s.allocation_id for s in served]
    rows_by_day = _rollup_rows_by_day(ids, start, now)
    branches = _driver_branches(ids)
    days: list[ServingCalibrationDay] = []
    grouped: dict[tuple, list[ServingCalibrationDay]] = defaultdict(list)
    for s in served:
        gpu = s.allocation.gpu_model
        spec = gpu_spec_from_fields(**{f: getattr(gpu, f) for f in GPU_SPEC_FIELDS})
        precision, engine = _key_names(s)
        key = (s.model_id, gpu.pk, engine, precision, branches.get(s.allocation_id))
        served_days = _served_days(s, rows_by_day[s.allocation_id], spec)
        days += served_days
        if served_days:
            grouped[key] += served_days
    with transaction.atomic():
        ServingCalibrationDay.objects.all().delete()
        ServingCalibrationDay.objects.bulk_create(days)
        CalibrationRecord.objects.all().delete()
        CalibrationRecord.objects.bulk_create(_calibration_records(grouped, now))
    return {"days": len(days), "records": len(grouped)}
