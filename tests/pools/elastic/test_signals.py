"""Prometheus timelines joined into policy samples and forecast demand."""

from __future__ import annotations

from pools.elastic.signals import demand_samples, metric_samples
from scheduler_adapters.prometheus import InferenceSignals, Sample

T = 1_800_000_000.0


def test_joined_samples_for_the_policy_and_the_forecast():
    signals = InferenceSignals(
        "team-a",
        util_pct=(Sample(T, 90.0), Sample(T + 60, 91.0), Sample(T + 120, None)),
        latency_s=(Sample(T, 1.25), Sample(T + 120, 0.5)),
        generation_tok_s=(Sample(T, 100.0), Sample(T + 60, 120.0)),
        prompt_tok_s=(Sample(T, 300.0),),
    )
    samples = metric_samples(signals)
    assert [(s.at - T, s.util_pct, s.latency_ms) for s in samples] == [
        (0, 90.0, 1250.0),
        (60, 91.0, None),
        (120, None, 500.0),
    ]
    # 100 + 0.5 x 300 = 250; the prompt rate at +60 is missing: unknown, never 0
    assert demand_samples(signals) == [(T, 250.0), (T + 60, None)]
