"""LLM sizing: how many cards of which GPU model a model and a workload need, and what they cost.

Pure functions over frozen dataclasses; no ORM, no I/O beyond reading the shipped JSON catalogues.
Every result carries its intermediate numbers with the unit in the field name (``_bytes``, ``_ms``,
``_s``, ``_tok_s``, ``_gbps``), so a page can show the arithmetic and a user can check it.

Modules, bottom to top:

- :mod:`pools.sizing.presets` - model architectures (``models.json``) and :class:`ModelArch`.
- :mod:`pools.sizing.gpus` - :class:`~pools.sizing.gpus.GpuSpec` from the GPU catalogue or DB row.
- :mod:`pools.sizing.engines` - serving engines and their generations (memory rule, batch cap,
  step overhead, compute efficiency), chosen by name and version.
- :mod:`pools.sizing.memory` - precisions, weights and KV-cache bytes, fit, smallest TP degree.
- :mod:`pools.sizing.throughput` - decode/prefill step times, TPOT, TTFT, tok/s of one replica.
- :mod:`pools.sizing.band` - the error band of a token rate, from cross-validated residuals
  (``error_bands.json``, written by ``benchmarks/sizing.py --write-bands``).
- :mod:`pools.sizing.demand` - traffic to peak requests/s, equivalent tokens, replicas, cards.
- :mod:`pools.sizing.plan` - one result row per GPU model, warnings, cost, ranking.

Bad input raises :class:`SizingInputError` (a :class:`pools.common.errors.InvalidInput`) with a
stable ``code`` in ``data["reason"]``; nothing here returns NaN, infinity or a negative count.
"""

from __future__ import annotations

from dataclasses import dataclass

from pools.common.errors import InvalidInput


class SizingInputError(InvalidInput):
    """An estimate cannot be made from these inputs.

    ``data["reason"]`` is a stable snake_case reason (``unknown_model``, ``not_positive``,
    ``context_too_long``, ``unknown_precision``, ...) and ``data["field"]`` names the input
    at fault where there is one.
    """

    code = "sizing_invalid_input"


@dataclass(frozen=True)
class SizingWarning:
    """Something the user should know about a result that is still given.

    ``code`` is stable snake_case (``does_not_fit``, ``tpot_over_target``, ``no_nvlink_tp``,
    ``fp8_weight_only``, ``compute_unknown`` ...); ``message`` says it in words, with numbers.
    """

    code: str
    message: str

    def as_dict(self) -> dict[str, str]:
        """``{"code": ..., "message": ...}`` for JSON output."""
        return {"code": self.code, "message": self.message}
