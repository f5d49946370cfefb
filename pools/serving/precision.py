"""The precision each serving signal is shown and exported with (pure): the stored rollups are
floats, and means, rates and Prometheus' ``increase()`` (which extrapolates a counter over the
bucket) leave binary noise such as ``32.800000000000004`` that no instrument measured.

Decimal places per signal, by unit (the figures are measurements, not money: floats stay):

- ``_pct`` (KV cache, prefix hits, GPU / SM / DRAM activity): 1 — dcgm-exporter reports whole
  percent and vLLM's KV-cache usage is a fraction a 0.1 % step resolves;
- ``_s`` latencies (TTFT, TPOT / ITL, end-to-end, p50 / p95): 4 — 0.1 ms, below the histogram
  buckets' own resolution (vLLM's smallest TTFT / ITL buckets are 1 ms);
- counts over the bucket (tokens, requests finished and failed, preemptions): 1 — whole events,
  with the tenth ``increase()`` extrapolation leaves kept so a small rate is not zeroed;
- gauges averaged over buckets (requests running / waiting, cards reporting / busy): 2;
- framebuffer ``_mib``: 1 (dcgm-exporter reports whole MiB); ``temperature_c``: 1;
  ``xid_last``: 0 (a code); ``nvlink_bytes_s``: 0 (bytes a second).

The calibration's figures have theirs in :data:`CALIBRATION_PLACES`.
"""

from __future__ import annotations

from collections.abc import Mapping

from pools.serving.fold import MAX_FIELDS, MEAN_FIELDS, SIGNAL_FIELDS, SUM_FIELDS, WEIGHTED_FIELDS

PLACES: dict[str, int] = {
    **{name: 2 for name in MEAN_FIELDS},
    **{name: 1 for name in SUM_FIELDS},
    **{name: 4 for name in (*WEIGHTED_FIELDS, *MAX_FIELDS) if name.endswith("_s")},
    **{name: 1 for name in SIGNAL_FIELDS if name.endswith(("_pct", "_mib"))},
    "temperature_c": 1,
    "xid_last": 0,
    "nvlink_bytes_s": 0,
}


# The calibration days' figures (``ServingCalibrationDay``): mean running requests per replica
# 2 places, output tok/s per card 1, the band's factors and measured ÷ sized 3 (0.1 %).
CALIBRATION_PLACES: dict[str, int] = {
    "concurrency": 2,
    "measured_tok_s_per_card": 1,
    "sized_tok_s_per_card": 1,
    "band_low_factor": 3,
    "band_high_factor": 3,
    "ratio": 3,
}


def signal_rounded(name: str, value: float | None) -> float | None:
    """``value`` of signal ``name`` rounded half-even to its :data:`PLACES` (a float; ``None``
    stays unknown). ``KeyError`` for a name that is not a signal."""
    if value is None:
        return None
    return float(round(value, PLACES[name]))


def signals_rounded(row: Mapping) -> dict:
    """``row`` with each signal field it has rounded (:func:`signal_rounded`); other fields
    (bucket, engine, missing, notes, cards held) as they are."""
    return {k: signal_rounded(k, v) if k in PLACES else v for k, v in row.items()}
