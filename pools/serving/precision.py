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

Pages show fewer places, and a page's CSV exports a signal as that page shows it
(:data:`SHOWN_PLACES`, :func:`signal_shown`): a user comparing the team dashboard's Serving table
or an allocation's Serving panel with the CSV reads the same number (the API keeps
:data:`PLACES`).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import ROUND_HALF_UP, Decimal

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


# Decimals pages show a signal with, in its stored unit, and their CSVs export it with. Running
# and waiting requests are 5-minute means: 0.7 is a queue, which a whole number would show as 1
# (and 0.3 as none). TTFT 3 places of a second (whole ms: 0.798 s on the Serving table, its CSV
# and an allocation's panel alike), TPOT / ITL 4 (0.1 ms; the panel writes it in ms);
# utilisation and KV-cache use whole per cent.
SHOWN_PLACES: dict[str, int] = {
    "requests_running": 1,
    "requests_waiting": 1,
    "kv_cache_usage_pct": 0,
    "gpu_util_pct": 0,
    "ttft_p50_s": 3,
    "ttft_p95_s": 3,
    "itl_p95_s": 4,
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


def shown_number(value: float, places: int) -> Decimal:
    """``value`` rounded half-up to ``places`` decimals from its shortest repr (``0.25, 1`` ->
    ``0.3``; a float's own formatting gives ``0.2``), as pages and CSVs write it (CSV cells
    through :func:`pools.web.csv_numbers.plain_number`)."""
    return Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP)


def signal_shown(name: str, value: float | None) -> Decimal | None:
    """``value`` of signal ``name`` as pages show it and their CSVs export it: rounded half-up to
    its :data:`SHOWN_PLACES` (``requests_waiting`` 0.74 -> ``0.7``); ``None`` stays unknown.
    ``value`` is the signal as read (:func:`signal_rounded`, as the API answers it), so a page
    rounds the API's number. ``KeyError`` for a signal no page shows."""
    if value is None:
        return None
    return shown_number(value, SHOWN_PLACES[name])
