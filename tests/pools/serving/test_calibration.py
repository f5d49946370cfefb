"""Measured against sized, the pure part: one allocation-day's measure and the comparison."""

from __future__ import annotations

import pytest

from pools.serving.calibration import compare, day_measure, median_or_none


def bucket(generation, running, prompt, finished, cards=2, seconds=300):
    return {
        "cards_held": cards,
        "bucket_seconds": seconds,
        "generation_tokens": generation,
        "prompt_tokens": prompt,
        "requests_running": running,
        "requests_finished": finished,
    }


def test_day_measure_by_hand():
    """Two 5-minute buckets on 2 cards, TP 1 (2 replicas), and one without token series:
    tok/s per card = (180,000 + 120,000) / (2 x 300 + 2 x 300) = 300,000 / 1,200 = 250;
    concurrency = (8 x 300 / 2 + 4 x 300 / 2) / 600 = 1,800 / 600 = 3.0 per replica;
    input = 100,000 / 500 = 200 tokens, output = 300,000 / 500 = 600 tokens."""
    rows = [
        bucket(180_000, 8, 60_000, 300),
        bucket(120_000, 4, 40_000, 200),
        bucket(None, 9, None, None),
    ]
    m = day_measure(rows, tp=1)
    assert m.tok_s_per_card == 250
    assert m.concurrency == 3.0
    assert (m.input_tokens, m.output_tokens, m.buckets) == (200, 600, 2)


def test_day_measure_tp2_counts_one_replica():
    """2 cards at TP 2 = 1 replica: concurrency = 6 running sequences (300 s) / 1 = 6.0."""
    assert day_measure([bucket(60_000, 6, 1_000, 10)], tp=2).concurrency == 6.0


def test_no_tokens_is_unknown_and_no_finished_requests_leaves_lengths_unknown():
    assert day_measure([bucket(None, 3, None, None)], tp=1) is None
    m = day_measure([bucket(60_000, 3, 1_000, 0)], tp=1)
    assert m.tok_s_per_card == 100  # 60,000 / (2 x 300)
    assert (m.input_tokens, m.output_tokens) == (None, None)


@pytest.mark.parametrize(
    ("measured", "ratio", "position"),
    [(250, 1.25, "above"), (150, 0.75, "inside"), (100, 0.5, "below")],
)
def test_compare_against_the_throughput_band(measured, ratio, position):
    """Sized 200 tok/s per card; band factors 0.717-1.134 (``throughput`` regime of
    error_bands.json): 250/200 = 1.25 above, 150/200 = 0.75 inside, 100/200 = 0.5 below."""
    result = compare(measured=measured, sized=200, low_factor=0.717, high_factor=1.134)
    assert result.ratio == pytest.approx(ratio)
    assert result.position == position


def test_compare_without_band_or_sized():
    assert compare(measured=100, sized=200, low_factor=None, high_factor=None).position == ""
    assert compare(measured=100, sized=0, low_factor=0.7, high_factor=1.1) is None
    assert median_or_none([None, 3.0, 1.0]) == 2.0
    assert median_or_none([None]) is None
