"""Measured against sized (pure): one allocation-day's output tok/s per card and concurrency
from its rollups, and the ratio to the sizing engine's figure with the error band's verdict.

Measured over the buckets where the engine reported generation tokens and running requests:

- tok/s per card = Σ generation_tokens ÷ Σ (cards_held x bucket_seconds);
- concurrency (sequences in flight per replica) = Σ (requests_running x bucket_seconds) ÷
  Σ bucket_seconds ÷ replicas, replicas = cards_held ÷ TP;
- mean input / output length = Σ prompt_tokens ÷ Σ requests_finished, Σ generation_tokens ÷
  Σ requests_finished (``None`` without finished requests: the estimate needs them).

Sized (:mod:`pools.calibration.services`): the sizing engine's tok/s per card at *each
bucket's* concurrency (whole sequences per replica, at least 1), averaged with the buckets'
card-seconds as weights (``concurrency_card_seconds``): the total the day would have served had
every bucket run as sized. Sizing once at the day's mean concurrency instead misses the curve's
bend whenever traffic swings by the hour (half the day at 1 sequence and half at 4 is not
2.5 sequences' worth when the mean is rounded, nor when per-sequence speed falls with batch).

Compared: ratio = measured ÷ sized; ``inside`` the band when P10 ≤ ratio ≤ P90 of the band's
measured ÷ predicted ratios (:mod:`pools.sizing.band`), else ``below`` or ``above``.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class DayMeasure:
    """``tok_s_per_card`` and ``concurrency`` as in the module docstring; lengths in tokens."""

    tok_s_per_card: float
    concurrency: float
    input_tokens: int | None
    output_tokens: int | None
    buckets: int
    #: ``((whole sequences per replica, card-seconds), ...)`` ascending: the weights sized
    #: figures are averaged with (module docstring).
    concurrency_card_seconds: tuple[tuple[int, float], ...] = ()


def day_measure(rows: Iterable[Mapping], *, tp: int) -> DayMeasure | None:
    """The measure of one allocation-day from its rollup rows (dicts with ``cards_held``,
    ``bucket_seconds``, ``generation_tokens``, ``prompt_tokens``, ``requests_running``,
    ``requests_finished``); ``None`` when no bucket reported both tokens and running requests."""
    used = [
        r
        for r in rows
        if r["generation_tokens"] is not None and r["requests_running"] is not None
        and r["cards_held"]
    ]  # fmt: skip
    if not used:
        return None
    card_seconds = sum(r["cards_held"] * r["bucket_seconds"] for r in used)
    seconds = sum(r["bucket_seconds"] for r in used)
    generated = sum(r["generation_tokens"] for r in used)
    running_per_replica = sum(
        r["requests_running"] * r["bucket_seconds"] / (r["cards_held"] / tp) for r in used
    )
    weights: dict[int, float] = {}
    for r in used:
        sequences = max(1, round(r["requests_running"] / (r["cards_held"] / tp)))
        weights[sequences] = weights.get(sequences, 0.0) + r["cards_held"] * r["bucket_seconds"]
    finished = sum(r["requests_finished"] or 0 for r in used)
    prompts = [r["prompt_tokens"] for r in used if r["prompt_tokens"] is not None]
    return DayMeasure(
        tok_s_per_card=generated / card_seconds,
        concurrency=running_per_replica / seconds,
        input_tokens=max(1, round(sum(prompts) / finished)) if finished and prompts else None,
        output_tokens=max(1, round(generated / finished)) if finished else None,
        buckets=len(used),
        concurrency_card_seconds=tuple(sorted(weights.items())),
    )


@dataclass(frozen=True)
class Comparison:
    ratio: float
    position: str


def compare(
    *, measured: float, sized: float, low_factor: float | None, high_factor: float | None
) -> Comparison | None:
    """ratio = ``measured`` ÷ ``sized`` (tok/s per card); ``position`` ``inside`` when
    ``low_factor`` ≤ ratio ≤ ``high_factor``, ``below`` / ``above`` outside, ``""`` without a
    band. ``None`` when ``sized`` is not positive."""
    if sized <= 0:
        return None
    ratio = measured / sized
    if low_factor is None or high_factor is None:
        position = ""
    elif ratio < low_factor:
        position = "below"
    elif ratio > high_factor:
        position = "above"
    else:
        position = "inside"
    return Comparison(ratio=ratio, position=position)


def median_or_none(values: Iterable[float | None]) -> float | None:
    """Median of the known values; ``None`` when none is known."""
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None
