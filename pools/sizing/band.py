"""How far to trust a modelled token rate: an error band from the validation residuals.

``error_bands.json`` (next to this module) is written by ``benchmarks/sizing.py --write-bands``
from its leave-one-source-out cross-validation over every bundled validation set (the 2026
mixture-of-experts, NVFP4 and Blackwell rows included): for every published measurement the
estimator is scored with constants fitted without that row's source, and the ratio measured /
predicted of the output token rate is kept. Rows are grouped by **regime**:

- ``load``: ``batch-1`` (one sequence in flight) or ``throughput`` (more than one, a request
  rate, or saturation);
- ``precision``: ``16-bit`` (FP16/BF16), ``8-bit W8A8`` (FP8 or INT8 weights and activations)
  or ``weight-only`` (GPTQ / AWQ INT4, W8A16, FP8 weight-only);
- ``generation``: the GPU architecture (``Ampere``, ``Ada``, ``Hopper``, ...).

The band of an estimate is predicted tok/s × [P10, P90] of the ratios of the most specific
regime with at least :data:`MIN_ROWS` rows (load + precision + generation, then load +
precision, then load, then all rows), so "likely between X and Y tok/s" covers 8 of 10 similar
published measurements.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pools.sizing.gpus import GpuSpec
from pools.sizing.memory import Precision

BANDS_JSON = Path(__file__).with_name("error_bands.json")

#: Fewest validation rows a regime needs before its own quantiles are used: with fewer, the
#: P10/P90 of a handful of rows are noise, so the next wider regime answers.
MIN_ROWS = 8


def load_regime(batch: float) -> str:
    """``batch-1`` for at most one sequence in flight, else ``throughput``."""
    return "batch-1" if batch <= 1 else "throughput"


def precision_class(precision: Precision) -> str:
    """``16-bit``, ``8-bit W8A8``, ``4-bit W4A4`` (NVFP4 / MXFP4 on FP4 tensor cores: the
    TensorRT-LLM perf-overview's Blackwell rows) or ``weight-only`` (see the module
    docstring)."""
    if precision.weight_only:
        return "weight-only"
    if precision.weight_bits >= 16:
        return "16-bit"
    if precision.weight_bits <= 4:
        return "4-bit W4A4"
    return "8-bit W8A8"


def gpu_generation(gpu: GpuSpec) -> str:
    """The first word of the catalogue architecture (``Hopper (sm_90)`` -> ``Hopper``)."""
    words = (gpu.architecture or "").split()
    return words[0] if words else "unknown"


def regime_keys(*, load: str, precision: str, generation: str) -> tuple[str, ...]:
    """Regime keys from the most specific to ``all``, as ``error_bands.json`` names them."""
    return (
        f"{load}|{precision}|{generation}",
        f"{load}|{precision}",
        load,
        "all",
    )


@dataclass(frozen=True)
class ErrorBand:
    """``low_factor`` / ``high_factor``: P10 / P90 of measured ÷ predicted output tok/s over
    ``rows`` cross-validated rows of ``regime``. ``low_tok_s`` / ``high_tok_s`` = the estimate's
    tok/s × those factors.
    """

    regime: str
    rows: int
    low_factor: float
    high_factor: float
    low_tok_s: float
    high_tok_s: float

    @property
    def regime_label(self) -> str:
        """The regime as people read it: its parts joined by commas ("throughput, 4-bit W4A4,
        Blackwell"); the pooled ``all`` regime as "all published measurements"."""
        if self.regime == "all":
            return "all published measurements"
        return ", ".join(self.regime.split("|"))

    def as_dict(self) -> dict[str, object]:
        """JSON-ready dict with the same field names, plus ``regime_label``."""
        return {**self.__dict__, "regime_label": self.regime_label}


@cache
def _bands(path: Path = BANDS_JSON) -> dict[str, dict]:
    return json.loads(path.read_text(encoding="utf-8"))["regimes"]


def error_band(
    *, tok_s: float, batch: float, precision: Precision, gpu: GpuSpec
) -> ErrorBand | None:
    """The band around ``tok_s`` for an estimate at ``batch`` sequences of ``precision`` on
    ``gpu``; ``None`` when no regime (not even ``all``) has :data:`MIN_ROWS` rows.
    """
    bands = _bands()
    keys = regime_keys(
        load=load_regime(batch),
        precision=precision_class(precision),
        generation=gpu_generation(gpu),
    )
    for key in keys:
        entry = bands.get(key)
        if entry and entry["rows"] >= MIN_ROWS:
            return ErrorBand(
                regime=key,
                rows=entry["rows"],
                low_factor=entry["p10_ratio"],
                high_factor=entry["p90_ratio"],
                low_tok_s=tok_s * entry["p10_ratio"],
                high_tok_s=tok_s * entry["p90_ratio"],
            )
    return None
