"""Several rollup rows of one allocation as one longer bucket (pure): the hourly compaction,
and the 7-day chart's hourly points.

Means of the gauges, sums of the counts (``None`` when no bucket knew them), maxima of the
temperature, the XID code and the p95s (the worst 5 minutes of the hour), and the p50s weighted
by the requests that finished in each bucket (a median of medians is not the hour's median;
this is the closest figure the rows keep). Buckets the hour lacks are noted, so a sum over part
of an hour is never taken for all of it.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

MEAN_FIELDS = (
    "requests_running", "requests_waiting", "kv_cache_usage_pct", "prefix_cache_hit_pct",
    "gpu_util_pct", "sm_active_pct", "dram_active_pct", "fb_used_mib", "fb_free_mib",
    "nvlink_bytes_s", "cards_reporting", "cards_busy",
)  # fmt: skip
SUM_FIELDS = ("prompt_tokens", "generation_tokens", "requests_finished", "requests_failed",
              "preemptions")  # fmt: skip
MAX_FIELDS = ("temperature_c", "xid_last", "ttft_p95_s", "itl_p95_s", "e2e_p95_s")
WEIGHTED_FIELDS = ("ttft_p50_s", "itl_p50_s", "e2e_p50_s")
SIGNAL_FIELDS = MEAN_FIELDS + SUM_FIELDS + MAX_FIELDS + WEIGHTED_FIELDS
ROW_FIELDS = (*SIGNAL_FIELDS, "cards_held", "engine", "missing", "notes", "bucket_seconds")


def fold(rows: Sequence[Mapping], seconds: int) -> dict:
    """``rows`` (dicts with :data:`ROW_FIELDS`, all of one allocation and one longer bucket of
    ``seconds``) as one row's fields (module docstring)."""

    def known(name):
        return [v for r in rows if (v := r.get(name)) is not None]

    out: dict = {
        "cards_held": max(r["cards_held"] for r in rows),
        "engine": "+".join(sorted({p for r in rows for p in (r["engine"] or "").split("+") if p})),
        "missing": sorted({m for r in rows for m in r["missing"]}),
        "notes": list(dict.fromkeys(n for r in rows for n in r["notes"]))[:20],
    }
    for name in MEAN_FIELDS:
        values = known(name)
        out[name] = statistics.fmean(values) if values else None
    for name in SUM_FIELDS:
        values = known(name)
        out[name] = sum(values) if values else None
    for name in MAX_FIELDS:
        values = known(name)
        out[name] = max(values) if values else None
    for name in WEIGHTED_FIELDS:
        pairs = [
            (r[name], r.get("requests_finished") or 0.0) for r in rows if r.get(name) is not None
        ]
        weight = sum(w for _, w in pairs)
        out[name] = sum(v * w for v, w in pairs) / weight if weight else None
    covered = sum(r["bucket_seconds"] for r in rows)
    if covered < seconds:
        expected = seconds // rows[0]["bucket_seconds"]
        out["notes"] = [*out["notes"], f"{len(rows)} of {expected} five-minute buckets"]
    return out
