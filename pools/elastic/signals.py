"""From Prometheus timelines to what the policy and the forecast read. Pure, no ORM.

:class:`~scheduler_adapters.prometheus.InferenceSignals` come from one batch of range queries
(same start and step for every metric), so a namespace's metrics share timestamps; they are
joined on them here. A timestamp where utilisation is missing gives no sample at all (the
policy sees a gap, which is unknown); a missing latency gives ``latency_ms=None``. A mean taken
over fewer cards than the allocation holds is no mean of its cards: the sample's utilisation is
``None`` (unknown), so nothing scales on what the exporter did not report (issue 27 item 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler_adapters.prometheus import InferenceSignals

from .policy import MetricSample

INPUT_TOKEN_WEIGHT = 0.5  # DESIGN.md "Sizing": equivalent output = output + input x 0.5
# What one pass of the loop asks Prometheus: the two signals it scales on, and the request
# rate it records with them (pools.elastic.models.SignalReading). One range query each.
SCAN_METRICS = ("util_pct", "cards_reporting", "latency_s", "request_s")


@dataclass(frozen=True)
class Reading:
    """The newest sample of one namespace: Unix seconds, utilisation (%), mean latency (ms),
    requests finished per second; ``None`` is unknown."""

    at: float
    util_pct: float | None
    latency_ms: float | None
    request_s: float | None


def metric_samples(signals: InferenceSignals, *, cards_held: int) -> list[MetricSample]:
    """Utilisation (%) and mean latency (s -> ms) joined on their timestamps, in time order.
    Utilisation is ``None`` where fewer than ``cards_held`` cards reported (or the count is
    missing): a mean over some of the cards says nothing about the others."""
    latency = {s.timestamp: s.value for s in signals.latency_s}
    reporting = {s.timestamp: s.value for s in signals.cards_reporting}
    out = []
    for sample in signals.util_pct:
        seconds = latency.get(sample.timestamp)
        cards = reporting.get(sample.timestamp)
        seen_all = cards is not None and cards >= cards_held
        out.append(
            MetricSample(
                sample.timestamp,
                sample.value if seen_all else None,
                None if seconds is None else seconds * 1000.0,
            )
        )
    return out


def demand_samples(
    signals: InferenceSignals, *, input_weight: float = INPUT_TOKEN_WEIGHT
) -> list[tuple[float, float | None]]:
    """Output-equivalent tokens/s: ``generation + input_weight x prompt``; ``None`` where
    either rate is unknown (a missing counter is never 0 tokens)."""
    prompt = {s.timestamp: s.value for s in signals.prompt_tok_s}
    out: list[tuple[float, float | None]] = []
    for sample in signals.generation_tok_s:
        prompt_rate = prompt.get(sample.timestamp)
        if sample.value is None or prompt_rate is None:
            out.append((sample.timestamp, None))
        else:
            out.append((sample.timestamp, sample.value + input_weight * prompt_rate))
    return out


def newest_reading(signals: InferenceSignals, *, cards_held: int) -> Reading | None:
    """The newest utilisation sample with the latency and request rate of the same timestamp
    (``None`` when that metric has no sample there, and utilisation ``None`` when fewer than
    ``cards_held`` cards reported, as in :func:`metric_samples`); ``None`` without any
    utilisation."""
    if not signals.util_pct:
        return None
    newest = max(signals.util_pct, key=lambda s: s.timestamp)
    latency = {s.timestamp: s.value for s in signals.latency_s}.get(newest.timestamp)
    rate = {s.timestamp: s.value for s in signals.request_s}.get(newest.timestamp)
    cards = {s.timestamp: s.value for s in signals.cards_reporting}.get(newest.timestamp)
    return Reading(
        newest.timestamp,
        newest.value if cards is not None and cards >= cards_held else None,
        None if latency is None else latency * 1000.0,
        rate,
    )
