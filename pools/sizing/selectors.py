"""Read-side queries of saved sizing estimates (a member sees their own and their teams'), the
fleet's calibration records and the GPU catalogue as sizing reads it."""

from __future__ import annotations

from django.db.models import QuerySet

from pools.inventory.models import GpuModel
from pools.sizing.gpus import GPU_SPEC_FIELDS, GpuSpec, gpu_spec_from_fields
from pools.sizing.models import CalibrationRecord, SizingEstimate


def sizing_estimate_list(*, user) -> QuerySet[SizingEstimate]:
    """Sizing estimates the user may see: all for pool admins; for others, those they created and
    those shared with one of their teams. Creator and team joined."""
    return SizingEstimate.objects.select_related("created_by", "team").visible_to(user)


def gpu_specs_by_slug() -> dict[str, GpuSpec]:
    """Every GPU model of the catalogue as the database keeps it - the shipped models as
    synced, with pool admins' edits and additions - as :class:`GpuSpec` by slug, in name order:
    the catalogue the sizing page and API read, for ``manage.py estimate``. One query."""
    rows = GpuModel.objects.order_by("name").values("slug", *GPU_SPEC_FIELDS)
    return {
        row["slug"]: gpu_spec_from_fields(**{field: row[field] for field in GPU_SPEC_FIELDS})
        for row in rows
    }


def measured_on_fleet(
    *, model_id: str, precision: str, engine: str, gpu_slugs: list[str]
) -> dict[str, dict]:
    """What this fleet measured for ``model_id`` at ``precision`` with ``engine`` (the sizing
    engine's names: ``FP16``, ``vllm``), per GPU model slug: the calibration record with the
    most days (of its driver groups) as ``{"tok_s_per_card", "days", "allocations",
    "median_ratio", "driver_branch", "driver_groups", "updated_at"}``. Slugs with no record are
    absent (unknown). One query."""
    records = CalibrationRecord.objects.filter(
        model_id=model_id,
        precision=precision,
        engine=engine,
        gpu_model__slug__in=gpu_slugs,
    ).values(
        "gpu_model__slug",
        "median_tok_s_per_card",
        "days",
        "allocations",
        "median_ratio",
        "driver_branch",
        "updated_at",
    )
    out: dict[str, dict] = {}
    for r in sorted(records, key=lambda r: (r["days"], r["updated_at"])):
        slug = r["gpu_model__slug"]
        groups = out.get(slug, {}).get("driver_groups", 0) + 1
        out[slug] = {
            "tok_s_per_card": round(r["median_tok_s_per_card"], 1),
            "days": r["days"],
            "allocations": r["allocations"],
            "median_ratio": None if r["median_ratio"] is None else round(r["median_ratio"], 3),
            "driver_branch": r["driver_branch"],
            "driver_groups": groups,
            "updated_at": r["updated_at"].isoformat(),
        }
    return out
