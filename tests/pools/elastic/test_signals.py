"""Prometheus timelines joined into policy samples and forecast demand."""

from __future__ import annotations

from pools.elastic.signals import demand_samples, metric_samples
from scheduler_adapters.prometheus import InferenceSignals, Sample

T = 1_800_000_000.0


def test_joined_samples_for_the_policy_and_the_forecast():
    signals = InferenceSignals(
        "team-a",
        util_pct=(Sample(T, 90.0), Sample(T + 60, 91.0), Sample(T + 120, None)),
        cards_reporting=(Sample(T, 2.0), Sample(T + 60, 2.0), Sample(T + 120, 2.0)),
        latency_s=(Sample(T, 1.25), Sample(T + 120, 0.5)),
        generation_tok_s=(Sample(T, 100.0), Sample(T + 60, 120.0)),
        prompt_tok_s=(Sample(T, 300.0),),
    )
    samples = metric_samples(signals, cards_held=2)
    assert [(s.at - T, s.util_pct, s.latency_ms) for s in samples] == [
        (0, 90.0, 1250.0),
        (60, 91.0, None),
        (120, None, 500.0),
    ]
    # 100 + 0.5 x 300 = 250; the prompt rate at +60 is missing: unknown, never 0
    assert demand_samples(signals) == [(T, 250.0), (T + 60, None)]


def test_a_mean_over_fewer_cards_than_held_is_unknown():
    """Issue 27 item 1: 8 cards held; at T all 8 reported, at T+60 only 4 (the others' exporter
    sent nothing), at T+120 the count itself is missing: only T's utilisation is known."""
    signals = InferenceSignals(
        "team-a",
        util_pct=(Sample(T, 10.0), Sample(T + 60, 10.0), Sample(T + 120, 10.0)),
        cards_reporting=(Sample(T, 8.0), Sample(T + 60, 4.0)),
        latency_s=(Sample(T, 0.2), Sample(T + 60, 0.2), Sample(T + 120, 0.2)),
    )
    samples = metric_samples(signals, cards_held=8)
    assert [(s.at - T, s.util_pct, s.latency_ms) for s in samples] == [
        (0, 10.0, 200.0),
        (60, None, 200.0),
        (120, None, 200.0),
    ]
