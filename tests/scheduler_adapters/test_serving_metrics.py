"""The serving family queries (names of both engines, current and previous), grouping their
answers, and quantiles from histogram buckets, checked against values worked out by hand."""

from __future__ import annotations

import math

import pytest
from serving_support import histogram, term

from scheduler_adapters.serving_metrics import (
    FAMILIES,
    answers_from_series,
    family_queries,
    histogram_quantile,
)

# Cumulative increases over 5 min of one TTFT histogram: 100 requests.
BUCKETS = {0.1: 10.0, 0.25: 40.0, 0.5: 90.0, 1.0: 100.0, math.inf: 100.0}


def test_quantiles_interpolate_inside_the_bucket_like_prometheus():
    """p50: rank 0.5 x 100 = 50 falls in (0.25, 0.5] holding 40..90:
    0.25 + 0.25 x (50 - 40) / (90 - 40) = 0.30 s.
    p95: rank 95 falls in (0.5, 1.0] holding 90..100: 0.5 + 0.5 x (95 - 90) / 10 = 0.75 s.
    p05: rank 5 in the first bucket, from 0: 0.1 x 5 / 10 = 0.05 s."""
    assert histogram_quantile(0.5, BUCKETS)[0] == pytest.approx(0.30)
    assert histogram_quantile(0.95, BUCKETS)[0] == pytest.approx(0.75)
    assert histogram_quantile(0.05, BUCKETS)[0] == pytest.approx(0.05)


def test_a_rank_in_the_inf_bucket_answers_the_highest_finite_bound():
    """100 requests, 20 above 1 s: rank 95 lies in (1, +Inf] -> 1.0 (Prometheus' rule)."""
    assert histogram_quantile(0.95, {0.5: 50.0, 1.0: 80.0, math.inf: 100.0})[0] == 1.0


@pytest.mark.parametrize(
    ("buckets", "why"),
    [
        ({0.1: 10.0, 0.5: 90.0}, "no +Inf bucket"),
        ({0.1: 10.0, 0.5: 5.0, math.inf: 100.0}, "bucket counts fall as le grows"),
        ({0.1: 0.0, math.inf: 0.0}, "no observation"),
        ({math.inf: 7.0}, "only the +Inf bucket"),
    ],
)
def test_histograms_that_cannot_be_trusted_give_no_quantile(buckets, why):
    assert histogram_quantile(0.5, buckets) == (None, why)


def test_one_query_per_family_reading_current_and_previous_names_of_both_engines():
    queries = family_queries()
    assert tuple(queries) == FAMILIES and len(FAMILIES) == 6
    assert "vllm:kv_cache_usage_perc" in queries["engine_load"]
    assert "vllm:gpu_cache_usage_perc" in queries["engine_load"]
    assert "sglang:token_usage" in queries["engine_load"]
    assert "vllm:inter_token_latency_seconds_bucket" in queries["itl"]
    assert "vllm:time_per_output_token_seconds_bucket" in queries["itl"]
    assert "sglang:inter_token_latency_seconds_bucket" in queries["itl"]
    # counters through increase() (Prometheus handles resets), histograms kept by le
    assert "increase(vllm:generation_tokens_total[300s])" in queries["engine_counters"]
    assert "sum by (namespace, portal_allocation, le) (increase(" in queries["ttft"]
    # dcgm-exporter names in either case, and the workload namespace over the exporter's
    assert '__name__=~"DCGM_FI_DEV_FB_FREE|dcgm_fi_dev_fb_free"' in queries["gpu"]
    assert '"exported_namespace", "(.+)"' in queries["gpu"]
    # busy cards: the threshold on each metric's own scale (30 % = 0.3 of a ratio)
    assert ">= 0.3)" in queries["gpu"] and ">= 30)" in queries["gpu"]


def test_answers_are_grouped_by_target_scaled_and_nan_is_skipped_with_a_note():
    """KV usage 0.42 (ratio) reads 42 %; a NaN TPOT value is noted and left out."""
    answers = answers_from_series(
        {
            "engine_load": [
                term("kv_cache_usage_pct", "vllm", "vllm:kv_cache_usage_perc", 0.42),
                term("requests_waiting", "vllm", "vllm:num_requests_waiting", None),
            ],
            "ttft": histogram(
                "ttft", "vllm", "vllm:time_to_first_token_seconds_bucket", {"0.1": 3, "+Inf": 4}
            ),
        }
    )
    readings = answers.targets[("team-nlp", "")]
    assert readings.values["kv_cache_usage_pct"] == {
        ("vllm", "vllm:kv_cache_usage_perc"): pytest.approx(42.0)
    }
    assert "requests_waiting" not in readings.values
    assert readings.notes == ["vllm:num_requests_waiting: NaN or Inf from Prometheus, skipped"]
    assert readings.buckets["ttft"][("vllm", "vllm:time_to_first_token_seconds_bucket")] == {
        0.1: 3,
        math.inf: 4,
    }
